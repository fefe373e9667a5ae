// Package docsexamples keeps the examples of docs/ true. Its tests extract
// the ```yaml blocks of every page and apply each Kubernetes object with a
// server-side dry run to a real kube-apiserver of the e2e harness, with
// tugboat's CRDs (config.CRDs) and Flux's installed, so a misspelled field, a
// wrong enum value or a broken CEL rule fails; run the request-signing
// snippets of docs/ci.md with bash, openssl and curl against the hub's real
// pipeline API handler; and check that docs/operations.md lists every metric
// the hub and the agent export and that its alert rules only use those.
//
// The package holds tests only; nothing imports it.
package docsexamples
