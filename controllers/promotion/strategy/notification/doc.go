// Package notification is the notification promotion strategy: it announces
// the promotion as a Flux event (reason Promote) to notification-controller's
// event endpoint, for an external actor subscribed through Flux Alerts and
// Providers to carry it out. The Promotion then waits for the targets to
// report the version, as with every strategy.
//
// The body is Flux's event.toolkit.fluxcd.io/v1beta1 Event
// (fluxcd/pkg/apis/event), sent through fluxcd/pkg/runtime/events' Recorder
// (controllers/notify/flux.Sender, shared with the flux notifier), which sets
// its timestamp and reportingInstance. Its involved object is the Pipeline
// (kind Pipeline, apiVersion tugboat.dev/v1alpha1).
// notification-controller keeps only metadata keys prefixed with the involved
// object's API group and strips the prefix, so the metadata is sent as
// tugboat.dev/environment, tugboat.dev/version, tugboat.dev/promotion,
// tugboat.dev/pipeline and tugboat.dev/revision (the version), and notifiers
// see environment, version, promotion, pipeline and revision.
// tugboat.dev/token carries the Promotion's UID: notification-controller
// rate-limits repeats of an event by involved object, message, revision and
// token, and drops the token before notifying.
//
// notification-controller answers 429 to a repeat inside its rate-limit
// window (5 minutes by default). For this strategy a repeat is a retry of a
// delivery that was already accepted, so 429 counts as delivered.
//
// A limit of stock Flux: an Alert's eventSources take kinds from a fixed
// list of Flux kinds (an enum in notification-controller's CRD), which does
// not include Pipeline. A stock notification-controller therefore accepts
// these events (202) but dispatches them to no Provider; they reach an actor
// only through an event endpoint that selects them (a patched or proxied
// notification-controller, or any receiver of Flux's event format).
package notification
