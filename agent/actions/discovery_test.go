package actions

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/wire"
)

// discoveryCounter counts the requests that discover a cluster's APIs.
type discoveryCounter struct {
	mu    sync.Mutex
	paths map[string]int
}

func (c *discoveryCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if p := r.URL.Path; p == "/api" || p == "/apis" || p == "/version" || strings.HasPrefix(p, "/openapi/") {
			c.mu.Lock()
			c.paths[p]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (c *discoveryCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.paths
	c.paths = map[string]int{}
	return p
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingExecutor is an executor whose requests to the spoke are counted
// by counter, with a clock the test moves.
func countingExecutor(t *testing.T, opts Options) (*Executor, *discoveryCounter, *time.Time) {
	t.Helper()
	counter := &discoveryCounter{paths: map[string]int{}}
	cfg := rest.CopyConfig(cluster.RESTConfig)
	cfg.WrapTransport = counter.wrap
	e, err := NewExecutor(cfg, opts, testr.New(t))
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	now := time.Now()
	e.apis.now = func() time.Time { return now }
	return e, counter, &now
}

// Issue 28, item 4: the time between an action's arrival and its upgrade
// starting went mostly on discovering the spoke's APIs and downloading its
// OpenAPI document, for every action. The executor now keeps that view for
// DiscoveryMaxAge.
func TestExecutor_discoversTheSpokesAPIsOncePerView(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	install(t, ns, "one", "1.0.0", nil)
	install(t, ns, "two", "1.0.0", nil)
	install(t, ns, "three", "1.0.0", nil)
	e, counter, now := countingExecutor(t, testOptions(allowAll()))

	g.Expect(execute(t, e, upgradeAction(ns, "one", "1.1.0")).Result).To(Equal(wire.ActionSucceeded))
	first := counter.take()
	g.Expect(first).To(HaveKey("/apis"), "the first action discovers the APIs")
	g.Expect(first).To(HaveKey("/openapi/v3/apis/apps/v1"), "and validates the Deployment against the OpenAPI document")

	g.Expect(execute(t, e, upgradeAction(ns, "two", "1.1.0")).Result).To(Equal(wire.ActionSucceeded))
	second := counter.take()
	// Helm checks that the cluster is reachable (GET /version) for each
	// action: one small request, not discovery.
	delete(second, "/version")
	g.Expect(second).To(BeEmpty(), "a second action within DiscoveryMaxAge discovers nothing again")
	g.Expect(last(t, ns, "two").Chart.Metadata.Version).To(Equal("1.1.0"))

	*now = now.Add(DiscoveryMaxAge + time.Second)
	g.Expect(execute(t, e, upgradeAction(ns, "three", "1.1.0")).Result).To(Equal(wire.ActionSucceeded))
	again := counter.take()
	g.Expect(again).To(HaveKey("/apis"), "past DiscoveryMaxAge the APIs are discovered again")
	g.Expect(again).To(HaveKey("/openapi/v3"), "and the OpenAPI v3 documents' hashes")
	// The documents themselves are not read again while their hashes are
	// unchanged (TestExecutor_keepsWhatItReadOfTheOpenAPIDocumentsByTheirHash).
}

// A kind the spoke started serving after the executor's view was taken (a
// CRD installed since) is found: the upgrade, failed before it changed
// anything, is retried once with a fresh view.
func TestExecutor_upgradesWithAKindServedSinceItsView(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	// A chart whose 1.1.0 adds a Gadget, a kind no cluster serves yet.
	r := newTestRepo(t)
	gadget := &chart.File{Name: "templates/gadget.yaml", Data: []byte(
		"apiVersion: example.tugboat.dev/v1\nkind: Gadget\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  size: 3\n")}
	r.publish(t, configChart("gadgets", "1.1.0", "with-a-gadget", gadget))
	installChart(t, ns, "gadgets", configChart("gadgets", "1.0.0", "no-gadget"))
	install(t, ns, "warm", "1.0.0", nil)

	limits := allowAll()
	limits.ChartSources = append(limits.ChartSources, r.srv.URL)
	e, _, _ := countingExecutor(t, testOptions(limits))
	// The view is taken now, before the Gadget kind exists.
	g.Expect(execute(t, e, upgradeAction(ns, "warm", "1.1.0")).Result).To(Equal(wire.ActionSucceeded))

	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.tugboat.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.tugboat.dev",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTo(true),
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
	}).WithTimeout(30 * time.Second).Should(Succeed())

	a := upgradeAction(ns, "gadgets", "1.1.0")
	a.Chart = wire.ChartSource{Repository: r.srv.URL, Name: "gadgets"}
	out := execute(t, e, a)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	h := history(t, ns, "gadgets")
	g.Expect(h).To(HaveLen(2), "one upgrade, no failed revision before it")
	g.Expect(h[1].Manifest).To(ContainSubstring("kind: Gadget"))
}

func ptrTo[T any](v T) *T { return &v }

// The REST mapper is the view's: every action within the view maps kinds
// with the one built from it, and a new view has a new one.
func TestExecutor_keepsTheRESTMapperWithTheView(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	e, _, now := countingExecutor(t, testOptions(allowAll()))
	mapper := func() meta.RESTMapper {
		cfg, err := e.helmConfig(ns, "any")
		g.Expect(err).NotTo(HaveOccurred())
		// What Helm's kube client builds manifests with.
		f, ok := cfg.KubeClient.(*kube.Client).Factory.(interface {
			ToRESTMapper() (meta.RESTMapper, error)
		})
		g.Expect(ok).To(BeTrue())
		m, err := f.ToRESTMapper()
		g.Expect(err).NotTo(HaveOccurred())
		return m
	}
	e.apis.begin()
	first := mapper()
	g.Expect(mapper()).To(BeIdenticalTo(first), "one mapper for the view")

	e.apis.Invalidate()
	second := mapper()
	g.Expect(second).NotTo(BeIdenticalTo(first), "a view dropped (a CRD installed, a failure) has a new one")

	*now = now.Add(DiscoveryMaxAge + time.Second)
	e.apis.begin()
	g.Expect(mapper()).NotTo(BeIdenticalTo(second), "and so has a view past its age")
}

// A chart that brings its own CRD and an object of it is installed: Helm
// installs the CRD, drops the view (discovery and the REST mapper), and
// maps the object with a new one, although the executor's view was taken
// before the kind existed.
func TestExecutor_installsAChartWithItsCRDWithAViewTakenBefore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	group := "fv" + randomHex(3) + ".tugboat.dev"
	r := newTestRepo(t)
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sprockets.%[1]s
spec:
  group: %[1]s
  names: {plural: sprockets, singular: sprocket, kind: Sprocket, listKind: SprocketList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`, group)
	ch := configChart("sprockets", "1.0.0", "with-a-crd", gizmoTemplate(group, "Sprocket", "3"))
	ch.Files = append(ch.Files, &chart.File{Name: "crds/sprockets.yaml", Data: []byte(crd)})
	r.publish(t, ch)
	t.Cleanup(func() {
		_ = cluster.Client.Delete(context.Background(), &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "sprockets." + group}})
	})
	install(t, ns, "warm", "1.0.0", nil)
	opts := testOptions(allowAll())
	opts.Limits.ChartSources = append(opts.Limits.ChartSources, r.srv.URL)
	opts.InstallMissing = true
	e, _, _ := countingExecutor(t, opts)
	g.Expect(execute(t, e, upgradeAction(ns, "warm", "1.1.0")).Result).To(Equal(wire.ActionSucceeded), "the view is taken")

	a := upgradeAction(ns, "sprockets", "1.0.0")
	a.Chart = wire.ChartSource{Repository: r.srv.URL, Name: "sprockets"}
	out := execute(t, e, a)
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	g.Expect(out.Message).To(ContainSubstring("installed release"))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Sprocket"})
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sprockets-sprocket"}, u)).To(Succeed())
}
