package actions

import (
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"

	"tugboat.dev/tugboat/api/wire"
)

// stageCount is how many times stage was recorded.
func stageCount(t *testing.T, stage string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := actionStages.WithLabelValues(stage).(interface{ Write(*dto.Metric) error }).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// Issue 28, item 4: an upgrade records each of its stages once, so that
// tugboat_agent_action_stage_seconds says where an action's time goes; an
// upgrade that finds the release already at the version stops after
// settle.
func TestExecutor_recordsTheStagesOfAnUpgrade(t *testing.T) {
	g := NewWithT(t)
	r := newTestRepo(t)
	r.publish(t, configChart("notes", "1.1.0", "first"))
	e, ns := indexFixture(t, r, nil, "a")
	stages := []string{stageConfig, stageSettle, stageChart, stageRender, stageApply}
	before := map[string]uint64{}
	for _, s := range stages {
		before[s] = stageCount(t, s)
	}

	out := upgradeFrom(t, e, r, ns, "a", "1.1.0")
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	for _, s := range stages {
		g.Expect(stageCount(t, s)-before[s]).To(BeEquivalentTo(1), "stage %s", s)
	}

	out = upgradeFrom(t, e, r, ns, "a", "1.1.0")
	g.Expect(out.Message).To(ContainSubstring("already at chart version 1.1.0"))
	for _, s := range stages {
		want := 1
		if s == stageConfig || s == stageSettle {
			want = 2
		}
		g.Expect(stageCount(t, s)-before[s]).To(BeEquivalentTo(want), "stage %s", s)
	}
}
