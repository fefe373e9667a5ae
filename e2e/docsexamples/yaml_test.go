package docsexamples

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/config"
)

// The kinds of example an HTML comment right above a ```yaml block may
// declare (<!-- example: KIND -->). A block without one must hold only
// Kubernetes objects (apiVersion and kind), each applied.
const (
	// markerPipelineSpec: keys of a Pipeline's spec (notify:,
	// environments:, ...), applied inside a Pipeline whose other required
	// fields the test fills in.
	markerPipelineSpec = "pipeline-spec"
	// markerPrometheusRules: Prometheus alerting rules (a list of rules, or
	// of groups), checked by checkAlertRules.
	markerPrometheusRules = "prometheus-rules"
	// markerNotKubernetes: YAML for something else (a Slack app manifest, a
	// GitHub Actions workflow); only parsed.
	markerNotKubernetes = "not-kubernetes"
	// markerAgentValues and markerHubValues: values of the agent's or the
	// hub's Helm chart, rendered with the chart (config.Render), whose
	// values.schema.json refuses unknown and invalid values.
	markerAgentValues = "agent-values"
	markerHubValues   = "hub-values"
)

// yamlDocs splits a block into its YAML documents, as JSON objects;
// documents with nothing but comments are dropped. Duplicate keys are an
// error.
func yamlDocs(text string) ([]map[string]any, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	var docs []map[string]any
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := sigsyaml.YAMLToJSONStrict(raw)
		if err != nil {
			return nil, err
		}
		var doc map[string]any
		if err := json.Unmarshal(js, &doc); err != nil {
			return nil, fmt.Errorf("not a YAML mapping: %w", err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// basePipeline is the Pipeline a pipeline-spec fragment is applied in: the
// fragment's keys replace these.
func basePipeline(namespace string, fragment map[string]any) map[string]any {
	spec := map[string]any{
		"release":   "web",
		"promotion": map[string]any{"type": "kubernetes"},
		"environments": []any{
			map[string]any{"name": "dev", "targets": []any{map[string]any{"spoke": "dev-1", "namespace": "apps"}}},
		},
	}
	for k, v := range fragment {
		spec[k] = v
	}
	return map[string]any{
		"apiVersion": "tugboat.dev/v1alpha1",
		"kind":       "Pipeline",
		"metadata":   map[string]any{"name": "fragment", "namespace": namespace},
		"spec":       spec,
	}
}

// dryRunApply applies obj with a server-side dry run: the API server
// validates it (schema, CEL rules, admission) and stores nothing. Unknown
// fields are errors.
func dryRunApply(ctx context.Context, obj map[string]any) error {
	u := &unstructured.Unstructured{Object: obj}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return errors.New("not a Kubernetes object: no apiVersion or kind")
	}
	return cluster.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner("docs-examples"), client.ForceOwnership, client.DryRunAll)
}

// ensureNamespace creates a namespace the examples live in.
func ensureNamespace(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// checkYAMLBlock validates one ```yaml block of the docs as its marker says.
func checkYAMLBlock(ctx context.Context, b Block) error {
	if b.Marker == markerPrometheusRules {
		return checkAlertRules(b.Text)
	}
	docs, err := yamlDocs(b.Text)
	if err != nil {
		return fmt.Errorf("invalid YAML: %w", err)
	}
	if len(docs) == 0 {
		return errors.New("no YAML document in the block")
	}
	switch b.Marker {
	case markerNotKubernetes:
		return nil
	case markerAgentValues, markerHubValues:
		return renderChart(b.Marker, docs)
	case "", markerPipelineSpec:
	default:
		return fmt.Errorf("unknown example marker %q (want %s, %s, %s, %s or %s)", b.Marker,
			markerPipelineSpec, markerPrometheusRules, markerAgentValues, markerHubValues, markerNotKubernetes)
	}
	for i, doc := range docs {
		obj := doc
		if b.Marker == markerPipelineSpec {
			obj = basePipeline("docs-fragments", doc)
		} else if _, ok := doc["kind"]; !ok {
			return fmt.Errorf("document %d is not a Kubernetes object (no kind): complete it, or mark the block <!-- example: %s|%s|%s -->",
				i+1, markerPipelineSpec, markerPrometheusRules, markerNotKubernetes)
		}
		u := &unstructured.Unstructured{Object: obj}
		if err := ensureNamespace(ctx, u.GetNamespace()); err != nil {
			return err
		}
		if err := dryRunApply(ctx, obj); err != nil {
			return fmt.Errorf("document %d (%s %s): %w", i+1, u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// TestDocs_yamlExamplesApplyToARealAPIServer applies every ```yaml block of
// docs/ with a server-side dry run, so the docs cannot show a field, a value
// or a combination the API refuses.
func TestDocs_yamlExamplesApplyToARealAPIServer(t *testing.T) {
	blocks, err := DocBlocks(docsDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	checked := 0
	for _, b := range blocks {
		if b.Lang != "yaml" && b.Lang != "yml" {
			continue
		}
		checked++
		if err := checkYAMLBlock(ctx, b); err != nil {
			t.Errorf("%s: %v", b.Where(), err)
		}
	}
	if checked < 20 {
		t.Errorf("only %d yaml blocks found in %s: is the extraction broken?", checked, docsDir)
	}
	t.Logf("%d yaml blocks checked", checked)
}

// TestDocs_yamlCheckFailsOnWrongExamples shows that the check above can
// fail: a misspelled field, a value the schema refuses, a CEL rule broken, a
// fragment that is not an object, and a Flux Alert with a kind it does not
// route.
func TestDocs_yamlCheckFailsOnWrongExamples(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pipeline := func(spec string) string {
		return "apiVersion: tugboat.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: web, namespace: docs-bad}\nspec:\n" + spec
	}
	cases := map[string]struct {
		block Block
		want  string
	}{
		"unknown field": {Block{Text: pipeline(`  release: web
  promotion: {type: kubernetes}
  environments: [{name: dev, soakTime: 5m, targets: [{spoke: dev-1, namespace: apps}]}]
`)}, "soakTime"},
		"enum": {Block{Text: pipeline(`  release: web
  promotion: {type: argo}
  environments: [{name: dev, targets: [{spoke: dev-1, namespace: apps}]}]
`)}, "argo"},
		"CEL rule": {Block{Text: pipeline(`  release: web
  promotion: {type: webhook}
  environments: [{name: dev, targets: [{spoke: dev-1, namespace: apps}]}]
`)}, "webhook is required when type is webhook"},
		"required field": {Block{Text: pipeline(`  promotion: {type: kubernetes}
  environments: [{name: dev, targets: [{spoke: dev-1, namespace: apps}]}]
`)}, "release"},
		"fragment without marker": {Block{Text: "notify:\n  - {name: x, type: flux}\n"}, "not a Kubernetes object"},
		"fragment field":          {Block{Marker: markerPipelineSpec, Text: "notify:\n  - {name: x, type: flux, flux: {url: http://nc/}}\n"}, "url"},
		"agent values":            {Block{Marker: markerAgentValues, Text: "helmStrategy: {enabled: true, allowedNamespace: [apps]}\n"}, "allowedNamespace"},
		"duplicate key":           {Block{Text: "apiVersion: v1\nkind: Secret\nkind: Secret\n"}, "already set"},
		"flux alert kind": {Block{Text: `apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Alert
metadata: {name: a, namespace: docs-bad}
spec:
  providerRef: {name: p}
  eventSources: [{kind: Pipeline, name: web}]
`}, "Pipeline"},
	}
	for name, c := range cases {
		err := checkYAMLBlock(ctx, c.block)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(err.Error()).To(ContainSubstring(c.want), name)
	}
}

// renderChart renders the agent's or the hub's chart with each document as
// values, over the values every install sets (the agent's spoke and hub URL).
func renderChart(marker string, docs []map[string]any) error {
	chart := config.HubChart
	if marker == markerAgentValues {
		chart = config.AgentChart
	}
	for i, values := range docs {
		if chart == config.AgentChart {
			if _, ok := values["spoke"]; !ok {
				values["spoke"] = "example"
			}
			if _, ok := values["hub"]; !ok {
				values["hub"] = map[string]any{"url": "https://tugboat-hub.example.com"}
			}
		}
		if _, err := config.Render(chart, "tugboat-system", values); err != nil {
			return fmt.Errorf("document %d: values of chart %s: %w", i+1, chart, err)
		}
	}
	return nil
}

func toUnstructured(obj map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: obj}
}
