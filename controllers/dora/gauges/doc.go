// Package gauges exports the DORA figures of every Pipeline (computed by
// controllers/dora) as Prometheus gauges in controller-runtime's metrics
// registry, served on the hub's /metrics. Its Reconciler recomputes a
// Pipeline's figures when the Pipeline, one of its Promotions or one of its
// targets' ReleaseHistories changes (at most once per MinInterval), and
// every Resync as the window slides; it removes the gauges of a deleted
// Pipeline. It writes nothing to the API server.
package gauges
