package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// steerView says which of the rollout's buttons (Pause, Resume, Abort) to
// show, and why some are missing.
type steerView struct {
	// Shown is true while the Promotion rolls out in waves and has not
	// finished.
	Shown bool
	// User is who the API server says the dashboard's user is.
	User                          string
	CanPause, CanResume, CanAbort bool
	// Reasons explain missing buttons.
	Reasons []string
}

// Any reports whether a button is shown.
func (v steerView) Any() bool { return v.CanPause || v.CanResume || v.CanAbort }

// steerView asks the API server whether the user may pause, resume or
// abort pr's rollout: RBAC's verbs pause, resume and abort on environments
// named <pipeline>/<to> or <pipeline>/*, and patch on promotions/status, as
// the policy tugboat-approvals checks. It only decides which buttons to
// show: the API server checks the request itself.
func (s *Server) steerView(ctx context.Context, pr *tugboatv1alpha1.Promotion) steerView {
	st := pr.Status.Rollout
	v := steerView{Shown: st != nil && st.Resolved != nil && pr.Status.Phase.Started() && pr.Status.Phase != tugboatv1alpha1.PromotionRollingBack}
	if !v.Shown {
		return v
	}
	if s.opts.ReadOnly {
		v.Reasons = []string{"This dashboard is read-only: steer the rollout with tugboat ui or tugboat rollout pause|resume|abort " + pr.Name + "."}
		return v
	}
	user, err := s.whoAmI(ctx)
	if err != nil {
		v.Reasons = []string{err.Error()}
		return v
	}
	v.User = user
	write, err := s.allowed(ctx, authorizationv1.ResourceAttributes{Namespace: pr.Namespace, Verb: "patch", Group: tugboatv1alpha1.GroupVersion.Group, Resource: "promotions", Subresource: "status"})
	if err != nil {
		v.Reasons = []string{"cannot tell whether you may steer the rollout: " + err.Error()}
		return v
	}
	if !write {
		v.Reasons = []string{fmt.Sprintf("You (%s) may not write promotions/status in namespace %s, where rollout requests are recorded (see the ClusterRole tugboat-approver).", user, pr.Namespace)}
		return v
	}
	paused := pr.Status.Phase == tugboatv1alpha1.PromotionPaused
	if req := pr.Status.RolloutRequest; req != nil && req.Sequence > st.ObservedRequest {
		paused = req.Action == tugboatv1alpha1.RolloutActionPause // asked, not yet honored
	}
	env := pr.Spec.Pipeline + "/" + pr.Spec.To
	for _, b := range []struct {
		verb string
		show bool
		can  *bool
	}{{"pause", !paused, &v.CanPause}, {"resume", paused, &v.CanResume}, {"abort", pr.Status.AbortRequest == nil, &v.CanAbort}} {
		if !b.show {
			continue
		}
		ok, err := s.mayOnEnvironment(ctx, pr, b.verb)
		if err != nil {
			v.Reasons = append(v.Reasons, "cannot tell whether you may "+b.verb+": "+err.Error())
			continue
		}
		*b.can = ok
		if !ok {
			v.Reasons = append(v.Reasons, fmt.Sprintf("You (%s) may not %s rollouts into %s: RBAC must allow the verb %s on environments.tugboat.dev named %s or %s/* (see the ClusterRole tugboat-approver).",
				user, b.verb, env, b.verb, env, pr.Spec.Pipeline))
		}
	}
	return v
}

// mayOnEnvironment asks whether the user has verb on the environment of
// pr, by its name or its Pipeline's wildcard.
func (s *Server) mayOnEnvironment(ctx context.Context, pr *tugboatv1alpha1.Promotion, verb string) (bool, error) {
	for _, name := range []string{pr.Spec.Pipeline + "/" + pr.Spec.To, pr.Spec.Pipeline + "/*"} {
		ok, err := s.allowed(ctx, authorizationv1.ResourceAttributes{Namespace: pr.Namespace, Verb: verb, Group: tugboatv1alpha1.GroupVersion.Group, Resource: "environments", Name: name})
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// serveRollout records a Pause, Resume or Abort of the user, as tugboat
// rollout pause|resume|abort do, then shows the Promotion again.
func (s *Server) serveRollout(w http.ResponseWriter, r *http.Request) {
	if !s.checkCSRF(w, r) {
		return
	}
	if s.opts.ReadOnly {
		s.fail(w, r, http.StatusForbidden, "this dashboard is read-only: it takes no rollout requests")
		return
	}
	name := r.PathValue("name")
	if !validName(name) {
		s.fail(w, r, http.StatusBadRequest, "promotion: not a valid name: "+clip.String(name, 64))
		return
	}
	action := r.PostFormValue("action")
	if action != "pause" && action != "resume" && action != "abort" {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("action: must be pause, resume or abort, got %q", clip.String(action, 32)))
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
	switch action {
	case "abort":
		_, err = request.Abort(ctx, s.client, s.opts.Namespace, name, tugboatv1alpha1.AbortRequest{User: user, Message: message})
	case "pause":
		_, err = request.SteerRollout(ctx, s.client, s.opts.Namespace, name, tugboatv1alpha1.RolloutRequest{Action: tugboatv1alpha1.RolloutActionPause, User: user, Message: message})
	default:
		_, err = request.SteerRollout(ctx, s.client, s.opts.Namespace, name, tugboatv1alpha1.RolloutRequest{Action: tugboatv1alpha1.RolloutActionResume, User: user, Message: message})
	}
	if err != nil {
		s.fail(w, r, requestStatus(err), err.Error())
		return
	}
	http.Redirect(w, r, s.opts.BasePath+"promotions/"+name, http.StatusSeeOther) //nolint:gosec // not an open redirect: a fixed path and a validated name
}

// requestStatus is the HTTP status of an error of package request.
func requestStatus(err error) int {
	switch {
	case errors.Is(err, request.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, request.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, request.ErrNotWaiting):
		return http.StatusConflict
	case errors.Is(err, request.ErrNotAllowed):
		return http.StatusForbidden
	}
	return http.StatusBadGateway
}
