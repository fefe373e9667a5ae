package config_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/config"
)

// TestBuild_embedsEveryFileOfTheBases builds the embedded bases in memory and
// compares them with the same overlays built from disk: a file missing from
// the embed pattern (or a base reaching outside it) shows up here.
func TestBuild_embedsEveryFileOfTheBases(t *testing.T) {
	for _, tc := range []struct {
		name     string
		embedded string
		onDisk   string
	}{
		{"hub", "resources: [../hub]\n", "hub"},
		{"crd", "resources: [../crd]\n", "crd"},
		{"agent with cert-manager", "resources: [../agent]\ncomponents: [../agent/certmanager]\n" +
			"configMapGenerator:\n  - name: tugboat-agent\n    behavior: merge\n    literals:\n" +
			"      - spoke=staging-1\n      - hubURL=https://tugboat-hub.example.com\n",
			""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := config.Build([]byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" + tc.embedded))
			g.Expect(err).NotTo(HaveOccurred())
			got := map[string]map[string]any{}
			for _, o := range objs {
				md, _ := o["metadata"].(map[string]any)
				// Through YAML, so numbers have the same Go types on both sides.
				data, err := yaml.Marshal(o)
				g.Expect(err).NotTo(HaveOccurred())
				var m map[string]any
				g.Expect(yaml.Unmarshal(data, &m)).To(Succeed())
				got[fmt.Sprintf("%s/%v/%v", o["kind"], valueOr(md["namespace"]), md["name"])] = m
			}
			dir := tc.onDisk
			if dir == "" {
				dir = overlay(t, []string{"agent"}, []string{"agent/certmanager"})
			}
			want := map[string]map[string]any{}
			for key, data := range build(t, dir) {
				var m map[string]any
				g.Expect(yaml.Unmarshal(data, &m)).To(Succeed())
				want[key] = m
			}
			g.Expect(got).NotTo(BeEmpty())
			g.Expect(got).To(Equal(want))
		})
	}
}

func valueOr(v any) any {
	if v == nil {
		return ""
	}
	return v
}
