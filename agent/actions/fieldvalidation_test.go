package actions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/wire"
)

// Issue 28, item 4: two thirds of the agent's upgrade went on kubectl's
// validator parsing the group-version's OpenAPI v3 document again for
// each of Helm's two builds. The answer it reads there (does the server
// validate the kind's fields itself) is kept by the document's hash: a
// second upgrade, even with a new view of the spoke's APIs (the documents
// no longer in memory), neither downloads nor parses the documents again.
func TestExecutor_keepsWhatItReadOfTheOpenAPIDocumentsByTheirHash(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "one", "1.0.0", nil)
	install(t, ns, "two", "1.0.0", nil)
	e, counter, now := countingExecutor(t, testOptions(allowAll()))

	g.Expect(execute(t, e, upgradeAction(ns, "one", "1.1.0")).Result).To(Equal(wire.ActionSucceeded))
	first := counter.take()
	g.Expect(first).To(HaveKeyWithValue("/openapi/v3/apis/apps/v1", 1), "the Deployment's document is read once")
	g.Expect(first).To(HaveKeyWithValue("/openapi/v3/api/v1", 1), "and the ConfigMap's and Service's")
	// The web chart holds a ConfigMap, a Deployment and a Service: one
	// answer each, for the new manifest's build and the current one's.
	read := e.fieldValidation.computed.Load()
	g.Expect(read).To(BeEquivalentTo(3))

	g.Expect(execute(t, e, upgradeAction(ns, "one", "1.2.0")).Result).To(Equal(wire.ActionSucceeded))
	g.Expect(e.fieldValidation.computed.Load()).To(Equal(read), "the same view: nothing parsed again")

	// A new view: the documents are not in memory any more, and the
	// discovery document (/openapi/v3, with each document's hash) is read
	// again; the documents whose hash did not change are not.
	*now = now.Add(DiscoveryMaxAge + time.Second)
	counter.take()
	g.Expect(execute(t, e, upgradeAction(ns, "two", "1.1.0")).Result).To(Equal(wire.ActionSucceeded))
	again := counter.take()
	g.Expect(again).To(HaveKey("/openapi/v3"), "the view is new")
	g.Expect(again).NotTo(HaveKey("/openapi/v3/apis/apps/v1"), "unchanged documents are neither downloaded nor parsed")
	g.Expect(again).NotTo(HaveKey("/openapi/v3/api/v1"))
	g.Expect(e.fieldValidation.computed.Load()).To(Equal(read))
	g.Expect(last(t, ns, "two").Chart.Metadata.Version).To(Equal("1.1.0"))
}

// A CRD whose schema changes has a new document hash: what was kept for
// its kind is not used, the document is read again.
func TestExecutor_readsAChangedOpenAPIDocumentAgain(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	group := "fv" + randomHex(3) + ".tugboat.dev"
	crd := createCRD(t, group, "Gizmo", map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}})
	gizmo := gizmoTemplate(group, "Gizmo", "3")

	r := newTestRepo(t)
	for _, v := range []string{"1.1.0", "1.2.0"} {
		r.publish(t, configChart("gizmos", v, "note-"+v, gizmo))
	}
	installChart(t, ns, "gizmos", configChart("gizmos", "1.0.0", "note-1.0.0", gizmo))
	limits := allowAll()
	limits.ChartSources = append(limits.ChartSources, r.srv.URL)
	e, counter, now := countingExecutor(t, testOptions(limits))
	doc := "/openapi/v3/apis/" + group + "/v1"
	up := func(version string) wire.ActionOutcome {
		a := upgradeAction(ns, "gizmos", version)
		a.Chart = wire.ChartSource{Repository: r.srv.URL, Name: "gizmos"}
		return execute(t, e, a)
	}

	out := up("1.1.0")
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(counter.take()).To(HaveKeyWithValue(doc, 1))
	read := e.fieldValidation.computed.Load()
	g.Expect(read).To(BeEquivalentTo(2), "the ConfigMap and the Gizmo")

	// The CRD's schema changes: its document gets a new hash.
	before := openAPIDocURL(g, group)
	g.Eventually(func(g Gomega) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(crd), got)).To(Succeed())
		got.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["color"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		g.Expect(cluster.Client.Update(context.Background(), got)).To(Succeed())
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(openAPIDocURL(g, group)).NotTo(Equal(before)) }).
		WithTimeout(30*time.Second).Should(Succeed(), "the API server publishes the new schema")

	*now = now.Add(DiscoveryMaxAge + time.Second) // a new view
	counter.take()
	out = up("1.2.0")
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	again := counter.take()
	g.Expect(again).To(HaveKeyWithValue(doc, 1), "the changed document is read again")
	g.Expect(again).NotTo(HaveKey("/openapi/v3/api/v1"), "the unchanged one is not")
	g.Expect(e.fieldValidation.computed.Load()).To(Equal(read+1), "the Gizmo answered again, the ConfigMap kept")
}

// Keeping the answers does not weaken validation. A CRD installed between
// two upgrades (the executor's view of the APIs taken before it) is found,
// and what its schema refuses is refused; a valid object of it goes in. An
// invalid manifest is still refused before anything is written. (Unknown
// fields are not refused, with or without the kept answers: the API server
// validates fields, kubectl's client-side validation is skipped for it,
// and Helm does not ask the server to be strict, so the server drops them
// with a warning.)
func TestExecutor_validatesAsBeforeWithTheAnswersKept(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	r := newTestRepo(t)
	group := "fv" + randomHex(3) + ".tugboat.dev"
	r.publish(t, configChart("widgets", "1.1.0", "with-a-widget", gizmoTemplate(group, "Widget", "3")))
	r.publish(t, configChart("badwidgets", "1.1.0", "with-a-bad-widget", gizmoTemplate(group, "Widget", `"three"`)))
	r.publish(t, configChart("nokind", "1.1.0", "without-a-kind", &chart.File{Name: "templates/bad.yaml", Data: []byte(
		"apiVersion: v1\nmetadata:\n  name: {{ .Release.Name }}-bad\ndata:\n  a: b\n")}))
	for _, name := range []string{"widgets", "badwidgets", "nokind"} {
		installChart(t, ns, name, configChart(name, "1.0.0", "before"))
	}
	install(t, ns, "warm", "1.0.0", nil)
	limits := allowAll()
	limits.ChartSources = append(limits.ChartSources, r.srv.URL)
	e, _, _ := countingExecutor(t, testOptions(limits))
	up := func(name string) wire.ActionOutcome {
		a := upgradeAction(ns, name, "1.1.0")
		a.Chart = wire.ChartSource{Repository: r.srv.URL, Name: name}
		return execute(t, e, a)
	}
	// The view and the ConfigMap's answer are taken now.
	g.Expect(execute(t, e, upgradeAction(ns, "warm", "1.1.0")).Result).To(Equal(wire.ActionSucceeded))
	g.Expect(e.fieldValidation.computed.Load()).To(BeNumerically(">", 0))

	createCRD(t, group, "Widget", map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}})

	out := up("badwidgets")
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("spec.size"), "the API server refuses what the new kind's schema does not allow")
	g.Expect(getWidget(ctx, group, ns, "badwidgets-widget")).To(Satisfy(apierrors.IsNotFound), "no such Widget was made")

	out = up("widgets")
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(getWidget(ctx, group, ns, "widgets-widget")).To(Succeed())

	out = up("nokind")
	g.Expect(out.Result).To(Equal(wire.ActionFailed))
	g.Expect(out.Message).To(ContainSubstring("kind not set"))
	g.Expect(history(t, ns, "nokind")).To(HaveLen(1), "refused before anything was written")
}

// An answer that could not be read (the document's download failed) is
// not kept: once the document can be read, it is.
func TestExecutor_doesNotKeepAFailedRead(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "one", "1.0.0", nil)
	install(t, ns, "two", "1.0.0", nil)
	gt := newGate(t)
	gt.only = "/openapi/v3/api" // the documents, not the discovery document
	counter := &discoveryCounter{paths: map[string]int{}}
	cfg := &rest.Config{Host: gt.srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, WrapTransport: counter.wrap}
	e, err := NewExecutor(cfg, testOptions(allowAll()), testr.New(t))
	g.Expect(err).NotTo(HaveOccurred())
	now := time.Now()
	e.apis.now = func() time.Time { return now }

	// kubectl falls back to the OpenAPI v2 document, as before.
	out := execute(t, e, upgradeAction(ns, "one", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(counter.take()).To(HaveKey("/openapi/v2"))
	g.Expect(e.fieldValidation.computed.Load()).To(BeZero(), "nothing read, nothing kept")

	gt.open.Store(true)
	now = now.Add(DiscoveryMaxAge + time.Second)
	out = execute(t, e, upgradeAction(ns, "two", "1.1.0"))
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(counter.take()).To(HaveKey("/openapi/v3/apis/apps/v1"))
	g.Expect(e.fieldValidation.computed.Load()).To(BeEquivalentTo(3))
}

// The answers kept are bounded; the least recently used goes first.
func TestFieldValidation_isBounded(t *testing.T) {
	g := NewWithT(t)
	f := newFieldValidation()
	for i := range fieldValidationAnswers + 10 {
		f.answers.put(fieldValidationKey{gvk: schema.GroupVersionKind{Kind: fmt.Sprint(i)}}, nil, 1)
	}
	n, _ := f.answers.len()
	g.Expect(n).To(Equal(fieldValidationAnswers))
	_, kept := f.answers.get(fieldValidationKey{gvk: schema.GroupVersionKind{Kind: "0"}})
	g.Expect(kept).To(BeFalse())
}

// createCRD creates the namespaced kind in group (version v1) whose spec
// has properties, waits until it is served and its OpenAPI v3 document
// published, and deletes it when the test ends.
func createCRD(t *testing.T, group, kind string, properties map[string]apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	plural := strings.ToLower(kind) + "s"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: properties},
					},
				}},
			}},
		},
	}
	g.Expect(cluster.Client.Create(ctx, crd)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), crd) })
	g.Eventually(func(g Gomega) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(crd), got)).To(Succeed())
		established := false
		for _, c := range got.Status.Conditions {
			established = established || c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		}
		g.Expect(established).To(BeTrue())
		g.Expect(openAPIDocURL(g, group)).NotTo(BeEmpty())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return crd
}

// openAPIDocURL is the server-relative URL (with its hash) of group/v1's
// OpenAPI v3 document, read fresh from the API server ("": none).
func openAPIDocURL(g Gomega, group string) string {
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.RESTConfig)
	g.Expect(err).NotTo(HaveOccurred())
	paths, err := dc.OpenAPIV3().Paths()
	g.Expect(err).NotTo(HaveOccurred())
	if doc, ok := paths["apis/"+group+"/v1"]; ok {
		return doc.ServerRelativeURL()
	}
	return ""
}

// gizmoTemplate is a chart template of one object of kind in group/v1,
// named after the release and the kind, with spec.size set to size (YAML).
func gizmoTemplate(group, kind, size string) *chart.File {
	return &chart.File{Name: "templates/" + strings.ToLower(kind) + ".yaml", Data: []byte(
		"apiVersion: " + group + "/v1\nkind: " + kind + "\nmetadata:\n  name: {{ .Release.Name }}-" + strings.ToLower(kind) + "\nspec:\n  size: " + size + "\n")}
}

func getWidget(ctx context.Context, group, ns, name string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"})
	return cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
}
