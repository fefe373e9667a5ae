// Package notification is the notification promotion strategy: it announces
// the promotion as a Flux event (reason Promote) to notification-controller's
// event endpoint, for an external actor subscribed through Flux Alerts and
// Providers to carry it out. The Promotion then waits for the targets to
// report the version, as with every strategy.
//
// The body is Flux's event.toolkit.fluxcd.io/v1beta1 Event
// (fluxcd/pkg/apis/event), sent through fluxcd/pkg/runtime/events' Recorder
// (controllers/notify/flux.Sender, shared with the flux notifier), which sets
// its timestamp and reportingInstance. notification-controller routes an
// event only to Alerts whose eventSources select its involved object's kind,
// an enum of Flux kinds, so the events are about HelmReleases
// (helm.toolkit.fluxcd.io/v2), one per distinct HelmRelease among the
// destination's targets, chosen as the flux notifier chooses them
// (NewEvents); an Alert selecting those HelmReleases receives them.
// notification-controller keeps only metadata keys prefixed with the involved
// object's API group and strips the prefix, so the metadata is sent as
// helm.toolkit.fluxcd.io/environment, .../version, .../promotion,
// .../pipeline, .../from, .../targets and .../revision (the version), and
// notifiers see environment, version, promotion, pipeline, from, targets and
// revision. helm.toolkit.fluxcd.io/token carries the Promotion's UID:
// notification-controller rate-limits repeats of an event by involved
// object, message, revision and token, and drops the token before notifying.
//
// notification-controller answers 429 to a repeat inside its rate-limit
// window (5 minutes by default). For this strategy a repeat is a retry of a
// delivery that was already accepted, so 429 counts as delivered.
package notification
