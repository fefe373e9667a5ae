package deliver

import (
	"cmp"
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// deploymentReconciler sends the deployment notices about the current
// revision of a release that Pipelines target.
type deploymentReconciler struct{ *deliverer }

// deploymentEvents returns the deployment events the current revision c
// has reached, in order. healthyTold says a DeploymentHealthy notice was
// already recorded for it: only then can it degrade.
func deploymentEvents(c *tugboatv1alpha1.RevisionSummary, healthyTold bool) []tugboatv1alpha1.NotifyEvent {
	events := []tugboatv1alpha1.NotifyEvent{tugboatv1alpha1.EventDeploymentStarted}
	healthy := c.Status == tugboatv1alpha1.ReleaseStatusDeployed && c.Health == tugboatv1alpha1.HealthCurrent
	switch {
	case healthy:
		events = append(events, tugboatv1alpha1.EventDeploymentHealthy)
	case c.Status == tugboatv1alpha1.ReleaseStatusFailed:
		events = append(events, tugboatv1alpha1.EventDeploymentFailed)
	case healthyTold && c.Status == tugboatv1alpha1.ReleaseStatusDeployed && c.Health != tugboatv1alpha1.HealthCurrent:
		events = append(events, tugboatv1alpha1.EventDeploymentHealthy, tugboatv1alpha1.EventDeploymentDegraded)
	case c.Health == tugboatv1alpha1.HealthFailed:
		events = append(events, tugboatv1alpha1.EventDeploymentFailed)
	}
	return events
}

func deploymentCompleted(e tugboatv1alpha1.NotifyEvent) bool {
	return e == tugboatv1alpha1.EventDeploymentHealthy || e == tugboatv1alpha1.EventDeploymentFailed
}

// Reconcile sends the deployment notices due for one ReleaseHistory and
// records them in its status.notifications.
func (r deploymentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Which Pipelines target the release follows from its spec, which the
	// cache holds: most releases of a fleet have none, and their changes
	// cost no read of the API server.
	cached := &tugboatv1alpha1.ReleaseHistory{}
	if err := r.client.Get(ctx, req.NamespacedName, cached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pipelines, err := pipeline.PipelinesFor(ctx, r.client, cached)
	if err != nil || len(pipelines) == 0 {
		return ctrl.Result{}, err
	}
	// Read from the API server, not the cache: the notices already sent are
	// recorded in this object, and a cache that has not seen the last
	// record yet would send a notice twice.
	rh := &tugboatv1alpha1.ReleaseHistory{}
	if err := r.reader.Get(ctx, req.NamespacedName, rh); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	c := rh.Status.Current
	if c == nil {
		return ctrl.Result{}, nil
	}
	records := map[string]tugboatv1alpha1.DeploymentNotification{}
	for _, n := range rh.Status.Notifications {
		if n.About(c) {
			records[n.Pipeline+"/"+n.Notifier+"/"+string(n.Event)] = n
		}
	}
	var (
		out     outcome
		updated []tugboatv1alpha1.DeploymentNotification
	)
	stale := c.LastDeployed != nil && r.since(c.LastDeployed.Time) > r.opts.MaxAge
	for pi := range pipelines {
		p := &pipelines[pi]
		envName, target, err := pipeline.TargetOf(ctx, r.client, p, rh.Spec.Spoke, rh.Spec.Namespace, rh.Spec.Release)
		if err != nil {
			return ctrl.Result{}, err
		}
		var hr *tugboatv1alpha1.ObjectReference
		if target != nil && target.HelmRelease != nil {
			ref := *target.HelmRelease
			ref.Namespace = cmp.Or(ref.Namespace, target.Namespace)
			hr = &ref
		}
		for i := range p.Spec.Notify {
			spec := &p.Spec.Notify[i]
			key := p.Name + "/" + spec.Name + "/"
			healthy, told := records[key+string(tugboatv1alpha1.EventDeploymentHealthy)]
			reached := deploymentEvents(c, told && healthy.Phase == tugboatv1alpha1.NotificationDelivered)
			var due []tugboatv1alpha1.NotifyEvent
			for _, e := range reached {
				if !wants(spec, e) {
					continue
				}
				if modeOf(spec) == tugboatv1alpha1.NotifySummary && !deploymentCompleted(e) {
					continue
				}
				due = append(due, e)
			}
			for _, e := range due {
				rec, seen := records[key+string(e)]
				if !seen {
					rec = tugboatv1alpha1.DeploymentNotification{Pipeline: p.Name, Notifier: spec.Name, Event: e, Revision: c.Revision, Installation: c.Life()}
				}
				if stale && !seen {
					r.skip(spec, e, &rec.DeliveryState, &out)
					updated = append(updated, rec)
					continue
				}
				before := rec.DeliveryState
				r.attempt(ctx, p, spec, deploymentNotice(p, envName, hr, rh, e, modeOf(spec) == tugboatv1alpha1.NotifySummary), "", &rec.DeliveryState, &out)
				if rec.DeliveryState != before || !seen {
					updated = append(updated, rec)
				}
				if rec.Phase != tugboatv1alpha1.NotificationDelivered && rec.Phase != tugboatv1alpha1.NotificationFailed {
					break
				}
			}
		}
		r.setNotified(ctx, p, &out)
		out.results = nil
	}
	if len(updated) > 0 {
		if err := r.recordDeployments(ctx, req.NamespacedName, c, updated); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: out.requeue}, nil
}

// deploymentNotice builds the notice of event e about rh's current
// revision; a summary lists the revision's events.
// hr is the target's Flux HelmRelease, if any.
func deploymentNotice(p *tugboatv1alpha1.Pipeline, env string, hr *tugboatv1alpha1.ObjectReference, rh *tugboatv1alpha1.ReleaseHistory, e tugboatv1alpha1.NotifyEvent, summary bool) notify.Notice {
	c := rh.Status.Current
	n := notify.Notice{
		Event: e, Summary: summary, Namespace: p.Namespace, Pipeline: p.Name, Release: rh.Spec.Release,
		Deployment: &notify.Deployment{
			Spoke: rh.Spec.Spoke, Namespace: rh.Spec.Namespace, Release: rh.Spec.Release, Revision: c.Revision,
			ChartVersion: c.ChartVersion, AppVersion: c.AppVersion, Status: c.Status, Health: c.Health,
			HealthReason: c.HealthReason, Environment: env,
		},
		Targets: []notify.Target{{Environment: env, Spoke: rh.Spec.Spoke, Namespace: rh.Spec.Namespace, Release: rh.Spec.Release,
			Version: c.ChartVersion, Revision: c.Revision, Health: c.Health,
			Done:        c.Status == tugboatv1alpha1.ReleaseStatusDeployed && c.Health == tugboatv1alpha1.HealthCurrent,
			HelmRelease: hr}},
	}
	if c.LastDeployed != nil {
		n.Time = c.LastDeployed.Time
	}
	if rh.Status.LastEventTime != nil && e != tugboatv1alpha1.EventDeploymentStarted {
		n.Time = rh.Status.LastEventTime.Time
	}
	source := rh.Spec.Spoke + "/" + rh.Spec.Namespace + "/" + rh.Spec.Release
	if rev := rh.Status.CurrentRevision(); rev != nil {
		if summary {
			n.Timeline = revisionLines(source, rev)
		}
		n.Deployment.Description = lastMessage(rev)
	}
	return n
}

func lastMessage(rev *tugboatv1alpha1.Revision) string {
	if len(rev.Events) == 0 {
		return ""
	}
	return rev.Events[len(rev.Events)-1].Message
}

// recordDeployments writes the updated records into the ReleaseHistory's
// status, dropping records of older revisions (of older lives included).
func (r *deliverer) recordDeployments(ctx context.Context, key types.NamespacedName, c *tugboatv1alpha1.RevisionSummary, updated []tugboatv1alpha1.DeploymentNotification) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		rh := &tugboatv1alpha1.ReleaseHistory{}
		if err := r.reader.Get(ctx, key, rh); err != nil {
			return client.IgnoreNotFound(err)
		}
		orig := rh.DeepCopy()
		kept := rh.Status.Notifications[:0:0]
		for _, n := range rh.Status.Notifications {
			if life := max(n.Installation, 1); life > c.Life() || life == c.Life() && n.Revision >= c.Revision {
				kept = append(kept, n)
			}
		}
		for _, u := range updated {
			found := false
			for i := range kept {
				if kept[i].Pipeline == u.Pipeline && kept[i].Notifier == u.Notifier && kept[i].Event == u.Event {
					kept[i], found = u, true
				}
			}
			if !found {
				kept = append(kept, u)
			}
		}
		if len(kept) > 40 {
			kept = kept[len(kept)-40:]
		}
		rh.Status.Notifications = kept
		err := r.client.Status().Patch(ctx, rh, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}
