//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// severity is how bad a finding is.
type severity string

const (
	severityOK      severity = "ok"
	severityWarning severity = "warning"
	severityError   severity = "error"
)

// The checks, in the order doctor reports them.
const (
	checkConnection     = "connection"
	checkCRDs           = "crds"
	checkHub            = "hub"
	checkSpoke          = "spoke"
	checkPipeline       = "pipeline"
	checkPromotion      = "promotion"
	checkReleaseHistory = "releasehistory"
)

var checkOrder = map[string]int{
	checkConnection: 0, checkCRDs: 1, checkHub: 2, checkSpoke: 3, checkPipeline: 4, checkPromotion: 5, checkReleaseHistory: 6,
}

// finding is one line of `tugboat doctor` (one element with -o json).
type finding struct {
	Check string `json:"check"`
	// Code names the kind of finding (doctor_codes.go); each has a line in
	// docs/troubleshooting.md.
	Code     findingCode `json:"code"`
	Severity severity    `json:"severity"`
	// Object is <namespace>/<name> (a CRD's name for crds), or "" when the
	// finding is about the installation as a whole.
	Object  string `json:"object"`
	Message string `json:"message"`
	// Hint says what to do; "" when Severity is ok.
	Hint string `json:"hint"`
}

type doctorOptions struct {
	allNamespaces bool
	staleAfter    time.Duration
	// heartbeatRefresh is the hub's --spoke-heartbeat-refresh: how much
	// older than its last heartbeat a live Spoke's recorded lastSeen may
	// be (the hub's heartbeat digests, not lastSeen, carry each one).
	heartbeatRefresh time.Duration
	approvalAge      time.Duration
	failures         int
	reconcileGrace   time.Duration
	// failOn is the least severity that fails the run (exit status 1).
	failOn severity
}

func defaultDoctorOptions() doctorOptions {
	return doctorOptions{staleAfter: 5 * time.Minute, heartbeatRefresh: 5 * time.Minute, approvalAge: 24 * time.Hour, failures: 3, reconcileGrace: time.Minute, failOn: severityError}
}

// String, Set and Type make a severity a --fail-on flag value.
func (s *severity) String() string { return string(*s) }

func (s *severity) Set(v string) error {
	switch severity(v) {
	case severityError, severityWarning:
		*s = severity(v)
		return nil
	}
	return fmt.Errorf("unknown severity %q: use error or warning", v)
}

func (s *severity) Type() string { return "severity" }

func (o doctorOptions) validate() error {
	switch {
	case o.staleAfter <= 0:
		return fmt.Errorf("--stale-after must be positive")
	case o.heartbeatRefresh < 0:
		return fmt.Errorf("--heartbeat-refresh must not be negative")
	case o.approvalAge <= 0:
		return fmt.Errorf("--approval-age must be positive")
	case o.failures < 0:
		return fmt.Errorf("--failures must not be negative")
	case o.reconcileGrace < 0:
		return fmt.Errorf("--reconcile-grace must not be negative")
	}
	return nil
}

// tugboatKind is a kind of the tugboat.dev API doctor needs.
type tugboatKind struct{ plural, kind string }

// tugboatKinds are the CRDs this CLI speaks, in the order doctor names them.
var tugboatKinds = []tugboatKind{
	{"spokes", "Spoke"}, {"releasehistories", "ReleaseHistory"}, {"pipelines", "Pipeline"}, {"promotions", "Promotion"},
	{"promotiontargets", "PromotionTarget"}, {"promotionpreviews", "PromotionPreview"}, {"lifecycles", "Lifecycle"}, {"lifecycleevents", "LifecycleEvent"},
	{"spokeclasses", "SpokeClass"},
}

// defaultPromotionTimeout is the hub's timeout of a Promotion whose
// Pipeline sets none (the CRD defaults spec.timeout to it too).
const defaultPromotionTimeout = 30 * time.Minute

// doctor runs the checks against one hub.
type doctor struct {
	opts doctorOptions
	// c reads tugboat objects, Secrets (metadata only) and asks who the
	// user is.
	c client.Client
	// crds reads CustomResourceDefinitions.
	crds client.Reader
	disc discovery.DiscoveryInterface
	// group and version are the API doctor expects: tugboat.dev/v1alpha1
	// (tests point them elsewhere).
	group, version string
	kinds          []tugboatKind
	// namespace is the namespace checked, "" for all.
	namespace string
	server    string
	now       func() time.Time

	findings []finding
	// user is who the hub says the user is, asked once when a read is
	// forbidden.
	user *string
}

func (d *doctor) add(check string, code findingCode, sev severity, object, msg, hint string) {
	if sev == severityOK {
		hint = ""
	}
	d.findings = append(d.findings, finding{Check: check, Code: code, Severity: sev, Object: object, Message: msg, Hint: hint})
}

// run runs every check and returns the findings, sorted by check, then
// object (each object's findings in the order the check made them).
func (d *doctor) run(ctx context.Context) []finding {
	if d.now == nil {
		d.now = time.Now
	}
	if d.group == "" {
		d.group, d.version = tugboatv1alpha1.GroupVersion.Group, tugboatv1alpha1.GroupVersion.Version
	}
	if d.kinds == nil {
		d.kinds = tugboatKinds
	}
	served, ok := d.checkCRDs(ctx)
	if ok {
		var spokes *tugboatv1alpha1.SpokeList
		var pipelines *tugboatv1alpha1.PipelineList
		if served["spokes"] {
			spokes = &tugboatv1alpha1.SpokeList{}
			if !d.list(ctx, checkSpoke, "spokes", spokes) {
				spokes = nil
			}
		}
		if served["pipelines"] {
			pipelines = &tugboatv1alpha1.PipelineList{}
			if !d.list(ctx, checkPipeline, "pipelines", pipelines) {
				pipelines = nil
			}
		}
		d.checkHub(spokes, pipelines)
		if spokes != nil {
			d.checkSpokes(ctx, spokes.Items)
		}
		if pipelines != nil {
			d.checkPipelines(pipelines.Items, spokes)
		}
		if served["promotions"] {
			var promotions tugboatv1alpha1.PromotionList
			if d.list(ctx, checkPromotion, "promotions", &promotions) {
				var ps []tugboatv1alpha1.Pipeline
				if pipelines != nil {
					ps = pipelines.Items
				}
				d.checkPromotions(ctx, promotions.Items, ps)
			}
			d.checkLifecycles(ctx)
			d.checkTimeouts(ctx)
		}
		if served["releasehistories"] {
			d.checkReleaseHistories(ctx)
		}
	}
	sort.SliceStable(d.findings, func(i, j int) bool {
		a, b := d.findings[i], d.findings[j]
		if checkOrder[a.Check] != checkOrder[b.Check] {
			return checkOrder[a.Check] < checkOrder[b.Check]
		}
		return a.Object < b.Object
	})
	return d.findings
}

// scope names the namespace checked, for messages.
func (d *doctor) scope() string {
	if d.namespace == "" {
		return "in any namespace"
	}
	return "in namespace " + d.namespace
}

// list lists one tugboat kind in the namespace checked, and turns a
// failure into a finding.
func (d *doctor) list(ctx context.Context, check, resource string, list client.ObjectList) bool {
	var opts []client.ListOption
	if d.namespace != "" {
		opts = append(opts, client.InNamespace(d.namespace))
	}
	if err := d.c.List(ctx, list, opts...); err != nil {
		d.readFailed(ctx, check, "list", resource+"."+d.group, d.namespace, "", err)
		return false
	}
	return true
}

// readFailed reports a failed read: a Forbidden one names the permission
// that is missing.
func (d *doctor) readFailed(ctx context.Context, check, verb, resource, namespace, object string, err error) {
	where := "in namespace " + namespace
	grant := "a Role and RoleBinding in " + namespace
	if namespace == "" {
		where, grant = "at cluster scope", "a ClusterRole and ClusterRoleBinding"
	}
	if apierrors.IsForbidden(err) {
		who := "you"
		if u := d.whoAmI(ctx); u != "" {
			who = "user " + u
		}
		d.add(check, codeReadForbidden, severityError, object, fmt.Sprintf("cannot %s %s %s: forbidden", verb, resource, where),
			fmt.Sprintf("%s needs %s on %s %s (%s), or use a context that has it", who, verb, resource, where, grant))
		return
	}
	d.add(check, codeReadFailed, severityError, object, fmt.Sprintf("cannot %s %s %s: %v", verb, resource, where, err),
		"retry; if it persists, check the hub's API server")
}

// whoAmI asks the hub who the user is (SelfSubjectReview); "" when it
// cannot tell.
func (d *doctor) whoAmI(ctx context.Context) string {
	if d.user == nil {
		name := ""
		r := &authenticationv1.SelfSubjectReview{}
		if err := d.c.Create(ctx, r); err == nil {
			name = r.Status.UserInfo.Username
		}
		d.user = &name
	}
	return *d.user
}

// reconciled reports whether a controller has reconciled the object's
// current generation, and whether the object is old enough to judge.
func (d *doctor) reconciled(obj metav1.Object, observed int64, conds []metav1.Condition) (done, judge bool) {
	for _, c := range conds {
		observed = max(observed, c.ObservedGeneration)
	}
	if observed >= obj.GetGeneration() {
		return true, true
	}
	return false, d.now().Sub(lastSpecChange(obj)) >= d.opts.reconcileGrace
}

// lastSpecChange is when the object was last written (other than its
// status), from its managed fields; its creation time without them.
func lastSpecChange(obj metav1.Object) time.Time {
	t := obj.GetCreationTimestamp().Time
	for _, m := range obj.GetManagedFields() {
		if m.Subresource == "" && m.Time != nil && m.Time.After(t) {
			t = m.Time.Time
		}
	}
	return t
}

// firstFew joins the first n names and says how many more there are.
func firstFew(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// joinAnd joins words as "a, b, c and d".
func joinAnd(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// majorMinor returns "vMAJOR.MINOR" of a version like v1.4.2 or 1.4.2-rc.1,
// "" when it is not one (e.g. "dev").
func majorMinor(v string) string {
	v = strings.TrimPrefix(v, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return ""
	}
	for _, p := range parts[:2] {
		if _, err := strconv.ParseUint(p, 10, 32); err != nil {
			return ""
		}
	}
	return "v" + parts[0] + "." + parts[1]
}
