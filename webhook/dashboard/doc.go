// Package dashboard serves tugboat's web dashboard: the Pipelines, Promotion,
// Release and Fleet pages, live through Server-Sent Events fed by watches,
// and the Approve and Reject actions, and a rollout's Pause, Resume and
// Abort (recorded through request.SteerRollout and request.Abort, as
// `tugboat rollout pause|resume|abort` records them).
//
// It talks to the hub's API server with the credentials it is given: run by
// `tugboat ui`, the user's own kubeconfig identity, so a person sees what
// their RBAC lets them read and decides what it lets them decide. A decision
// is a vote that names the user the API server authenticated (a
// SelfSubjectReview), recorded through request.Decide exactly as `tugboat
// approve` records it; the ValidatingAdmissionPolicy tugboat-approvals
// checks it. The hub can serve the same pages read-only (Options.ReadOnly).
//
// Pages are Go html/template, rendered on the server and readable without
// JavaScript; one small script of our own (static/live.js, no library)
// listens to /events and swaps the page's main element when something
// changed. Every POST is checked for CSRF (a per-process token in a cookie
// and a form field, plus net/http's cross-origin protection on
// Sec-Fetch-Site and Origin), every answer carries a strict
// Content-Security-Policy, and a Host check refuses DNS rebinding. The
// dashboard reads Pipelines, Promotions, PromotionPreviews (a Promotion's
// diffs, shown escaped), ReleaseHistories and Spokes only; it never reads a
// Secret.
//
// It is not an API: scripts use the CRDs or the hub's CI API.
package dashboard
