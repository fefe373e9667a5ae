//go:build !agentonly

package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// hubAccess is one way to reach the hub: a kubeconfig for the CLI and the
// same as a REST config.
type hubAccess struct {
	kubeconfig string
	config     *rest.Config
}

// writeKubeconfig writes a kubeconfig for server whose context's
// namespace is default; edit changes its user.
func writeKubeconfig(t *testing.T, server string, insecure bool, edit func(*clientcmdapi.AuthInfo)) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(cluster.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		if server != "" {
			c.Server = server
		}
		if insecure {
			c.CertificateAuthorityData, c.CertificateAuthority, c.InsecureSkipTLSVerify = nil, "", true
		}
	}
	for _, a := range kc.AuthInfos {
		edit(a)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// accessFrom loads a kubeconfig's REST config.
func accessFrom(t *testing.T, path string) hubAccess {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return hubAccess{kubeconfig: path, config: cfg}
}

// impersonating reaches the hub as user (in groups, and
// system:authenticated, which the API server adds).
func impersonating(t *testing.T, user string, groups ...string) hubAccess {
	return accessFrom(t, writeKubeconfig(t, "", false, func(a *clientcmdapi.AuthInfo) {
		a.Impersonate, a.ImpersonateGroups = user, groups
	}))
}

// withBadToken reaches the hub with a bearer token it never issued and no
// client certificate.
func withBadToken(t *testing.T) hubAccess {
	return accessFrom(t, writeKubeconfig(t, "", false, func(a *clientcmdapi.AuthInfo) {
		*a = clientcmdapi.AuthInfo{Token: "not-a-token-the-hub-issued"}
	}))
}

// faultyHub puts a TLS reverse proxy in front of the hub's API server,
// reaching it as its administrator. fault answers the requests it wants to
// break (and returns true); the rest reach the real API server.
func faultyHub(t *testing.T, fault func(w http.ResponseWriter, r *http.Request) bool) hubAccess {
	t.Helper()
	target, err := url.Parse(cluster.RESTConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Authorization")
		},
		Transport: tr,
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fault(w, r) {
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return accessFrom(t, writeKubeconfig(t, srv.URL, true, func(a *clientcmdapi.AuthInfo) {
		*a = clientcmdapi.AuthInfo{}
	}))
}

// failing answers GET path with a 500 Status, as an API server with a
// failing etcd or webhook does.
func failing(path string) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || r.URL.Path != path {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcdserver: request timed out (injected)","reason":"InternalError","code":500}`))
		return true
	}
}

// grantRead lets user get and list resources of the tugboat.dev group in
// ns, and waits until the API server's authorizer knows it. It returns the
// Role, for a test to widen.
func grantRead(t *testing.T, user, ns string, resources ...string) *rbacv1.Role {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doctor-faults"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"tugboat.dev"}, Resources: resources, Verbs: []string{"get", "list"}}},
	}
	g.Expect(cluster.Client.Create(ctx, role)).To(Succeed())
	g.Expect(cluster.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doctor-faults"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
	review := func(g Gomega) {
		// The authorizer's view, asked as the user would be judged.
		as := impersonating(t, user)
		c, err := client.New(as.config, client.Options{Scheme: cluster.Client.Scheme()})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.List(ctx, &tugboatv1alpha1.PipelineList{}, client.InNamespace(ns))).To(Succeed())
	}
	g.Eventually(review).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	return role
}

// newCRD creates a namespaced CRD plural.group of kind, serving versions
// (the first stored) with a schema that keeps every field, and deletes it
// when t ends.
func newCRD(t *testing.T, group, plural, kind string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind},
		},
	}
	for i, v := range versions {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: i == 0,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: ptrTo(true)}},
		})
	}
	NewWithT(t).Expect(cluster.Client.Create(context.Background(), c)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), c) })
	return c
}

// waitCRDCondition waits until CRD name has condition c with status want.
func waitCRDCondition(t *testing.T, name string, c apiextensionsv1.CustomResourceDefinitionConditionType, want apiextensionsv1.ConditionStatus) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, cur)).To(Succeed())
		g.Expect(cur.Status.Conditions).To(ContainElement(And(HaveField("Type", c), HaveField("Status", want))))
	}).WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "CRD %s", name)
}

// Custom groups whose CRDs the crds faults use (doctor expects its kinds of
// one group/version; these stand in for tugboat.dev so that the real CRDs
// stay untouched for the other tests).
const (
	faultGroup      = "faults.tugboat.test" // widgets (v1alpha1), gizmos (names taken: not established)
	faultNewerGroup = "newer.tugboat.test"  // bolts (v1alpha1), sprockets (v1beta1 only)
)

// faultCRDs installs the CRDs of faultGroup and faultNewerGroup for the
// whole of t, once.
type faultCRDs struct {
	t    *testing.T
	done bool
}

func (f *faultCRDs) ensure() {
	if f.done {
		return
	}
	f.done = true
	t := f.t
	widgets := newCRD(t, faultGroup, "widgets", "Widget", "v1alpha1")
	waitCRDCondition(t, widgets.Name, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	// Same kind as widgets: its names are not accepted, so it never becomes
	// established.
	gizmos := newCRD(t, faultGroup, "gizmos", "Widget", "v1alpha1")
	waitCRDCondition(t, gizmos.Name, apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse)
	bolts := newCRD(t, faultNewerGroup, "bolts", "Bolt", "v1alpha1")
	sprockets := newCRD(t, faultNewerGroup, "sprockets", "Sprocket", "v1beta1")
	waitCRDCondition(t, bolts.Name, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
	waitCRDCondition(t, sprockets.Name, apiextensionsv1.Established, apiextensionsv1.ConditionTrue)
}

// fleet is a healthy namespace: spokes dev-1, staging-1 and prod-1 report
// (agent v0.3.0, 3 releases each), and Pipeline web (newPipeline: their
// three environments) is Ready. It returns the Pipeline.
func fleet(t *testing.T, ns string) *tugboatv1alpha1.Pipeline {
	t.Helper()
	for _, s := range []string{"dev-1", "staging-1", "prod-1"} {
		newSpoke(t, ns, s, true, readySpoke("v0.3.0", 3))
	}
	p := newPipeline(t, ns, "web")
	writeStatus(t, p, readyPipeline(metav1.Condition{Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "every target reports"}))
	return p
}

// updateSpoke changes Spoke name's spec, then writes status as the hub
// would after reconciling the change.
func updateSpoke(t *testing.T, ns, name string, mutate func(*tugboatv1alpha1.Spoke), status tugboatv1alpha1.SpokeStatus) {
	t.Helper()
	ctx := context.Background()
	sp := &tugboatv1alpha1.Spoke{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sp); err != nil {
		t.Fatal(err)
	}
	mutate(sp)
	if err := cluster.Client.Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
	status.ObservedGeneration = sp.Generation
	for i := range status.Conditions {
		status.Conditions[i].ObservedGeneration = sp.Generation
	}
	sp.Status = status
	if err := cluster.Client.Status().Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
}

// reconciledPipeline gives p a status as the hub writes it for p's current
// generation, with Ready cond and the extra conditions and holds.
func reconciledPipeline(t *testing.T, p *tugboatv1alpha1.Pipeline, ready metav1.Condition, extra []metav1.Condition, holds ...tugboatv1alpha1.HeldEnvironment) {
	t.Helper()
	st := readyPipeline(ready, holds...)
	st.Conditions = append(st.Conditions, extra...)
	st.ObservedGeneration = p.Generation
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = p.Generation
		if st.Conditions[i].LastTransitionTime.IsZero() {
			st.Conditions[i].LastTransitionTime = ago(time.Minute)
		}
	}
	writeStatus(t, p, st)
}

// newLifecycle creates Lifecycle name in ns (event key "<name>-key") and,
// when claimedAt is set, writes the claim its controller would have.
func newLifecycle(t *testing.T, ns, name, claimedBy string, claimedAt *metav1.Time) {
	t.Helper()
	ctx := context.Background()
	lc := &tugboatv1alpha1.Lifecycle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: tugboatv1alpha1.LifecycleSpec{EventKey: name + "-key"}}
	if err := cluster.Client.Create(ctx, lc); err != nil {
		t.Fatal(err)
	}
	if claimedAt == nil {
		return
	}
	lc.Status.ClaimedBy, lc.Status.LastClaimedAt = claimedBy, claimedAt
	if err := cluster.Client.Status().Update(ctx, lc); err != nil {
		t.Fatal(err)
	}
}

// newLifecycleEvent creates LifecycleEvent name of lifecycle in ns,
// finished with phase at finishedAt (as the hub or a step controller
// would have).
func newLifecycleEvent(t *testing.T, ns, name, lifecycle string, phase tugboatv1alpha1.LifecycleEventPhase, finishedAt metav1.Time) {
	t.Helper()
	ctx := context.Background()
	ev := &tugboatv1alpha1.LifecycleEvent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tugboatv1alpha1.LifecycleEventSpec{Lifecycle: lifecycle, EventKey: lifecycle + "-key", Promotion: "web-production-1.4.0", Pipeline: "web",
			Environment: "production", Version: "1.4.0", Step: "step", Stage: tugboatv1alpha1.StepStagePre, Attempt: 1, Deadline: finishedAt},
	}
	if err := cluster.Client.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}
	ev.Status = tugboatv1alpha1.LifecycleEventStatus{Phase: phase, FinishedAt: &finishedAt}
	if phase == tugboatv1alpha1.EventDone {
		ev.Status.FinishedBy = "smoke-bot"
	}
	if err := cluster.Client.Status().Update(ctx, ev); err != nil {
		t.Fatal(err)
	}
}
