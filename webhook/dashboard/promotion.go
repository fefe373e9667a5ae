package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// promotionPage is one Promotion: its timeline and, for those allowed, the
// Approve and Reject buttons, and a rollout's Pause, Resume and Abort.
type promotionPage struct {
	page
	P *tugboatv1alpha1.Promotion
	// Phase is status.phase, Pending when unset.
	Phase tugboatv1alpha1.PromotionPhase
	// Ready is the Ready condition's message: what it waits for, or why it
	// failed.
	Ready    string
	Timeline []entry
	// TargetList is the Promotion's PromotionTargets, not done first, at
	// most maxTimelineTargets; MoreTargets counts the others.
	TargetList  []tugboatv1alpha1.PromotionTarget
	MoreTargets int
	Tally       string
	Missing     string
	Decide      decideView
	// Steer is the rollout's Pause, Resume and Abort buttons.
	Steer steerView
	CSRF  string
	// Targets and Succeeded count the rollout's targets, for its progress
	// bar (status.rollout; zero without one).
	Targets, Succeeded int32
	// Preview is what the Promotion would change (nil without one).
	Preview *previewView
	// Steps are its lifecycle steps (status.steps), pre steps first.
	Steps []stepView
}

// entry is one step of a Promotion's timeline.
type entry struct {
	Time   *metav1.Time
	Kind   string
	Title  string
	Detail string
	URL    string
}

// decideView says which decision buttons to show, and why none are.
type decideView struct {
	// Waiting is true while the Promotion takes a decision.
	Waiting bool
	// User is who the API server says the dashboard's user is.
	User       string
	CanApprove bool
	CanReject  bool
	// Reason explains a missing button.
	Reason string
}

func (s *Server) servePromotion(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := readContext(r.Context())
	defer cancel()
	name := r.PathValue("name")
	if !validName(name) {
		s.fail(w, r, http.StatusBadRequest, "promotion: not a valid name: "+clip.String(name, 64))
		return
	}
	pr, err := request.GetPromotion(ctx, s.reader, s.opts.Namespace, name)
	if err != nil {
		s.failRead(w, r, "promotion "+name, err)
		return
	}
	p := promotionPage{page: s.page("Promotion "+pr.Name, "pipelines", "promotion", "pipeline"), P: pr, Phase: pr.Status.Phase, CSRF: s.token}
	if p.Phase == "" {
		p.Phase = tugboatv1alpha1.PromotionPending
	}
	if c := apimeta.FindStatusCondition(pr.Status.Conditions, "Ready"); c != nil {
		p.Ready = c.Message
	}
	pl, err := request.GetPipeline(ctx, s.reader, pr.Namespace, pr.Spec.Pipeline)
	if err != nil && !errors.Is(err, request.ErrNotFound) {
		p.Warnings = append(p.Warnings, err.Error())
	}
	if pl != nil {
		t := request.Count(pl, pr)
		if requiresApproval(pl, pr.Spec.To) || len(pr.Status.Approvals) > 0 {
			p.Tally, p.Missing = t.Summary(), t.Missing()
		}
	}
	targets, more, err := s.promotionTargets(ctx, pr)
	if err != nil {
		p.Warnings = append(p.Warnings, err.Error())
	}
	p.TargetList, p.MoreTargets = targets, more
	p.Timeline = timeline(pr, targets)
	p.Steps = stepsOf(pr)
	if r := pr.Status.Rollout; r != nil {
		p.Targets, p.Succeeded = r.Counts()
	}
	p.Decide = s.decideView(ctx, pl, pr)
	p.Preview = s.previewOf(ctx, pr)
	p.Steer = s.steerView(ctx, pr)
	s.render(w, "promotion", http.StatusOK, p)
}

// timeline orders what happened to pr: created, votes, the gate's outcome,
// started with the strategy's result, targets converging, notices
// delivered, completed.
func timeline(pr *tugboatv1alpha1.Promotion, targets []tugboatv1alpha1.PromotionTarget) []entry {
	by := string(pr.Spec.RequestedBy)
	if pr.Spec.Requester != "" {
		by += ": " + pr.Spec.Requester
	}
	from := pr.Spec.From
	if from == "" {
		from = "(first environment)"
	}
	created := pr.CreationTimestamp
	out := []entry{{Time: &created, Kind: "created", Title: "Created", Detail: fmt.Sprintf("%s from %s into %s, requested by %s", pr.Spec.Version, from, pr.Spec.To, by)}}
	for i := range pr.Status.Approvals {
		v := &pr.Status.Approvals[i]
		who := v.User
		if v.DisplayName != "" && v.DisplayName != v.User && v.Source != tugboatv1alpha1.ApprovalSourceKubernetes {
			// A Kubernetes voter's displayName is their own text.
			who = v.DisplayName + " (" + v.User + ")"
		}
		verb, kind := "approved", "approve"
		if v.Decision == tugboatv1alpha1.DecisionReject {
			verb, kind = "rejected", "reject"
		}
		out = append(out, entry{Time: &v.Time, Kind: kind, Title: fmt.Sprintf("%s %s (via %s)", who, verb, v.Source), Detail: v.Message})
	}
	if a := pr.Status.Approval; a != nil {
		e := entry{Time: &a.Time, Kind: "approve", Title: "Approved by " + a.ApprovedBy, Detail: a.Message}
		if a.RejectedBy != "" {
			e.Kind, e.Title = "reject", "Rejected by "+a.RejectedBy
		}
		out = append(out, e)
	}
	if pr.Status.StartedAt != nil {
		e := entry{Time: pr.Status.StartedAt, Kind: "started", Title: fmt.Sprintf("Started (%s strategy)", pr.StrategyType())}
		if pr.Status.Attempts > 1 {
			e.Detail = fmt.Sprintf("%d attempts", pr.Status.Attempts)
		}
		out = append(out, e)
	}
	if sr := pr.Status.StrategyResult; sr != nil {
		t := pr.Status.StartedAt
		e := entry{Time: t, Kind: "strategy", Title: "Strategy result", Detail: sr.Message, URL: sr.URL}
		if sr.Reference != "" {
			e.Title += ": " + sr.Reference
		}
		out = append(out, e)
	}
	for _, pt := range targets {
		t := pt.Status
		state := "waiting"
		if t.Done {
			state = "done"
		}
		title := fmt.Sprintf("%s %s", pt.Key(), state)
		detail := t.Message
		if t.Version != "" {
			detail = strings.TrimSpace(fmt.Sprintf("reports %s (revision %d, %s). %s", t.Version, t.Revision, orUnknown(t.Health), t.Message))
		}
		out = append(out, entry{Time: t.LastTransitionTime, Kind: "target", Title: title, Detail: detail})
	}
	for _, n := range pr.Status.Notifications {
		e := entry{Kind: "notify", Title: fmt.Sprintf("Notice %s via %s: %s", n.Event, n.Notifier, n.Phase), Detail: n.Error}
		switch {
		case n.DeliveredAt != nil:
			e.Time = n.DeliveredAt
		default:
			e.Time = n.LastAttemptAt
		}
		if n.Attempts > 1 {
			e.Detail = strings.TrimSpace(fmt.Sprintf("%d attempts. %s", n.Attempts, n.Error))
		}
		out = append(out, e)
	}
	if pr.Status.CompletedAt != nil {
		out = append(out, entry{Time: pr.Status.CompletedAt, Kind: "completed", Title: string(pr.Status.Phase)})
	}
	// Stable by time; entries without one keep their place after the one
	// before them.
	var last metav1.Time
	keys := make([]metav1.Time, len(out))
	for i, e := range out {
		if e.Time != nil && !e.Time.IsZero() {
			last = *e.Time
		}
		keys[i] = last
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return keys[idx[a]].Before(&keys[idx[b]]) })
	sorted := make([]entry, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted
}

func orUnknown(h tugboatv1alpha1.Health) tugboatv1alpha1.Health {
	if h == "" {
		return tugboatv1alpha1.HealthUnknown
	}
	return h
}

// requiresApproval reports whether env of pl has an approval gate.
func requiresApproval(pl *tugboatv1alpha1.Pipeline, env string) bool {
	i := pipeline.EnvironmentIndex(pl, env)
	return i >= 0 && pl.Spec.Environments[i].Gates.RequireApproval
}

// waitsForApproval mirrors request.Decide's rule: a Promotion takes a
// decision while WaitingApproval, or Pending into an environment that
// requires approval, and before the gate decided.
func waitsForApproval(pl *tugboatv1alpha1.Pipeline, pr *tugboatv1alpha1.Promotion) bool {
	if pl == nil || pr.Status.Approval != nil {
		return false
	}
	switch pr.Status.Phase {
	case tugboatv1alpha1.PromotionWaitingApproval:
		return pipeline.EnvironmentIndex(pl, pr.Spec.To) >= 0
	case "", tugboatv1alpha1.PromotionPending:
		return requiresApproval(pl, pr.Spec.To)
	}
	return false
}

// decideView asks the API server whether the user may decide on pr:
// RBAC's verb approve on environments named <pipeline>/<to> or
// <pipeline>/*, and patch on promotions/status, as the policy
// tugboat-approvals checks. It only decides which buttons to show: the API
// server checks the decision itself.
func (s *Server) decideView(ctx context.Context, pl *tugboatv1alpha1.Pipeline, pr *tugboatv1alpha1.Promotion) decideView {
	d := decideView{Waiting: waitsForApproval(pl, pr)}
	if !d.Waiting {
		return d
	}
	if s.opts.ReadOnly {
		d.Reason = "This dashboard is read-only: approve with tugboat ui or tugboat approve " + pr.Name + "."
		return d
	}
	user, err := s.whoAmI(ctx)
	if err != nil {
		d.Reason = err.Error()
		return d
	}
	d.User = user
	env := pr.Spec.Pipeline + "/" + pr.Spec.To
	approve := false
	for _, name := range []string{env, pr.Spec.Pipeline + "/*"} {
		ok, err := s.allowed(ctx, authorizationv1.ResourceAttributes{Namespace: pr.Namespace, Verb: "approve", Group: tugboatv1alpha1.GroupVersion.Group, Resource: "environments", Name: name})
		if err != nil {
			d.Reason = "cannot tell whether you may approve: " + err.Error()
			return d
		}
		if ok {
			approve = true
			break
		}
	}
	write, err := s.allowed(ctx, authorizationv1.ResourceAttributes{Namespace: pr.Namespace, Verb: "patch", Group: tugboatv1alpha1.GroupVersion.Group, Resource: "promotions", Subresource: "status"})
	if err != nil {
		d.Reason = "cannot tell whether you may approve: " + err.Error()
		return d
	}
	switch {
	case !approve:
		d.Reason = fmt.Sprintf("You (%s) may not decide on promotions into %s: RBAC must allow the verb approve on environments.tugboat.dev named %s or %s/* (see the ClusterRole tugboat-approver).", user, env, env, pr.Spec.Pipeline)
		return d
	case !write:
		d.Reason = fmt.Sprintf("You (%s) may not write promotions/status in namespace %s, where decisions are recorded (see the ClusterRole tugboat-approver).", user, pr.Namespace)
		return d
	}
	d.CanReject = true
	d.CanApprove = !request.IsRequester(pl, pr, tugboatv1alpha1.ApprovalVote{Source: tugboatv1alpha1.ApprovalSourceKubernetes, User: user})
	if !d.CanApprove {
		d.Reason = fmt.Sprintf("You (%s) requested this promotion: another person must approve it. You may reject (withdraw) it.", user)
	}
	return d
}

// allowed asks the API server (a SelfSubjectAccessReview) whether the user
// may do what ra says.
func (s *Server) allowed(ctx context.Context, ra authorizationv1.ResourceAttributes) (bool, error) {
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}
	if err := s.client.Create(ctx, r); err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

// whoAmI asks the API server who the user is (a SelfSubjectReview), as
// tugboat approve does: the name the policy tugboat-approvals holds votes
// to.
func (s *Server) whoAmI(ctx context.Context) (string, error) {
	r := &authenticationv1.SelfSubjectReview{}
	if err := s.client.Create(ctx, r); err != nil {
		return "", fmt.Errorf("cannot tell who you are: the hub's API server did not answer a SelfSubjectReview: %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", errors.New("cannot tell who you are: the hub's API server authenticated no user name")
	}
	return r.Status.UserInfo.Username, nil
}

// decisionValues maps the form's decision field to the vote's decision.
var decisionValues = map[string]tugboatv1alpha1.Decision{
	"approve": tugboatv1alpha1.DecisionApprove,
	"reject":  tugboatv1alpha1.DecisionReject,
}

// maxFormBytes bounds a decision's form.
const maxFormBytes = 16 << 10

// serveDecision records an Approve or Reject of the user, as tugboat
// approve and tugboat reject do, then shows the Promotion again.
func (s *Server) serveDecision(w http.ResponseWriter, r *http.Request) {
	if !s.checkCSRF(w, r) {
		return
	}
	if s.opts.ReadOnly {
		s.fail(w, r, http.StatusForbidden, "this dashboard is read-only: it takes no decisions")
		return
	}
	name := r.PathValue("name")
	if !validName(name) {
		s.fail(w, r, http.StatusBadRequest, "promotion: not a valid name: "+clip.String(name, 64))
		return
	}
	decision, ok := decisionValues[r.PostFormValue("decision")]
	if !ok {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("decision: must be approve or reject, got %q", clip.String(r.PostFormValue("decision"), 32)))
		return
	}
	message := r.PostFormValue("message")
	if len(message) > request.MaxMessageLength {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("message: at most %d characters, got %d", request.MaxMessageLength, len(message)))
		return
	}
	ctx, cancel := readContext(r.Context())
	defer cancel()
	user, err := s.whoAmI(ctx)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	vote := tugboatv1alpha1.ApprovalVote{Decision: decision, User: user, Source: tugboatv1alpha1.ApprovalSourceKubernetes, Message: message}
	if _, err := request.Decide(ctx, s.client, s.opts.Namespace, name, vote); err != nil {
		s.fail(w, r, requestStatus(err), err.Error())
		return
	}
	http.Redirect(w, r, s.opts.BasePath+"promotions/"+name, http.StatusSeeOther) //nolint:gosec // not an open redirect: a fixed path and a validated name
}

// validName reports whether name can be an object's name.
func validName(name string) bool {
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

func isForbidden(err error) bool { return apierrors.IsForbidden(err) }

func isNotFound(err error) bool {
	return apierrors.IsNotFound(err) || errors.Is(err, request.ErrNotFound)
}

// maxTimelineTargets bounds the targets a Promotion's timeline shows (not
// done first); status.rollout counts them all.
const maxTimelineTargets = 100

// promotionTargets reads pr's PromotionTargets: those not done first, at
// most maxTimelineTargets, and how many more there are.
func (s *Server) promotionTargets(ctx context.Context, pr *tugboatv1alpha1.Promotion) ([]tugboatv1alpha1.PromotionTarget, int, error) {
	var list tugboatv1alpha1.PromotionTargetList
	if err := s.reader.List(ctx, &list, client.InNamespace(pr.Namespace),
		client.MatchingLabels{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(pr.Name)}); err != nil {
		return nil, 0, fmt.Errorf("reading the targets of promotion %s: %w", pr.Name, err)
	}
	out := slices.DeleteFunc(list.Items, func(pt tugboatv1alpha1.PromotionTarget) bool { return !pt.Of(pr) })
	slices.SortStableFunc(out, func(a, b tugboatv1alpha1.PromotionTarget) int {
		if a.Status.Done != b.Status.Done {
			if a.Status.Done {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Key(), b.Key())
	})
	n := min(len(out), maxTimelineTargets)
	return out[:n], len(out) - n, nil
}
