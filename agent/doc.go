// Package agent assembles the spoke agent (`tugboat agent`): one
// controller-runtime manager on the spoke cluster that watches Helm release
// storage and the workloads each release owns (label-selected informers),
// serves the ownership admission webhooks, backfills labels on objects that
// existed before it, and reports to the hub through the signed,
// at-least-once reporter. It needs no credentials to the hub's cluster: only
// the spoke's HMAC key and the hub's URL.
//
// The parts live in the packages below: release (decoding), ownership
// (index and backfill), health (kstatus), tracker (releases → events and
// snapshots) and reporter (delivery). agent/admission holds the webhooks.
package agent
