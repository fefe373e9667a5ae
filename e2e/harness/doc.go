// Package harness starts complete, local Kubernetes clusters for tests and for
// `tugboat dev up`, with no Docker: etcd, kube-apiserver,
// kube-controller-manager (deployment, replicaset, garbage-collector,
// node-lifecycle, namespace and job controllers), kube-scheduler and kwok,
// which runs fake nodes whose pods become Ready without a kubelet.
//
// Every process of a cluster runs in a process group of its own, on
// loopback ports chosen at start, with the cluster's own temporary
// directory, so several clusters run side by side. Stop kills the groups
// and waits; StartT does so at test
// cleanup, also after a failure or panic, and prints the log directory when
// the test failed. Restart, Pause and Resume crash, restart and hang one
// process of a running cluster (etcd, the API server, ...), for fault
// injection (the chaos suite, e2e/chaos_test.go).
//
// The harness is for tests and local development only; it makes no attempt to
// be a production cluster (no kubelet, no networking, no persistence).
package harness
