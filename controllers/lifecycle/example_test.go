package lifecycle_test

import (
	"context"
	"errors"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/controllers/lifecycle"
)

// migrate stands for the step's work (a schema migration of version).
func migrate(context.Context, string) error { return nil }

// Example_stepController is a step controller written with
// controller-runtime (docs/lifecycle.md): it handles the LifecycleEvents
// of event key db-migrate in namespace fleet, runs the migration of each
// unfinished one, and finishes it Done or Error in its own name
// (lifecycle.Finish asks the API server who it is); it claims its
// Lifecycle every minute. Run it as a ServiceAccount bound to the
// ClusterRole tugboat-step-controller.
func Example_stepController() {
	const namespace, key = "fleet", "db-migrate"
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Scheme: hub.Scheme()})
	if err != nil {
		os.Exit(1)
	}
	c := mgr.GetClient()
	finish := func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
		ev := &tugboatv1alpha1.LifecycleEvent{}
		if err := c.Get(ctx, req.NamespacedName, ev); err != nil || ev.Phase().Finished() {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		phase, msg := tugboatv1alpha1.EventDone, "migrated for "+ev.Spec.Version
		if err := migrate(ctx, ev.Spec.Version); err != nil {
			phase, msg = tugboatv1alpha1.EventError, err.Error()
		}
		if _, err := lifecycle.Finish(ctx, c, ev.Namespace, ev.Name, phase, msg); err != nil && !errors.Is(err, lifecycle.ErrFinished) {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil
	}
	ofKey := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == namespace && labels.Set(o.GetLabels()).Get(tugboatv1alpha1.LabelEventKey) == key
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("db-migrate").
		For(&tugboatv1alpha1.LifecycleEvent{}, builder.WithPredicates(ofKey)).
		Complete(reconcile.Func(finish)); err != nil {
		os.Exit(1)
	}
	// Claim the Lifecycle now and every minute (well within ClaimWindow).
	_ = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			_, _ = lifecycle.Claim(ctx, c, namespace, key)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Minute):
			}
		}
	}))
	_ = mgr.Start(ctrl.SetupSignalHandler())
}
