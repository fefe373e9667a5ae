// Package dora computes the four DORA figures of a Pipeline (deployment
// frequency, lead time for changes, change-failure rate and time to
// restore) from what the hub records: the ReleaseHistories of the
// Pipeline's targets and its Promotions. It is pure: it reads the objects
// it is given and the time it is told, and talks to no API server, so the
// hub's gauges (controllers/dora/gauges) and `tugboat status --dora`
// compute the same figures the same way. docs/dora.md defines each figure.
//
// It is not a store of history: what it sees is what the hub keeps (the
// last revisions of each release, the last Promotions of each Pipeline),
// so figures over a window longer than that history count only what is
// still recorded.
package dora
