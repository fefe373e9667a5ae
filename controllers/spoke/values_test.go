package spoke

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRefusedValues: every value a Spoke sets (each leaf by its dotted
// path; a null or an empty map counts as one) must be allowed or lie under
// an allowed one, and the namespace lists may not name the system
// namespaces.
func TestRefusedValues(t *testing.T) {
	allowed := DefaultAllowedValues()
	for _, tc := range []struct {
		name, values string
		allowed      []string
		want         []string // substrings, one per refusal
	}{
		{name: "nothing", values: `{}`},
		{name: "allowed leaves", values: `{"replicas": 2, "resources": {"limits": {"memory": "1Gi"}}, "webhook": {"enabled": false}, "backfill": {"namespaces": ["apps"]}, "watchNamespaces": ["apps"], "networkPolicy": {"enabled": true, "metricsFrom": [{"podSelector": {}}]}}`},
		{name: "a sibling of an allowed leaf", values: `{"webhook": {"enabled": false, "port": 1}}`, want: []string{"sets webhook.port, which"}},
		{name: "a whole map above an allowed leaf", values: `{"backfill": null}`, want: []string{"sets backfill, which"}},
		{name: "an empty map above an allowed leaf", values: `{"webhook": {}}`, want: []string{"sets webhook, which"}},
		{name: "a null leaf", values: `{"backfill": {"protectedNamespaces": null}}`, want: []string{"sets backfill.protectedNamespaces, which"}},
		{name: "a dotted key is one key", values: `{"backfill.namespaces": ["apps"]}`, want: []string{"sets backfill.namespaces, which"}},
		{name: "sorted, and the allow-list named", values: `{"image": {"tag": "x", "repository": "y"}, "extraArgs": []}`,
			want: []string{"sets extraArgs, image.repository, image.tag, which the hub does not allow (its --bootstrap-allowed-values: replicas,resources,"}},
		{name: "none allowed", values: `{"replicas": 1}`, allowed: []string{}, want: []string{"sets replicas, which the hub does not allow (its --bootstrap-allowed-values: none)"}},
		{name: "an operator's map", values: `{"image": {"tag": "x"}, "helmStrategy": {"enabled": true}}`, allowed: []string{"image", "helmStrategy.enabled"}},
		{name: "a system namespace", values: `{"watchNamespaces": ["kube-node-lease"]}`, want: []string{"watchNamespaces names kube-node-lease"}},
		{name: "a system namespace to the backfill", values: `{"backfill": {"namespaces": ["apps", "kube-system"]}}`, want: []string{"backfill.namespaces names kube-system"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var values map[string]any
			g.Expect(json.Unmarshal([]byte(tc.values), &values)).To(Succeed())
			list := allowed
			if tc.allowed != nil {
				list = tc.allowed
			}
			got := refusedValues(values, list)
			g.Expect(got).To(HaveLen(len(tc.want)), "%q", got)
			for i, w := range tc.want {
				g.Expect(got[i]).To(ContainSubstring(w))
			}
		})
	}
}
