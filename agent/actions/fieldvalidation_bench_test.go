package actions

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"

	"tugboat.dev/tugboat/api/wire"
)

// BenchmarkExecutor_upgrade times one upgrade action of the web chart (a
// Deployment, a Service and a ConfigMap) from 1.0.0 to 1.1.0, each of a
// release of its own with one revision (as in BenchmarkPromotion_endToEnd),
// with the view of the APIs and the chart kept, against the harness's API
// server: the agent's part of a promotion. It reports the mean render
// (Helm until the pending revision) and apply stages, with the
// field-validation answers kept ("kept") and with Helm's validator as it
// is ("helm"), which parses the OpenAPI v3 documents for every build.
// For a CPU profile of the agent's side alone:
//
//	go test -run '^$' -bench BenchmarkExecutor_upgrade/kept -benchtime 100x -cpuprofile cpu.out ./agent/actions/
func BenchmarkExecutor_upgrade(b *testing.B) {
	for _, kept := range []bool{true, false} {
		name := "kept"
		if !kept {
			name = "helm"
		}
		b.Run(name, func(b *testing.B) {
			ns := newNamespace(b)
			for i := range b.N + 1 {
				install(b, ns, fmt.Sprintf("web-%d", i), "1.0.0", nil)
			}
			e, err := NewExecutor(cluster.RESTConfig, testOptions(allowAll()), logr.Discard())
			if err != nil {
				b.Fatal(err)
			}
			if !kept {
				e.fieldValidation = nil
			}
			// The first action takes the view and the chart.
			if out, err := e.Execute(b.Context(), upgradeAction(ns, "web-0", "1.1.0")); err != nil || out.Result != wire.ActionSucceeded {
				b.Fatalf("warming up: %v %s", err, out.Message)
			}
			render, apply := stageSum(b, stageRender), stageSum(b, stageApply)
			b.ResetTimer()
			for i := range b.N {
				out, err := e.Execute(b.Context(), upgradeAction(ns, fmt.Sprintf("web-%d", i+1), "1.1.0"))
				if err != nil || out.Result != wire.ActionSucceeded {
					b.Fatalf("upgrade %d: %v %s", i, err, out.Message)
				}
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric((stageSum(b, stageRender)-render)*1000/n, "ms-render/op")
			b.ReportMetric((stageSum(b, stageApply)-apply)*1000/n, "ms-apply/op")
		})
	}
}

// stageSum is the seconds the stage histogram holds for stage.
func stageSum(b *testing.B, stage string) float64 {
	b.Helper()
	var m dto.Metric
	h, ok := actionStages.WithLabelValues(stage).(interface{ Write(*dto.Metric) error })
	if !ok {
		b.Fatal("the stage histogram cannot be read")
	}
	if err := h.Write(&m); err != nil {
		b.Fatal(err)
	}
	return m.GetHistogram().GetSampleSum()
}
