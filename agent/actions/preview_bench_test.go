package actions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/api/wire"
)

// demoChartDir is tugboat's sample chart (the dev environment's demo):
// from 1.0.0 to 1.1.0 its Deployment loses the toleration of the
// dedicated nodes.
const demoChartDir = "../../e2e/devenv/charts/demo"

// manyChart is a generated chart of 200 objects: 100 ConfigMaps and 100
// Deployments; from 1.0.0 to 1.1.0 every one of them changes (a level, an
// image).
const manyChart = "many-app"

func manyChartAt(version string) *chart.Chart {
	values := map[string]any{"count": 100, "level": "info"}
	if version != "1.0.0" {
		values["level"] = "debug"
	}
	tmpl := `{{- range $i := until (int .Values.count) }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $.Release.Name }}-config-{{ $i }}
data:
  level: {{ $.Values.level | quote }}
  index: "{{ $i }}"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $.Release.Name }}-app-{{ $i }}
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ $.Release.Name }}-app-{{ $i }}}
  template:
    metadata:
      labels: {app: {{ $.Release.Name }}-app-{{ $i }}}
    spec:
      containers:
        - name: app
          image: registry.example/many:{{ $.Chart.AppVersion }}
{{- end }}
`
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: manyChart, Version: version, AppVersion: version}, Values: values}
	raw, _ := yaml.Marshal(values)
	ch.Raw = []*chart.File{{Name: chartutil.ValuesfileName, Data: raw}}
	ch.Templates = []*chart.File{{Name: "templates/objects.yaml", Data: []byte(tmpl)}}
	return ch
}

// BenchmarkPreview_perTarget (issue 26): the agent's whole preview of one
// target, as the hub asks it through the actions channel: the chart
// (cached after the first fetch) rendered at 1.1.0 with the release's live
// values (reset-then-reuse) by a server-side dry run against the spoke's
// real API server, compared with the live release at 1.0.0, the answer
// bounded and redacted. For the sample chart (3 objects, 2 changed) and a
// generated chart of 200 objects (all changed). The hub's side (the
// actions channel, storing the PromotionPreview) is not in it.
func BenchmarkPreview_perTarget(b *testing.B) {
	ctx := context.Background()
	e, err := NewExecutor(cluster.RESTConfig, testOptions(allowAll()), logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	demo, err := loader.Load(demoChartDir)
	if err != nil {
		b.Fatal(err)
	}
	demo.Metadata.Version, demo.Metadata.AppVersion = "1.0.0", "1.0.0"
	for _, c := range []struct {
		name, chart string
		live        *chart.Chart
		objects     int
	}{
		{"chart=demo", "demo", demo, 2},
		{"chart=objects-200", manyChart, manyChartAt("1.0.0"), 200},
	} {
		b.Run(c.name, func(b *testing.B) {
			ns := newNamespace(b)
			in := action.NewInstall(helmConfig(b, ns))
			in.ReleaseName, in.Namespace, in.Timeout = "bench", ns, time.Minute
			if _, err := in.RunWithContext(ctx, c.live, nil); err != nil {
				b.Fatalf("helm install: %v", err)
			}
			a := wire.Action{
				ID: wire.NewActionID(randomHex(8), "spoke", ns, "bench"), Type: wire.ActionPreview,
				Promotion: "pipelines/bench-1.1.0", Namespace: ns, Release: "bench", Created: time.Now(),
				Preview: &wire.PreviewAction{Chart: wire.ChartSource{Repository: chartsURL, Name: c.chart}, Version: "1.1.0", ValuesPolicy: wire.ValuesResetThenReuse},
			}
			for b.Loop() {
				out, err := e.Execute(ctx, a)
				if err != nil {
					b.Fatal(err)
				}
				if out.Result != wire.ActionSucceeded || out.Preview == nil {
					b.Fatalf("preview %s: %s", out.Result, out.Message)
				}
				changed := 0
				for _, o := range out.Preview.Objects {
					if o.Change == wire.ChangeChanged {
						changed++
					}
				}
				if cut := out.Preview.Truncated && c.objects > len(out.Preview.Objects); changed != c.objects && !cut {
					b.Fatalf("preview: %d objects changed, want %d: %s", changed, c.objects, strings.Join(objectNames(out.Preview), ", "))
				}
			}
		})
	}
}

func objectNames(p *wire.PreviewResult) []string {
	var out []string
	for _, o := range p.Objects {
		out = append(out, fmt.Sprintf("%s %s/%s", o.Change, o.Kind, o.Name))
	}
	return out
}
