// Package chaos holds the fault injectors of the end-to-end chaos suite
// (e2e/chaos_test.go): a TCP proxy that drops, delays and cuts the link
// between an agent and the hub, and the suite's configuration (the seed
// that fixes its schedule, and how much it is scaled).
//
// It is for tests only; tugboat itself does not use it.
package chaos
