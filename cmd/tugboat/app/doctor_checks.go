//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/webhook/receiver"
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
	Check    string   `json:"check"`
	Severity severity `json:"severity"`
	// Object is <namespace>/<name> (a CRD's name for crds), or "" when the
	// finding is about the installation as a whole.
	Object  string `json:"object"`
	Message string `json:"message"`
	// Hint says what to do; "" when Severity is ok.
	Hint string `json:"hint"`
}

type doctorOptions struct {
	allNamespaces  bool
	staleAfter     time.Duration
	approvalAge    time.Duration
	failures       int
	reconcileGrace time.Duration
}

func defaultDoctorOptions() doctorOptions {
	return doctorOptions{staleAfter: 5 * time.Minute, approvalAge: 24 * time.Hour, failures: 3, reconcileGrace: time.Minute}
}

func (o doctorOptions) validate() error {
	switch {
	case o.staleAfter <= 0:
		return fmt.Errorf("--stale-after must be positive")
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

func (d *doctor) add(check string, sev severity, object, msg, hint string) {
	if sev == severityOK {
		hint = ""
	}
	d.findings = append(d.findings, finding{Check: check, Severity: sev, Object: object, Message: msg, Hint: hint})
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
			d.checkPipelines(pipelines.Items)
		}
		if served["promotions"] {
			var promotions tugboatv1alpha1.PromotionList
			if d.list(ctx, checkPromotion, "promotions", &promotions) {
				var ps []tugboatv1alpha1.Pipeline
				if pipelines != nil {
					ps = pipelines.Items
				}
				d.checkPromotions(promotions.Items, ps)
			}
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
		d.add(check, severityError, object, fmt.Sprintf("cannot %s %s %s: forbidden", verb, resource, where),
			fmt.Sprintf("%s needs %s on %s %s (%s), or use a context that has it", who, verb, resource, where, grant))
		return
	}
	d.add(check, severityError, object, fmt.Sprintf("cannot %s %s %s: %v", verb, resource, where, err),
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

// checkCRDs checks that the hub serves every kind of group/version. It
// reports which kinds are served, and false when the hub cannot be reached
// at all (no other check can run).
func (d *doctor) checkCRDs(ctx context.Context) (map[string]bool, bool) {
	served := map[string]bool{}
	groups, err := d.disc.ServerGroups()
	if err != nil {
		d.unreachable(err)
		return served, false
	}
	var group *metav1.APIGroup
	for i := range groups.Groups {
		if groups.Groups[i].Name == d.group {
			group = &groups.Groups[i]
		}
	}
	gv := d.group + "/" + d.version
	if group != nil {
		hasVersion := false
		for _, v := range group.Versions {
			hasVersion = hasVersion || v.Version == d.version
		}
		if hasVersion {
			resources, err := d.disc.ServerResourcesForGroupVersion(gv)
			if err != nil && !apierrors.IsNotFound(err) {
				d.add(checkCRDs, severityError, "", fmt.Sprintf("cannot discover the resources of %s: %v", gv, err), "retry; if it persists, check the hub's API server")
				return served, true
			}
			if resources != nil {
				for _, r := range resources.APIResources {
					served[r.Name] = true
				}
			}
		}
		if pv := group.PreferredVersion.Version; pv != "" && pv != d.version {
			d.add(checkCRDs, severityWarning, "", fmt.Sprintf("the hub prefers %s/%s; this CLI speaks %s", d.group, pv, gv),
				"use the tugboat CLI of the hub's release")
		}
	}
	var kinds []string
	for _, k := range d.kinds {
		if served[k.plural] {
			kinds = append(kinds, k.kind)
			continue
		}
		d.explainCRD(ctx, k)
	}
	if len(kinds) == len(d.kinds) {
		d.add(checkCRDs, severityOK, "", fmt.Sprintf("%s are installed, established and serve %s", joinAnd(kinds), gv), "")
	}
	return served, true
}

// unreachable reports a hub that did not answer discovery.
func (d *doctor) unreachable(err error) {
	host := d.server
	if u, perr := url.Parse(host); perr == nil && u.Host != "" {
		host = u.Host
	}
	switch {
	case apierrors.IsUnauthorized(err):
		d.add(checkConnection, severityError, "", fmt.Sprintf("the hub's API server at %s rejected your credentials (401)", host),
			"refresh the kubeconfig's credentials, or pick another --context")
	case apierrors.IsForbidden(err):
		d.add(checkConnection, severityError, "", fmt.Sprintf("the hub's API server at %s forbids discovery: %v", host, err),
			"you need the system:discovery ClusterRole (every authenticated user has it by default)")
	default:
		d.add(checkConnection, severityError, "", fmt.Sprintf("cannot reach the hub's API server at %s: %v", host, err),
			"check --kubeconfig and --context, and that the API server is up and reachable from here")
	}
}

// explainCRD says why kind is not served, from its CRD when it can read it.
func (d *doctor) explainCRD(ctx context.Context, k tugboatKind) {
	name := k.plural + "." + d.group
	gv := d.group + "/" + d.version
	install := "install the CRDs: kubectl apply -k config/crd (config/hub installs the whole hub)"
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := d.crds.Get(ctx, types.NamespacedName{Name: name}, crd)
	switch {
	case apierrors.IsNotFound(err):
		d.add(checkCRDs, severityError, name, fmt.Sprintf("%s is not installed: no CustomResourceDefinition %s", k.kind, name), install)
		return
	case apierrors.IsForbidden(err):
		d.add(checkCRDs, severityError, name, fmt.Sprintf("%s is not served as %s, and you may not read its CRD (get on customresourcedefinitions.apiextensions.k8s.io) to tell why", k.kind, gv),
			install+", or ask a cluster administrator to check it")
		return
	case err != nil:
		d.add(checkCRDs, severityError, name, fmt.Sprintf("%s is not served as %s; reading its CRD failed: %v", k.kind, gv, err), install)
		return
	}
	established := apiextensionsv1.CustomResourceDefinitionCondition{Status: apiextensionsv1.ConditionUnknown}
	why := ""
	for _, c := range crd.Status.Conditions {
		switch c.Type {
		case apiextensionsv1.Established:
			established = c
		case apiextensionsv1.NamesAccepted:
			if c.Status == apiextensionsv1.ConditionFalse {
				why = fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
			}
		}
	}
	if established.Status != apiextensionsv1.ConditionTrue {
		if why == "" && established.Message != "" {
			why = fmt.Sprintf(" (%s: %s)", established.Reason, established.Message)
		}
		d.add(checkCRDs, severityError, name, fmt.Sprintf("CRD %s is not established%s", name, why),
			"kubectl describe crd "+name+"; a name that another CRD already uses is the usual cause")
		return
	}
	var versions []string
	servesIt := false
	for _, v := range crd.Spec.Versions {
		if v.Served {
			versions = append(versions, v.Name)
			servesIt = servesIt || v.Name == d.version
		}
	}
	if !servesIt {
		d.add(checkCRDs, severityError, name, fmt.Sprintf("CRD %s does not serve %s (it serves %s); this CLI speaks %s", name, d.version, strings.Join(versions, ", "), gv),
			"use the tugboat CLI of the hub's release, or install the CRDs of this CLI's release")
		return
	}
	d.add(checkCRDs, severityWarning, name, fmt.Sprintf("CRD %s is established but the API server does not list %s yet", name, gv),
		"retry in a few seconds")
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

// checkHub judges whether the hub runs from what it writes: Spokes'
// heartbeats (the receiver) and reconciled generations (the controllers).
func (d *doctor) checkHub(spokes *tugboatv1alpha1.SpokeList, pipelines *tugboatv1alpha1.PipelineList) {
	now := d.now()
	if spokes != nil {
		var latest *tugboatv1alpha1.Spoke
		recent := 0
		for i := range spokes.Items {
			sp := &spokes.Items[i]
			if sp.Status.LastSeen == nil {
				continue
			}
			if now.Sub(sp.Status.LastSeen.Time) <= d.opts.staleAfter {
				recent++
			}
			if latest == nil || sp.Status.LastSeen.After(latest.Status.LastSeen.Time) {
				latest = sp
			}
		}
		switch {
		case len(spokes.Items) == 0:
			d.add(checkHub, severityWarning, "", "no Spokes "+d.scope()+": nothing reports to the hub",
				"register each leaf cluster as a Spoke and run the agent there (docs/agent.md)")
		case latest == nil:
			d.add(checkHub, severityWarning, "", fmt.Sprintf("no Spoke has ever reported (%s registered %s)", plural(len(spokes.Items), "Spoke"), d.scope()),
				"run the agent on each spoke with --hub-url pointing at the hub's receiver and the Spoke's key (docs/agent.md)")
		case recent == 0:
			d.add(checkHub, severityError, "", fmt.Sprintf("no Spoke has reported in the last %s (latest: %s/%s, %s ago)",
				age(d.opts.staleAfter), latest.Namespace, latest.Name, age(now.Sub(latest.Status.LastSeen.Time))),
				"the hub's receiver is down or the agents cannot reach it: kubectl -n tugboat-system get deploy,pods; kubectl -n tugboat-system logs deploy/tugboat-hub; and the agents' logs")
		default:
			d.add(checkHub, severityOK, "", fmt.Sprintf("the receiver records heartbeats: %d of %s reported in the last %s (latest %s ago)",
				recent, plural(len(spokes.Items), "Spoke"), age(d.opts.staleAfter), age(now.Sub(latest.Status.LastSeen.Time))), "")
		}
	}

	judged, total := 0, 0
	var behind []string
	note := func(obj metav1.Object, observed int64, conds []metav1.Condition) {
		total++
		done, judge := d.reconciled(obj, observed, conds)
		if !judge {
			return
		}
		judged++
		if !done {
			behind = append(behind, obj.GetNamespace()+"/"+obj.GetName())
		}
	}
	if spokes != nil {
		for i := range spokes.Items {
			note(&spokes.Items[i], spokes.Items[i].Status.ObservedGeneration, spokes.Items[i].Status.Conditions)
		}
	}
	if pipelines != nil {
		for i := range pipelines.Items {
			note(&pipelines.Items[i], pipelines.Items[i].Status.ObservedGeneration, pipelines.Items[i].Status.Conditions)
		}
	}
	sort.Strings(behind)
	switch {
	case judged == 0:
		// Nothing to judge the controllers by.
	case len(behind) == judged:
		d.add(checkHub, severityError, "", fmt.Sprintf("the hub's controllers are not reconciling: none of %s Spokes and Pipelines has status.observedGeneration up to its generation",
			strconv.Itoa(judged)),
			"kubectl -n tugboat-system get deploy tugboat-hub; kubectl -n tugboat-system logs deploy/tugboat-hub (is it running, and has one replica won the leader election?)")
	case len(behind) > 0:
		d.add(checkHub, severityWarning, "", fmt.Sprintf("%d of %d Spokes and Pipelines are not reconciled since their last change: %s",
			len(behind), judged, firstFew(behind, 3)),
			"the hub's controllers may be failing on them: kubectl -n tugboat-system logs deploy/tugboat-hub")
	default:
		d.add(checkHub, severityOK, "", fmt.Sprintf("the controllers reconcile: %d of %d Spokes and Pipelines are up to date", judged, total), "")
	}
}

// checkSpokes reports every Spoke's Ready condition, agent version and key
// Secret.
func (d *doctor) checkSpokes(ctx context.Context, spokes []tugboatv1alpha1.Spoke) {
	now := d.now()
	cli := version()
	secretsForbidden := map[string]bool{}
	for i := range spokes {
		sp := &spokes[i]
		obj := sp.Namespace + "/" + sp.Name
		seen := "never seen"
		if sp.Status.LastSeen != nil {
			seen = "last seen " + age(now.Sub(sp.Status.LastSeen.Time)) + " ago"
		}
		agentHint := fmt.Sprintf("check the agent on spoke %s: that it runs, its logs, that --hub-url reaches the hub's receiver and that it signs with the key in Secret %s/%s",
			sp.Name, sp.Namespace, sp.Spec.KeySecretRef.Name)
		ready := apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		switch {
		case sp.Spec.Suspend:
			d.add(checkSpoke, severityWarning, obj, "suspended: the hub rejects its agent and promotes nothing into or from it ("+seen+")",
				"set spec.suspend to false when the spoke should take part again")
		case ready == nil:
			if _, judge := d.reconciled(sp, sp.Status.ObservedGeneration, sp.Status.Conditions); judge {
				d.add(checkSpoke, severityWarning, obj, "no Ready condition: the hub has not reconciled it ("+seen+")",
					"see the hub check: the hub's controllers may not run")
			} else {
				d.add(checkSpoke, severityOK, obj, "just created or changed; waiting for the hub to reconcile it", "")
			}
		case ready.Status == metav1.ConditionTrue:
			msg := fmt.Sprintf("Ready, %s, agent %s", seen, orDash(sp.Status.AgentVersion))
			if sp.Status.KubernetesVersion != "" {
				msg += ", Kubernetes " + sp.Status.KubernetesVersion
			}
			d.add(checkSpoke, severityOK, obj, msg+", "+plural(int(sp.Status.ReleaseCount), "release"), "")
			if sp.Status.ReleaseCount == 0 {
				d.add(checkSpoke, severityWarning, obj, "its agent reports no Helm releases",
					"if the spoke runs releases, check the agent's --watch-namespaces and its RBAC to read Secrets and ConfigMaps")
			}
		case ready.Status == metav1.ConditionFalse:
			hint := "kubectl describe spoke " + sp.Name + " -n " + sp.Namespace
			switch ready.Reason {
			case "DuplicateName":
				hint = "spoke names must be unique across the hub: delete or rename one of them"
			case tugboatv1alpha1.InvalidSpecReason.String():
				hint = fmt.Sprintf("put keys of at least %d bytes (openssl rand -hex 32) in Secret %s/%s: %q, and %q if Flux reports for the spoke, different from it", receiver.MinKeySize, sp.Namespace, sp.Spec.KeySecretRef.Name, tugboatv1alpha1.SpokeKeySecretKey, tugboatv1alpha1.SpokeFluxKeySecretKey)
			}
			d.add(checkSpoke, severityError, obj, fmt.Sprintf("not Ready (%s): %s", ready.Reason, ready.Message), hint)
		default:
			msg := fmt.Sprintf("not Ready (%s, %s): %s", ready.Status, ready.Reason, ready.Message)
			if sp.Status.LastSeen == nil {
				msg = fmt.Sprintf("not Ready (%s, %s): its agent never reported", ready.Status, ready.Reason)
			}
			d.add(checkSpoke, severityError, obj, msg, agentHint)
		}

		if av := sp.Status.AgentVersion; av != "" {
			if a, c := majorMinor(av), majorMinor(cli); a != "" && c != "" && a != c {
				d.add(checkSpoke, severityWarning, obj, fmt.Sprintf("agent %s, this CLI %s: versions differ in major or minor", av, cli),
					"run the same minor version of tugboat on the hub, the agents and the CLI (upgrade the older side)")
			}
		}

		if secretsForbidden[sp.Namespace] {
			continue
		}
		secret := &metav1.PartialObjectMetadata{}
		secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		err := d.c.Get(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.KeySecretRef.Name}, secret)
		switch {
		case err == nil:
		case apierrors.IsNotFound(err):
			d.add(checkSpoke, severityError, obj, fmt.Sprintf("key Secret %s/%s does not exist: the hub cannot verify the agent", sp.Namespace, sp.Spec.KeySecretRef.Name),
				"the hub's Spoke controller generates it when it runs (see the hub check); then give the agent that key")
		case apierrors.IsForbidden(err):
			secretsForbidden[sp.Namespace] = true
			who := "you"
			if u := d.whoAmI(ctx); u != "" {
				who = "user " + u
			}
			d.add(checkSpoke, severityWarning, sp.Namespace, "cannot check the Spokes' key Secrets in namespace "+sp.Namespace+": forbidden",
				who+" needs get on secrets in namespace "+sp.Namespace+" for doctor to check them")
		default:
			d.add(checkSpoke, severityWarning, obj, fmt.Sprintf("cannot read key Secret %s/%s: %v", sp.Namespace, sp.Spec.KeySecretRef.Name, err), "retry")
		}
	}
}

// checkPipelines reports every Pipeline's conditions, suspension and holds.
func (d *doctor) checkPipelines(pipelines []tugboatv1alpha1.Pipeline) {
	now := d.now()
	for i := range pipelines {
		p := &pipelines[i]
		obj := p.Namespace + "/" + p.Name
		conds := p.Status.Conditions
		ready := apimeta.FindStatusCondition(conds, tugboatv1alpha1.ReadyCondition.String())
		stalled := apimeta.FindStatusCondition(conds, tugboatv1alpha1.StalledCondition.String())
		reconciling := apimeta.FindStatusCondition(conds, tugboatv1alpha1.ReconcilingCondition.String())
		done, judge := d.reconciled(p, p.Status.ObservedGeneration, conds)
		switch {
		case stalled != nil && stalled.Status == metav1.ConditionTrue:
			d.add(checkPipeline, severityError, obj, fmt.Sprintf("Stalled (%s): %s", stalled.Reason, stalled.Message),
				"fix the Pipeline's spec: kubectl edit pipeline "+p.Name+" -n "+p.Namespace)
		case ready == nil:
			if judge {
				d.add(checkPipeline, severityWarning, obj, "no Ready condition: the hub has not reconciled it",
					"see the hub check: the hub's controllers may not run")
			} else {
				d.add(checkPipeline, severityOK, obj, "just created or changed; waiting for the hub to reconcile it", "")
			}
		case ready.Status == metav1.ConditionFalse:
			hint := "kubectl describe pipeline " + p.Name + " -n " + p.Namespace
			switch ready.Reason {
			case tugboatv1alpha1.ReconciliationFailedReason.String():
				hint = "the hub retries with back-off; the message names the error (see also the hub's logs)"
			case tugboatv1alpha1.TargetNotFoundReason.String():
				hint = "register the missing Spokes (or fix the targets), and fix the agents of Spokes that are not Ready (see the spoke findings)"
			}
			d.add(checkPipeline, severityError, obj, fmt.Sprintf("not Ready (%s): %s", ready.Reason, ready.Message), hint)
		case ready.Status == metav1.ConditionTrue:
			d.add(checkPipeline, severityOK, obj, fmt.Sprintf("Ready (%s): %s", ready.Reason, ready.Message), "")
		default:
			d.add(checkPipeline, severityWarning, obj, fmt.Sprintf("Ready is %s (%s): %s", ready.Status, ready.Reason, ready.Message),
				"kubectl describe pipeline "+p.Name+" -n "+p.Namespace)
		}
		if !done && judge && ready != nil {
			d.add(checkPipeline, severityWarning, obj, fmt.Sprintf("not reconciled since its last change (generation %d, observed %d)", p.Generation, p.Status.ObservedGeneration),
				"the hub's controllers may be failing on it: kubectl -n tugboat-system logs deploy/tugboat-hub")
		}
		if reconciling != nil && reconciling.Status == metav1.ConditionTrue && now.Sub(reconciling.LastTransitionTime.Time) >= d.opts.reconcileGrace {
			d.add(checkPipeline, severityWarning, obj, fmt.Sprintf("Reconciling for %s (%s): %s", age(now.Sub(reconciling.LastTransitionTime.Time)), reconciling.Reason, reconciling.Message),
				"kubectl describe pipeline "+p.Name+" -n "+p.Namespace)
		}
		if p.Spec.Suspend {
			d.add(checkPipeline, severityWarning, obj, "suspended: no automatic promotions (manual ones still run)",
				"set spec.suspend to false to resume automatic promotion")
		}
		for _, h := range p.Status.HeldEnvironments {
			msg := fmt.Sprintf("automatic promotion into %s is held after a rollback, since %s ago", h.Name, age(now.Sub(h.Since.Time)))
			if h.Message != "" {
				msg += ": " + h.Message
			}
			d.add(checkPipeline, severityWarning, obj, msg,
				fmt.Sprintf("once the rollback is dealt with: tugboat promote %s --resume %s -n %s", p.Name, h.Name, p.Namespace))
		}
	}
}

// checkPromotions reports Promotions stuck waiting for approval, near or
// past their timeout, not started, and each Pipeline's recent failures.
func (d *doctor) checkPromotions(promotions []tugboatv1alpha1.Promotion, pipelines []tugboatv1alpha1.Pipeline) {
	now := d.now()
	byName := map[string]*tugboatv1alpha1.Pipeline{}
	for i := range pipelines {
		byName[pipelines[i].Namespace+"/"+pipelines[i].Name] = &pipelines[i]
	}
	problems := 0
	add := func(sev severity, obj, msg, hint string) {
		problems++
		d.add(checkPromotion, sev, obj, msg, hint)
	}
	failed := map[string][]*tugboatv1alpha1.Promotion{} // by pipeline
	for i := range promotions {
		pr := &promotions[i]
		obj := pr.Namespace + "/" + pr.Name
		what := fmt.Sprintf("%s into %s of pipeline %s", pr.Spec.Version, pr.Spec.To, pr.Spec.Pipeline)
		ready := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		since := pr.CreationTimestamp.Time
		if ready != nil && !ready.LastTransitionTime.IsZero() {
			since = ready.LastTransitionTime.Time
		}
		switch pr.Status.Phase {
		case tugboatv1alpha1.PromotionWaitingApproval:
			if waited := now.Sub(since); waited > d.opts.approvalAge {
				add(severityWarning, obj, fmt.Sprintf("%s has waited for approval for %s", what, age(waited)),
					fmt.Sprintf("tugboat approve %s -n %s, or tugboat reject %s -n %s", pr.Name, pr.Namespace, pr.Name, pr.Namespace))
			}
		case "", tugboatv1alpha1.PromotionPending:
			if waited := now.Sub(since); waited > d.opts.staleAfter {
				msg := fmt.Sprintf("%s is Pending for %s", what, age(waited))
				if ready != nil && ready.Message != "" {
					msg += ": " + ready.Message
				}
				add(severityWarning, obj, msg, "it starts once the Promotion into "+pr.Spec.To+" under way finishes; if none is, see the hub check")
			}
		case tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.PromotionVerifying:
			timeout := defaultPromotionTimeout
			if p := byName[pr.Namespace+"/"+pr.Spec.Pipeline]; p != nil && p.Spec.Timeout != nil && p.Spec.Timeout.Duration > 0 {
				timeout = p.Spec.Timeout.Duration
			}
			start := pr.CreationTimestamp.Time
			if pr.Status.StartedAt != nil {
				start = pr.Status.StartedAt.Time
			}
			elapsed := now.Sub(start)
			waiting := waitingTargets(pr)
			switch {
			case elapsed > timeout+d.opts.reconcileGrace:
				add(severityError, obj, fmt.Sprintf("%s is %s for %s, past its %s timeout, and the hub has not failed it%s", what, pr.Status.Phase, age(elapsed), age(timeout), waiting),
					"the hub's promotion controller is not acting: see the hub check")
			case elapsed >= timeout*4/5:
				add(severityWarning, obj, fmt.Sprintf("%s is %s for %s of its %s timeout%s", what, pr.Status.Phase, age(elapsed), age(timeout), waiting),
					fmt.Sprintf("look at the targets of %s: tugboat status %s -n %s", pr.Spec.To, pr.Spec.Pipeline, pr.Namespace))
			}
		case tugboatv1alpha1.PromotionFailed:
			key := pr.Namespace + "/" + pr.Spec.Pipeline
			failed[key] = append(failed[key], pr)
		}
	}

	// Each Pipeline's most recent failures: an error while nothing into
	// that environment succeeded or started since, a warning otherwise.
	for _, list := range failed {
		sort.Slice(list, func(i, j int) bool {
			ti, tj := finishedAt(list[i]), finishedAt(list[j])
			if !ti.Equal(tj) {
				return ti.After(tj)
			}
			return list[i].Name < list[j].Name
		})
		for n, pr := range list {
			if n >= d.opts.failures {
				break
			}
			obj := pr.Namespace + "/" + pr.Name
			reason, msg := "", ""
			if c := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
				reason, msg = c.Reason, c.Message
			}
			text := fmt.Sprintf("%s into %s of pipeline %s failed %s ago", pr.Spec.Version, pr.Spec.To, pr.Spec.Pipeline, age(now.Sub(finishedAt(pr))))
			if reason != "" {
				text += fmt.Sprintf(" (%s): %s", reason, msg)
			}
			retry := fmt.Sprintf("fix what the message names, then retry: tugboat promote %s --to %s --version %s -n %s", pr.Spec.Pipeline, pr.Spec.To, pr.Spec.Version, pr.Namespace)
			if later := laterPromotion(promotions, pr); later != "" {
				add(severityWarning, obj, text+"; since then "+later, retry)
				continue
			}
			add(severityError, obj, text, retry)
		}
	}
	if problems == 0 {
		d.add(checkPromotion, severityOK, "", fmt.Sprintf("%s %s: none stuck, none failed", plural(len(promotions), "Promotion"), d.scope()), "")
	}
}

// waitingTargets lists the destination targets a Promotion still waits for.
func waitingTargets(pr *tugboatv1alpha1.Promotion) string {
	var parts []string
	for _, t := range pr.Status.Targets {
		if t.Done {
			continue
		}
		s := t.Spoke + "/" + t.Namespace + "/" + t.Release
		if t.Message != "" {
			s += " (" + t.Message + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return ""
	}
	return "; waiting for " + strings.Join(parts, ", ")
}

func finishedAt(pr *tugboatv1alpha1.Promotion) time.Time {
	if pr.Status.CompletedAt != nil {
		return pr.Status.CompletedAt.Time
	}
	return pr.CreationTimestamp.Time
}

// laterPromotion describes a Promotion into the same environment that
// succeeded after failed finished, or is under way; "" when there is none.
func laterPromotion(promotions []tugboatv1alpha1.Promotion, failed *tugboatv1alpha1.Promotion) string {
	for i := range promotions {
		pr := &promotions[i]
		if pr.UID == failed.UID || pr.Namespace != failed.Namespace || pr.Spec.Pipeline != failed.Spec.Pipeline || pr.Spec.To != failed.Spec.To {
			continue
		}
		switch {
		case pr.Status.Phase == tugboatv1alpha1.PromotionSucceeded && finishedAt(pr).After(finishedAt(failed)):
			return fmt.Sprintf("%s succeeded (%s)", pr.Spec.Version, pr.Name)
		case !pr.Status.Phase.Terminal():
			return fmt.Sprintf("%s is under way (%s)", pr.Spec.Version, pr.Name)
		}
	}
	return ""
}

// checkReleaseHistories counts the ReleaseHistories whose Ready is False,
// by reason.
func (d *doctor) checkReleaseHistories(ctx context.Context) {
	var list tugboatv1alpha1.ReleaseHistoryList
	if !d.list(ctx, checkReleaseHistory, "releasehistories", &list) {
		return
	}
	byReason := map[string][]*tugboatv1alpha1.ReleaseHistory{}
	for i := range list.Items {
		rh := &list.Items[i]
		if c := apimeta.FindStatusCondition(rh.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil && c.Status == metav1.ConditionFalse {
			byReason[c.Reason] = append(byReason[c.Reason], rh)
		}
	}
	if len(byReason) == 0 {
		d.add(checkReleaseHistory, severityOK, "", fmt.Sprintf("%s %s, none Ready=False", plural(len(list.Items), "ReleaseHistory"), d.scope()), "")
		return
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		rhs := byReason[reason]
		sort.Slice(rhs, func(i, j int) bool {
			return rhs[i].Namespace+"/"+rhs[i].Name < rhs[j].Namespace+"/"+rhs[j].Name
		})
		names := make([]string, len(rhs))
		for i, rh := range rhs {
			names[i] = rh.Namespace + "/" + rh.Name
		}
		first := rhs[0]
		msg := ""
		if c := apimeta.FindStatusCondition(first.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil && c.Message != "" {
			msg = fmt.Sprintf(" (%s: %s)", first.Name, c.Message)
		}
		var hint string
		switch reason {
		case "Failed":
			hint = fmt.Sprintf("see what happened on the spoke: tugboat history %s/%s/%s -n %s --events", first.Spec.Spoke, first.Spec.Namespace, first.Spec.Release, first.Namespace)
		case "Uninstalled":
			hint = "the releases are gone from their spokes: delete their ReleaseHistories if that is for good, and drop them from Pipelines' targets"
		default:
			hint = "kubectl describe releasehistory " + first.Name + " -n " + first.Namespace
		}
		d.add(checkReleaseHistory, severityWarning, "", fmt.Sprintf("%s Ready=False (%s): %s%s", plural(len(rhs), "ReleaseHistory"), reason, firstFew(names, 3), msg), hint)
	}
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
