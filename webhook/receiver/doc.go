// Package receiver is the hub's HTTP receiver: it authenticates what spoke
// agents and Flux notification-controller send, drops redeliveries and late
// news, and hands the rest to a Store (the hub's ReleaseHistory writer).
//
// It is not the store: it persists nothing, and it does not serve /metrics
// (the manager does; the receiver registers its metrics in
// controller-runtime's registry).
//
// # Endpoints
//
//	POST /v1/spokes/{spoke}/events  wire.EventBatch     → 202 wire.AcceptedResponse
//	POST /v1/spokes/{spoke}/state   wire.StateSnapshot  → 202 wire.AcceptedResponse
//	POST /v1/flux/{spoke}           a Flux Event        → 202 wire.AcceptedResponse
//	GET  /v1/spokes/{spoke}/actions       (long-poll)      → 200 wire.ActionList
//	POST /v1/spokes/{spoke}/actions/{id}  wire.ActionOutcome → 200 {}
//	GET  /healthz                   200 always
//	GET  /readyz                    200 once Options.ReadyCheck passes, else 503
//
// # Order of checks (agent endpoints)
//
//  1. method (405) and path (404);
//  2. Content-Encoding: identity or gzip, else 415;
//  3. the body as sent, at most Options.BodyLimit bytes (StateBodyLimit for
//     state), else 413. Until its signature is checked a body is anyone's:
//     its buffer grows with the bytes that arrive (never to a claimed
//     Content-Length), past Options.PreAuthBodyLimit it needs one of
//     Options.PreAuthLargeBodies slots, and all such buffers share
//     Options.PreAuthMemoryLimit; a request that finds no slot or budget
//     gets 503 with Retry-After;
//  4. the Spokes of the path's name (Options.Spokes, a SpokeDirectory; in
//     every namespace) and the v1 signature over the method, the escaped
//     path and the body exactly as sent — before anything decompresses or
//     parses it — checked against each one's two keys (current and previous,
//     padded with random dummy keys; keys shorter than wire.MinSpokeKeySize never
//     match). The request's Spoke is the one candidate whose key verifies:
//     none, or two, is 401. An unknown spoke, a bad signature, a broken key
//     and a timestamp outside Options.ReplayWindow get the same 401 body
//     and the same HMAC work; the reason is only in the rejected_total
//     metric and the debug log. A directory that is not ready gives 503;
//  5. a suspended Spoke (spec.suspend) gets 503 with Retry-After and a body
//     saying so; then the Spoke's token bucket (Options.RateLimit,
//     RateBurst), else 429 with Retry-After;
//  6. gzip bodies are decompressed up to Options.DecompressedLimit, else 413;
//  7. strict decoding and validation (wire.DecodeEventBatch,
//     wire.DecodeStateSnapshot) and the body's spoke equal to the path's,
//     else 400 naming the fields;
//  8. for state, the snapshot's takenAt must be after the last one recorded
//     for the Spoke (kept in memory and persisted through the directory),
//     else 409, and at most Options.ReplayWindow ahead of the hub's clock,
//     else 400;
//  9. the Store records into the Spoke authenticated in 3, named explicitly
//     (Spoke.Authenticated: namespace, name, key id), else 503 with
//     Retry-After.
//
// With Content-Encoding: gzip, the signature covers the compressed bytes
// (the HTTP body as sent), so the hub never inflates data from a caller it
// has not authenticated. The path signed is the one the receiver sees: an
// ingress must not rewrite it.
//
// # Agent actions
//
// With Options.Actions set (else 404), the agent of a spoke long-polls for
// the actions of the helm promotion strategy and reports their outcomes.
// Both requests are authenticated and rate limited like the others; the
// poll's signature covers an empty body, and a poll counts as one request.
// The poll is answered at once when the ingest.ActionStore has open actions for
// the spoke, else held until it has some (ingest.ActionStore.Wait) or
// Options.ActionPollTimeout passes ({"actions":[]}), and ended at once when
// the server shuts down. An outcome is decoded strictly (400 naming the
// field; its id must equal the path's); an action the spoke does not have
// is 404 (a spoke never reports another's), one already reported
// differently 409, and a repeated report 200.
//
// # Duplicates and order
//
// Event ids (wire.NewEventID) are remembered in a bounded FIFO cache
// (Options.DedupeCacheSize; the oldest id is forgotten first); an event
// seen before is counted in Duplicates and not recorded again. An id counts
// as seen only once the store committed its event, so a batch answered 503
// is not a duplicate when it is retried. When a redelivery arrives while
// another request is still writing the same ids, it waits for that write
// (up to Options.InFlightWait): committed, the ids are duplicates; failed,
// the redelivery writes them itself. Past the wait it is answered 503 with
// Retry-After, never 202, so a 202 always means "recorded".
//
// Per spoke and release the receiver remembers the newest revision seen. An
// event about the release's state (ReleaseStarted, ReleaseStatus,
// HealthChanged) for an older revision is counted as stale in the
// events_total{result="stale"} metric but still recorded (and counted in
// Accepted): it is that older revision's own truth, such as Helm marking it
// superseded, and the store never moves a release's current revision back.
//
// # Flux
//
// POST /v1/flux/{spoke} takes what a notification-controller Provider of
// type generic-hmac sends: a Flux Event (github.com/fluxcd/pkg/apis/event/
// v1beta1) signed with "X-Signature: sha256=<hex HMAC-SHA256 of the body>"
// (sha512 is accepted too; sha1 is refused), keyed with the Spoke's Flux
// key, current or previous (the Provider Secret's token): Spoke.FluxKeys,
// never the agent's keys, so whoever reads Flux's Secret on the spoke
// cannot act as its agent. A Spoke without a Flux key is refused. Flux
// signs no timestamp, so the event's own timestamp must be within
// Options.ReplayWindow.
//
// Only events whose involvedObject is a HelmRelease are recorded; others
// are answered 202 with nothing accepted. helm-controller's reasons map to
// a wire.Event of kind ReleaseStatus carrying a State:
//
//	reason                                 status            health      revision
//	InstallSucceeded, UpgradeSucceeded     deployed          Current     from message
//	RollbackSucceeded                      deployed          Unknown     0
//	TestSucceeded                          deployed          Current     from message
//	TestFailed                             deployed          Failed      from message
//	UninstallSucceeded                     uninstalled       Unknown     from message
//	InstallFailed, UpgradeFailed,
//	RollbackFailed, UninstallFailed,
//	RemediationFailed                      failed            Failed      0
//	Progressing "Running '<action>'"       pending-install,  InProgress  0
//	                                       pending-upgrade,
//	                                       pending-rollback,
//	                                       uninstalling
//
// helm-controller rolls back only to remediate a failed release, and
// sends no event when it then retries or stalls (RetriesExceeded): after a
// RollbackSucceeded the old version runs while the HelmRelease is not
// Ready, so its health is Unknown, with a reason saying so, until the next
// release event.
//
// Every other reason (ArtifactFailed, DependencyNotReady, DriftDetected,
// a Progressing without an action, ...) becomes a KubernetesEvent without a
// State: it is kept in the release's event list but does not change its
// state, since the revision that runs is unaffected.
//
// Revision 0 means unknown: Flux events carry no Helm revision number
// except in helm-controller's message ("release apps/web.v7 with chart
// web@1.4.0"), and a rollback names the revision it went back to, not the
// one Helm wrote. The Store assigns it (it matches the chart version to a
// revision it knows or appends one). Such events pass wire validation in
// every other respect.
//
// The release's namespace and name come from the message when it names
// them, else from metadata "release-namespace" and "release-name", else
// they are the HelmRelease's own. The chart version is metadata "revision"
// (Flux's "@sha256:..." and "+<digest>" suffixes stripped; other build
// metadata kept), else the message's; the chart name is metadata "chart",
// else the message's, else the HelmRelease's name. "app-version" and
// "token" (the values digest) fill appVersion and valuesDigest. Metadata
// keys are read both as notification-controller forwards them ("revision")
// and as helm-controller emits them ("helm.toolkit.fluxcd.io/revision").
// The event's object is the HelmRelease, and its id hashes the HelmRelease
// uid, the reason and the timestamp, so notification-controller's retries
// are de-duplicated.
package receiver
