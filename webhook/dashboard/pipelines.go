package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// pipelinesPage lists every Pipeline as a row of environments.
type pipelinesPage struct {
	page
	Pipelines []pipelineView
}

type pipelineView struct {
	Name, Release string
	Suspended     bool
	// Ready is the Ready condition's status and message.
	Ready, Message string
	Envs           []envView
}

// envView is one environment; Incoming is what moves into it from the
// environment before.
type envView struct {
	Name     string
	Versions []string
	Held     string
	Targets  []targetView
	Incoming *arrowView
	First    bool
}

type targetView struct {
	Spoke, Namespace, Release, Version string
	Revision                           int32
	Health                             tugboatv1alpha1.Health
	LastDeployed                       *metav1.Time
	Absent                             bool
	// History is the ReleaseHistory's name.
	History string
}

// arrowView is the active promotion into an environment, or the soak
// that precedes one.
type arrowView struct {
	Promotion string
	Version   string
	Phase     tugboatv1alpha1.PromotionPhase
	// Soaking says the source environment still soaks Version until
	// SoakUntil.
	Soaking   bool
	SoakUntil time.Time
	SoakLeft  string
	Gates     []string
	Approvals string
	Message   string
}

func (s *Server) servePipelines(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := readContext(r.Context())
	defer cancel()
	p := pipelinesPage{page: s.page("Pipelines", "pipelines", "pipeline", "promotion")}
	var pipelines tugboatv1alpha1.PipelineList
	if err := s.reader.List(ctx, &pipelines, client.InNamespace(s.opts.Namespace)); err != nil {
		s.failRead(w, r, "pipelines", err)
		return
	}
	var promotions tugboatv1alpha1.PromotionList
	if err := s.reader.List(ctx, &promotions, client.InNamespace(s.opts.Namespace)); err != nil {
		p.Warnings = append(p.Warnings, readWarning("promotions", s.opts.Namespace, err))
	}
	byName := map[string]*tugboatv1alpha1.Promotion{}
	for i := range promotions.Items {
		byName[promotions.Items[i].Name] = &promotions.Items[i]
	}
	sort.Slice(pipelines.Items, func(i, j int) bool { return pipelines.Items[i].Name < pipelines.Items[j].Name })
	for i := range pipelines.Items {
		p.Pipelines = append(p.Pipelines, pipelineOf(&pipelines.Items[i], byName, p.Now))
	}
	s.render(w, "pipelines", http.StatusOK, p)
}

func pipelineOf(pl *tugboatv1alpha1.Pipeline, promotions map[string]*tugboatv1alpha1.Promotion, now time.Time) pipelineView {
	v := pipelineView{Name: pl.Name, Release: pl.Spec.Release, Suspended: pl.Spec.Suspend, Ready: "Unknown"}
	if c := apimeta.FindStatusCondition(pl.Status.Conditions, "Ready"); c != nil {
		v.Ready, v.Message = string(c.Status), c.Message
	}
	status := map[string]*tugboatv1alpha1.EnvironmentStatus{}
	for i := range pl.Status.Environments {
		status[pl.Status.Environments[i].Name] = &pl.Status.Environments[i]
	}
	held := map[string]string{}
	for _, h := range pl.Status.HeldEnvironments {
		held[h.Name] = h.Message
		if held[h.Name] == "" {
			held[h.Name] = "held after a rollback to " + h.Version
		}
	}
	for i := range pl.Spec.Environments {
		env := &pl.Spec.Environments[i]
		ev := envView{Name: env.Name, Held: held[env.Name], First: i == 0}
		st := status[env.Name]
		if st != nil {
			ev.Versions = st.Versions
		}
		ev.Targets = envTargets(pl, env, st)
		if i > 0 {
			ev.Incoming = arrowInto(pl, i, status, promotions, now)
		}
		v.Envs = append(v.Envs, ev)
	}
	return v
}

// arrowInto describes what moves into environment i: its active Promotion,
// else the version the environment before soaks.
func arrowInto(pl *tugboatv1alpha1.Pipeline, i int, status map[string]*tugboatv1alpha1.EnvironmentStatus, promotions map[string]*tugboatv1alpha1.Promotion, now time.Time) *arrowView {
	env, src := &pl.Spec.Environments[i], &pl.Spec.Environments[i-1]
	a := &arrowView{Gates: gatesBetween(src.Gates, env.Gates)}
	if st := status[env.Name]; st != nil && st.ActivePromotion != "" {
		a.Promotion = st.ActivePromotion
		if pr := promotions[st.ActivePromotion]; pr != nil {
			a.Version, a.Phase = pr.Spec.Version, pr.Status.Phase
			if a.Phase == "" {
				a.Phase = tugboatv1alpha1.PromotionPending
			}
			if c := apimeta.FindStatusCondition(pr.Status.Conditions, "Ready"); c != nil {
				a.Message = c.Message
			}
			if waitsForApproval(pl, pr) {
				t := request.Count(pl, pr)
				a.Approvals = fmt.Sprintf("%d of %d approvals", len(t.Approvals), t.Required)
				if t.Required == 1 {
					a.Approvals = fmt.Sprintf("%d of 1 approval", len(t.Approvals))
				}
			}
		}
		return a
	}
	sst := status[src.Name]
	if sst == nil || sst.HealthySince == nil || len(sst.Versions) != 1 || src.Gates.SoakTime == nil {
		return nil
	}
	if dst := status[env.Name]; dst != nil && len(dst.Versions) == 1 && dst.Versions[0] == sst.Versions[0] {
		return nil
	}
	until := sst.HealthySince.Add(src.Gates.SoakTime.Duration)
	if !until.After(now) {
		return nil
	}
	a.Version, a.Soaking, a.SoakUntil, a.SoakLeft = sst.Versions[0], true, until.UTC(), duration(until.Sub(now))
	return a
}

// gatesBetween describes, in a few words each, the gates a version passes
// from environment src into dst: src's soak time and health (a version
// proven there), dst's approval.
func gatesBetween(src, dst tugboatv1alpha1.Gates) []string {
	var out []string
	if src.SoakTime != nil && src.SoakTime.Duration > 0 {
		out = append(out, "soak "+span(src.SoakTime.Duration))
	}
	if src.RequireHealthy != nil && !*src.RequireHealthy {
		out = append(out, "health not required")
	}
	if dst.RequireApproval {
		n := int32(1)
		if dst.Approvals != nil {
			n = *dst.Approvals
		}
		if n > 1 {
			out = append(out, fmt.Sprintf("%d approvals", n))
		} else {
			out = append(out, "approval")
		}
	}
	return out
}

// span renders a configured duration briefly: 1h, 10m, 1h30m, 45s.
func span(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// failRead answers the error of reading what a page is about.
func (s *Server) failRead(w http.ResponseWriter, r *http.Request, what string, err error) {
	status := http.StatusBadGateway
	msg := readWarning(what, s.opts.Namespace, err)
	switch {
	case isForbidden(err):
		status = http.StatusForbidden
	case isNotFound(err):
		status = http.StatusNotFound
	}
	s.fail(w, r, status, msg)
}

func readWarning(what, ns string, err error) string {
	if isForbidden(err) {
		return fmt.Sprintf("you may not read %s in namespace %s (RBAC): %v", what, ns, err)
	}
	return fmt.Sprintf("reading %s in namespace %s: %v", what, ns, err)
}

// readContext bounds a page's reads.
func readContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 15*time.Second)
}

// lowerContains reports whether s contains sub, ignoring case.
func lowerContains(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// envTargets are an environment's targets as the hub resolved them (its
// status: spokeSelector targets expanded to the spokes they select), else,
// before the hub reported any, the spokes its spec names.
func envTargets(pl *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment, st *tugboatv1alpha1.EnvironmentStatus) []targetView {
	var out []targetView
	if st != nil && len(st.Targets) > 0 {
		for _, ts := range st.Targets {
			out = append(out, targetView{Spoke: ts.Spoke, Namespace: ts.Namespace, Release: ts.Release,
				History: tugboatv1alpha1.ReleaseHistoryName(ts.Spoke, ts.Namespace, ts.Release),
				Version: ts.Version, Revision: ts.Revision, Health: ts.Health, LastDeployed: ts.LastDeployed, Absent: ts.Absent})
		}
		return out
	}
	for _, t := range env.Targets {
		if t.Spoke == "" {
			continue // a spokeSelector, not resolved yet
		}
		release := t.Release
		if release == "" {
			release = pl.Spec.Release
		}
		out = append(out, targetView{Spoke: t.Spoke, Namespace: t.Namespace, Release: release,
			History: tugboatv1alpha1.ReleaseHistoryName(t.Spoke, t.Namespace, release)})
	}
	return out
}
