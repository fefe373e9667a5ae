// Package helm is the helm promotion strategy: the destination spokes' own
// agents carry the promotion out, so the hub needs no credentials to a
// spoke. Promote only checks the configuration; the work is an agent
// action per destination target, derived from the Promotion itself: the
// Promotion reconciler records one (a PromotionTarget's status.action, Pending) once
// the Promotion is Verifying (with a rollout: for each wave's targets as
// the wave is acted on; the agent's reported revision is the one the wave
// is verified on), the hub's receiver hands it to the spoke's
// agent when it polls (controllers/promotion/actions), and the agent
// reports the outcome. Because the actions follow from the Promotion,
// Promote is idempotent by construction.
//
// ChartSource and ValuesPolicy say what an action carries; the actions
// store uses them too, so the strategy's checks and the actions agree.
//
// This package does not talk to spokes, and it does not decide completion:
// as with every strategy, the Promotion succeeds once the targets report
// the version, deployed and healthy.
package helm
