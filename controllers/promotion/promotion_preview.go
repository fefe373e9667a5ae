package promotion

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/strategy/helm"
)

// Previews (issue 26): a helm Promotion into an environment that requires
// approval asks its destination's agents, before it waits for approval,
// what it would change. The reconciler picks one target per distinct set
// of values (the ReleaseHistory's values digest and chart version), creates
// the PromotionPreview (owned by the Promotion, with its name) naming them,
// and waits in Pending until they answered or Options.PreviewTimeout
// passed; the actions store (controllers/promotion/actions) offers the
// preview actions and records the answers. status.preview summarizes it.
// A preview never blocks the approval: a failed or late one is recorded
// as Failed with its reason, and the Promotion moves on.

// +kubebuilder:rbac:groups=tugboat.dev,resources=promotionpreviews,verbs=get;list;watch;create

// DefaultPreviewTimeout is how long a Promotion waits for its preview.
const DefaultPreviewTimeout = time.Minute

// previewFirst asks for pr's preview when it needs one, and records its
// summary in status.preview. It reports whether the Promotion waits for
// it, and until when.
func (r *Reconciler) previewFirst(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (bool, time.Duration, error) {
	if pr.StrategyType() != tugboatv1alpha1.StrategyHelm || !env.Gates.RequireApproval {
		return false, 0, nil
	}
	if pr.Status.Preview == nil {
		return r.askPreview(ctx, pr, p, env)
	}
	if err := r.refreshPreview(ctx, pr); err != nil {
		return false, 0, err
	}
	if pr.Status.Preview.Phase != tugboatv1alpha1.PreviewPending || len(pr.Status.Approvals) > 0 || pr.Status.Approval != nil {
		// Answered, failed, or a person decided without waiting for it.
		return false, 0, nil
	}
	pp, err := r.getPreview(ctx, pr, pr.Status.Preview.Name)
	if err != nil {
		return false, 0, ignoreNotOurs(err)
	}
	return true, max(pp.Spec.Deadline.Sub(r.Now()), 0) + 100*time.Millisecond, nil
}

// askPreview picks the targets to preview and creates the
// PromotionPreview.
func (r *Reconciler) askPreview(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) (bool, time.Duration, error) {
	name, why, err := r.createPreview(ctx, pr, p, env, pr.Name, "/preview")
	if err != nil {
		return false, 0, err
	}
	if name == "" {
		pr.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewFailed, Reason: clip.String("no target can be previewed: "+why, 1024)}
		return false, 0, nil
	}
	pr.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewPending, Name: name}
	return true, cmp.Or(r.Options.PreviewTimeout, DefaultPreviewTimeout), nil
}

// createPreview creates the PromotionPreview name of pr (owned by it),
// asking one target per distinct set of values for an action whose id is
// derived from pr's UID and seed. It returns the name, or "" and why no
// target can be previewed.
func (r *Reconciler) createPreview(ctx context.Context, pr *tugboatv1alpha1.Promotion, p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment, name, seed string) (string, string, error) {
	res, err := pipeline.ResolveTargets(ctx, r.Client, p, env)
	if err != nil {
		return "", "", err
	}
	targets, total, why := previewTargets(ctx, r.Client, pr.Namespace, pr.Status.Strategy.Helm, p, res.Targets, string(pr.UID)+seed)
	if len(targets) == 0 {
		return "", why, nil
	}
	timeout := cmp.Or(r.Options.PreviewTimeout, DefaultPreviewTimeout)
	pp := &tugboatv1alpha1.PromotionPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: pr.Namespace, Name: name},
		Spec: tugboatv1alpha1.PromotionPreviewSpec{
			Promotion: pr.Name, Version: pr.Spec.Version, Targets: targets, TotalTargets: int32(min(max(total, 0), 1<<31-1)),
			Deadline: metav1.NewTime(r.Now().Add(timeout).Truncate(time.Second)),
		},
	}
	if err := controllerutil.SetControllerReference(pr, pp, r.Client.Scheme()); err != nil {
		return "", "", err
	}
	err = r.Client.Create(ctx, pp)
	if apierrors.IsAlreadyExists(err) {
		// This Promotion's own, created by an earlier reconcile; or one
		// someone else created under the name, which is never taken for
		// this Promotion's.
		if _, err := r.getPreview(ctx, pr, name); errors.Is(err, errNotOurs) {
			return "", fmt.Sprintf("a PromotionPreview named %s exists that is not this Promotion's (created by someone else): it is not shown; delete it to preview the promotion", name), nil
		} else if err != nil {
			return "", "", err
		}
		return pp.Name, "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("creating the preview of %s: %w", pr.Name, err)
	}
	return pp.Name, "", nil
}

// previewTargets returns one target per distinct set of values among the
// destination's targets (at most MaxPreviewTargets, their action ids
// derived from seed; hs is the helm strategy that would act), each with the
// targets it stands for; the number of targets; and, when none can be
// previewed, why. A target managed by a Flux HelmRelease, or one whose
// release is not reported yet, is not previewed.
func previewTargets(ctx context.Context, c client.Reader, ns string, hs *tugboatv1alpha1.HelmStrategy, p *tugboatv1alpha1.Pipeline, resolved []pipeline.ResolvedTarget, seed string) ([]tugboatv1alpha1.PreviewTarget, int, string) {
	why := "the environment has no target"
	byValues := map[string]int{}
	var out []tugboatv1alpha1.PreviewTarget
	for _, rt := range resolved {
		release := pipeline.ReleaseOf(p, &rt.Target)
		if rt.HelmRelease != nil {
			why = fmt.Sprintf("%s/%s/%s not previewed: Flux target (a Flux HelmRelease manages the release: its chart source and values are helm-controller's, which the agent does not render)",
				rt.Spoke, rt.Namespace, release)
			continue
		}
		if _, err := helm.ChartSource(hs, release, false); err != nil {
			why = err.Error()
			continue
		}
		rh := &tugboatv1alpha1.ReleaseHistory{}
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: tugboatv1alpha1.ReleaseHistoryName(rt.Spoke, rt.Namespace, release)}, rh)
		if err != nil || rh.Status.Current == nil {
			why = fmt.Sprintf("%s/%s/%s has not reported its release", rt.Spoke, rt.Namespace, release)
			continue
		}
		key := rh.Status.Current.ChartVersion + "/" + rh.Status.Current.ValuesDigest
		if rh.Status.Current.ValuesDigest == "" {
			key = "unknown/" + rt.Spoke + "/" + rt.Namespace + "/" + release // unknown values: a preview of its own
		}
		if i, ok := byValues[key]; ok {
			t := &out[i]
			t.Targets++
			if len(t.Spokes) < tugboatv1alpha1.MaxPreviewSpokes && !slices.Contains(t.Spokes, rt.Spoke) {
				t.Spokes = append(t.Spokes, rt.Spoke)
			}
			continue
		}
		if len(out) == tugboatv1alpha1.MaxPreviewTargets {
			continue // beyond 20 distinct sets of values: not previewed
		}
		byValues[key] = len(out)
		out = append(out, tugboatv1alpha1.PreviewTarget{
			Spoke: rt.Spoke, Namespace: rt.Namespace, Release: release,
			ActionID:     wire.NewActionID(seed, rt.Spoke, rt.Namespace, release),
			ValuesDigest: clip.String(rh.Status.Current.ValuesDigest, 128), Targets: 1, Spokes: []string{rt.Spoke},
		})
	}
	return out, len(resolved), why
}

// refreshPreview records in status.preview what the PromotionPreview
// holds: Ready once a target answered, Failed once every target failed or
// the deadline passed with no answer.
func (r *Reconciler) refreshPreview(ctx context.Context, pr *tugboatv1alpha1.Promotion) error {
	cur := pr.Status.Preview
	if cur == nil || cur.Name == "" || cur.Phase == tugboatv1alpha1.PreviewFailed && cur.Groups == 0 && cur.ComputedAt != nil {
		return nil
	}
	pp, err := r.getPreview(ctx, pr, cur.Name)
	if err != nil {
		switch {
		case apierrors.IsNotFound(err):
			pr.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewFailed, Name: cur.Name, Reason: "the PromotionPreview " + cur.Name + " is gone"}
			return nil
		case errors.Is(err, errNotOurs):
			pr.Status.Preview = &tugboatv1alpha1.PreviewSummary{Phase: tugboatv1alpha1.PreviewFailed, Name: cur.Name, Reason: err.Error()}
			return nil
		}
		return err
	}
	next := Summarize(pp, r.Now())
	if next.Phase == tugboatv1alpha1.PreviewReady {
		if why := r.drifted(ctx, pr, pp); why != "" {
			next.Phase, next.Reason = tugboatv1alpha1.PreviewStale, clip.String(why, 1024)
		}
	}
	next.ComputedAt = cur.ComputedAt
	// What the approvers saw, and the recheck after the approval
	// (promotion_preview_recheck.go), are the Promotion's, not the
	// PromotionPreview's: kept.
	next.ApprovedPhase, next.ApprovedDigest = cur.ApprovedPhase, cur.ApprovedDigest
	next.RecomputedAt, next.ChangedSinceApproval, next.ApprovalsReset = cur.RecomputedAt, cur.ChangedSinceApproval, cur.ApprovalsReset
	if next.Phase != cur.Phase || next.Digest != cur.Digest || next.TargetsPreviewed != cur.TargetsPreviewed || next.Reason != cur.Reason {
		now := metav1.NewTime(r.Now())
		next.ComputedAt = &now
		if next.Phase == tugboatv1alpha1.PreviewPending {
			next.ComputedAt = nil
		}
	}
	pr.Status.Preview = next
	return nil
}

// errNotOurs: a PromotionPreview of the name asked for exists, but it is
// not the Promotion's (PromotionPreview.Of).
var errNotOurs = errors.New("not this Promotion's preview")

// ignoreNotOurs is client.IgnoreNotFound that also ignores errNotOurs.
func ignoreNotOurs(err error) error {
	if errors.Is(err, errNotOurs) {
		return nil
	}
	return client.IgnoreNotFound(err)
}

// getPreview reads pr's PromotionPreview name from the cache, or from the
// API server when the cache has not seen it yet (it was created by the
// reconcile before this one). One of that name that is not pr's (someone
// else created it) is errNotOurs, saying so.
func (r *Reconciler) getPreview(ctx context.Context, pr *tugboatv1alpha1.Promotion, name string) (*tugboatv1alpha1.PromotionPreview, error) {
	pp := &tugboatv1alpha1.PromotionPreview{}
	key := types.NamespacedName{Namespace: pr.Namespace, Name: name}
	err := r.Client.Get(ctx, key, pp)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, key, pp)
	}
	if err == nil && !pp.Of(pr) {
		return nil, fmt.Errorf("the PromotionPreview %s is not this Promotion's (someone else created it), and is not shown: %w", name, errNotOurs)
	}
	return pp, err
}

// drifted says which previewed target's live release moved to another
// revision since its agent answered, or "" when none did: the preview then
// no longer shows what the Promotion would change there.
func (r *Reconciler) drifted(ctx context.Context, pr *tugboatv1alpha1.Promotion, pp *tugboatv1alpha1.PromotionPreview) string {
	for _, t := range pp.Spec.Targets {
		st := previewStatusOf(pp, t.ActionID)
		if st == nil || st.Phase != tugboatv1alpha1.ActionSucceeded || st.Revision == 0 {
			continue
		}
		rh := &tugboatv1alpha1.ReleaseHistory{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pr.Namespace, Name: tugboatv1alpha1.ReleaseHistoryName(t.Spoke, t.Namespace, t.Release)}, rh); err != nil ||
			rh.Status.Current == nil {
			continue
		}
		if cur := rh.Status.Current.Revision; cur != st.Revision {
			return fmt.Sprintf("%s/%s/%s is at revision %d since the preview (of revision %d): what the promotion changes there may differ from the preview",
				t.Spoke, t.Namespace, t.Release, cur, st.Revision)
		}
	}
	return ""
}

// Summarize returns the summary of pp at now (what status.preview of a
// Promotion says; tugboat diff PIPELINE --from --to prints it).
func Summarize(pp *tugboatv1alpha1.PromotionPreview, now time.Time) *tugboatv1alpha1.PreviewSummary {
	s := &tugboatv1alpha1.PreviewSummary{Name: pp.Name, Groups: int32(min(max(len(pp.Status.Groups), 0), 1<<31-1)) + pp.Status.OtherChanges}
	for _, g := range pp.Status.Groups {
		s.TargetsPreviewed += g.Targets
	}
	if len(pp.Status.Groups) > 0 {
		g := pp.Status.Groups[0]
		s.Digest, s.ObjectsChanged, s.LinesChanged = g.Digest, g.ObjectsChanged, g.LinesChanged
	}
	var failed []string
	waiting := 0
	for _, t := range pp.Spec.Targets {
		st := previewStatusOf(pp, t.ActionID)
		switch {
		case st == nil || st.Phase == tugboatv1alpha1.ActionPending || st.Phase == tugboatv1alpha1.ActionDelivered:
			waiting++
		case st.Phase == tugboatv1alpha1.ActionFailed || st.Phase == tugboatv1alpha1.ActionRefused:
			failed = append(failed, fmt.Sprintf("%s/%s/%s %s: %s", t.Spoke, t.Namespace, t.Release, st.Phase, st.Message))
		}
	}
	late := waiting > 0 && !now.Before(pp.Spec.Deadline.Time)
	switch {
	case waiting > 0 && !late:
		s.Phase = tugboatv1alpha1.PreviewPending
	case len(pp.Status.Groups) > 0 || pp.Status.OtherChanges > 0:
		s.Phase = tugboatv1alpha1.PreviewReady
	default:
		s.Phase = tugboatv1alpha1.PreviewFailed
	}
	var reason []string
	if late {
		reason = append(reason, fmt.Sprintf("%d of %d targets asked did not answer by %s (is the agent running, with actions enabled?)",
			waiting, len(pp.Spec.Targets), pp.Spec.Deadline.UTC().Format(time.RFC3339)))
	}
	if len(failed) > 0 {
		reason = append(reason, failed[0])
		if len(failed) > 1 {
			reason = append(reason, fmt.Sprintf("and %d more failed", len(failed)-1))
		}
	}
	if s.Phase != tugboatv1alpha1.PreviewPending {
		if untold := pp.Spec.TotalTargets - s.TargetsPreviewed; s.Phase == tugboatv1alpha1.PreviewReady && untold > 0 && len(reason) == 0 {
			reason = append(reason, fmt.Sprintf("%d of %d targets not previewed", untold, pp.Spec.TotalTargets))
		}
		for i, r := range reason {
			if i == 0 {
				s.Reason = r
			} else {
				s.Reason += "; " + r
			}
		}
		s.Reason = clip.String(s.Reason, 1024)
	}
	return s
}

func previewStatusOf(pp *tugboatv1alpha1.PromotionPreview, id string) *tugboatv1alpha1.PreviewTargetStatus {
	for i := range pp.Status.Targets {
		if pp.Status.Targets[i].ActionID == id {
			return &pp.Status.Targets[i]
		}
	}
	return nil
}
