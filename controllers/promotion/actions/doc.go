// Package actions is the hub's side of the agent actions of the helm
// promotion strategy: the receiver's ActionStore (webhook/receiver) over the
// PromotionTargets on the hub.
//
// An action is not an object of its own. The Promotion reconciler records
// one per destination target in its PromotionTarget's status.action (phase Pending)
// once a helm Promotion is Verifying (with a rollout: per wave, as the
// wave is acted on, while Running; a Paused rollout offers none); this
// package offers the open ones
// (Pending or Delivered) to the agent of the target's spoke when it polls,
// marks them Delivered, and records the outcome the agent reports
// (Succeeded, Failed or Refused). The reconciler reads the outcome from
// there: a refusal or failure fails the Promotion, and, as for every
// strategy, success still needs the target to report the version healthy.
//
// A spoke only ever sees and reports its own actions: PromotionTargets are
// looked up in the namespace of the (hub-wide unique) Spoke of that name,
// by their spec.spoke (SpokeIndex), and checked again on the fresh read
// before each write. Writes are status patches of that one small
// PromotionTarget with optimistic locking, retried on conflict, so
// neither the reconciler nor another hub replica can lose an outcome, and
// thousands of agents never write the same object.
//
// Wait wakes long-polls as soon as the manager's cache sees a Pending
// action for the spoke, on whichever hub replica the agent reached.
package actions
