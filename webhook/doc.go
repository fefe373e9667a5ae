// Package webhook holds tugboat's HTTP entry points: the hub's receiver for
// what spokes, Flux and CI send (webhook/receiver), and the agent's
// admission webhooks. It has no code of its own.
package webhook
