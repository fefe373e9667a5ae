// Package deliver is the hub's notification controller. It decides which
// notices are due from what the hub already records — Promotions (their
// phases, votes and targets), Pipelines (their rollback holds) and the
// ReleaseHistories of the Pipelines' targets (deployments) — sends them
// through the notifiers of each Pipeline's spec.notify, and records every
// delivery in the status of the object it is about.
//
// Delivery is at-least-once: a notice is sent, then recorded Delivered; a
// hub that dies in between sends it again after the restart, and one that
// dies before sending sends it after the restart. A notice recorded
// Delivered or Failed is never sent again. Failures are retried with capped
// back-off up to Options.MaxAttempts, counted in tugboat_notifications_total
// and shown in the Pipeline's Notified condition. The controller has its
// own work queue: a slow or failing notifier never blocks or slows a
// promotion.
//
// It is not a notifier: those live in controllers/notify/<kind>.
package deliver
