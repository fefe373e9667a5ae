// Package rollout is the wave planner of fleet rollouts (issue 24): a pure
// function from an environment's resolved targets, its Rollout and what
// each target reports now to the waves, the wave being rolled out, the
// targets to act on now, and the failure budget. It reads nothing but its
// arguments (the clock included), so the Promotion controller, `tugboat
// status` and the benchmarks can all ask it, and the same inputs always
// give the same plan.
//
// The rules, in short (docs/design/promotion-lifecycle.md has the why):
//
//   - Waves are the canary (by spoke name, label selector or count), each
//     spec wave (a count, or a percentage of the targets rounded up), and a
//     final wave with every target left. Without a rollout there is one
//     wave, "all". Targets are taken in a stable order: spoke name, then
//     namespace, then release.
//   - A target acted on by this Promotion stays in the wave it was acted in
//     (Action.Wave), whatever joins or leaves. Waves before
//     Input.CompletedWaves are done and take no new target; a target that
//     joins the environment lands in the current wave (while it has room)
//     or a later one. A target that leaves no longer counts at all.
//   - A target qualifies when it reports the promoted version, deployed
//     and Current, as the revision this Promotion's action produced
//     (Action.Produced), or, when the strategy cannot say which revision it
//     produced, a revision newer than the one it ran when acted on
//     (Action.Baseline), and has stayed so for the wave's soak time. A
//     report of any other revision is stale: it never qualifies and never
//     fails a target.
//   - A target fails when its action failed, the action's revision is
//     failed (Helm) or Failed (health), or it has not reported that revision
//     deployed and Current within the wave's progress deadline from its
//     action. Once its wave is done, only the first two still count.
//   - The budget (maxFailures, a count or a percentage of the targets
//     rounded down) is spent when more targets fail than it allows, or when
//     any canary target fails. A spent budget acts on nothing.
//   - A wave qualifies when every target of it qualified or failed, and
//     the budget is not spent; the next wave is then current, in the same
//     plan.
//
// It does not act, write status, or decide what a spent budget does
// (Pause or Rollback): the Promotion controller does, and latches what it
// decided (status.rollout.currentWave, phase) so that a target's later
// flapping never moves a rollout back.
package rollout
