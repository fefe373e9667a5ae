//go:build !agentonly

package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/controllers/dora/doratest"
)

// doraJSON is what `status --dora -o json` prints of one Pipeline.
type doraJSON struct {
	Namespace                 string       `json:"namespace"`
	Pipeline                  string       `json:"pipeline"`
	From                      time.Time    `json:"from"`
	To                        time.Time    `json:"to"`
	FirstEnvironment          string       `json:"firstEnvironment"`
	Environment               string       `json:"environment"`
	Deployments               int          `json:"deployments"`
	DeploymentFrequencyPerDay float64      `json:"deploymentFrequencyPerDay"`
	LeadTime                  *summaryJSON `json:"leadTime"`
	LeadTimeUnknown           int          `json:"leadTimeUnknown"`
	Changes                   int          `json:"changes"`
	ChangeFailures            int          `json:"changeFailures"`
	ChangeFailureRate         *float64     `json:"changeFailureRate"`
	TimeToRestore             *summaryJSON `json:"timeToRestore"`
	Unrestored                int          `json:"unrestored"`
}

type summaryJSON struct {
	Count         int     `json:"count"`
	MedianSeconds float64 `json:"medianSeconds"`
	P90Seconds    float64 `json:"p90Seconds"`
}

// expectScript checks the figures of doratest.Script, worked out by hand.
func expectScript(g Gomega, f doraJSON, ns string) {
	g.Expect(f.Namespace).To(Equal(ns))
	g.Expect(f.Pipeline).To(Equal("web"))
	g.Expect(f.FirstEnvironment).To(Equal("dev"))
	g.Expect(f.Environment).To(Equal("production"))
	g.Expect(f.To.Sub(f.From)).To(Equal(30 * 24 * time.Hour))
	g.Expect(f.Deployments).To(Equal(2))
	g.Expect(f.DeploymentFrequencyPerDay).To(BeNumerically("~", 2.0/30, 1e-9))
	g.Expect(f.LeadTime).To(Equal(&summaryJSON{Count: 2, MedianSeconds: 90300, P90Seconds: 175200}))
	g.Expect(f.LeadTimeUnknown).To(BeZero())
	g.Expect(f.Changes).To(Equal(3))
	g.Expect(f.ChangeFailures).To(Equal(1))
	g.Expect(f.ChangeFailureRate).NotTo(BeNil())
	g.Expect(*f.ChangeFailureRate).To(BeNumerically("~", 1.0/3, 1e-9))
	g.Expect(f.TimeToRestore).To(Equal(&summaryJSON{Count: 1, MedianSeconds: 3300, P90Seconds: 3300}))
	g.Expect(f.Unrestored).To(BeZero())
}

// `tugboat status --dora` prints the figures of the scripted history,
// computed from what the hub's API server holds, in every format.
func TestStatusDORA_scriptedHistory(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	now := time.Now().UTC().Truncate(time.Second)
	g.Expect(doratest.Create(context.Background(), cluster.Client, doratest.Script(ns, "web", now))).To(Succeed())
	// A Pipeline with no history yet: nothing is known but that it
	// deployed nothing.
	g.Expect(cluster.Client.Create(context.Background(), doratest.Pipeline(ns, "api", doratest.E("dev", "dev-9"), doratest.E("production", "prod-9")))).To(Succeed())

	// One Pipeline, as JSON and as YAML.
	out, _, err := tugboat("status", "web", "--dora", "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var one doraJSON
	g.Expect(json.Unmarshal([]byte(out), &one)).To(Succeed(), out)
	expectScript(g, one, ns)

	out, _, err = tugboat("status", "web", "--dora", "-n", ns, "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var fromYAML doraJSON
	g.Expect(yaml.Unmarshal([]byte(out), &fromYAML)).To(Succeed(), out)
	expectScript(g, fromYAML, ns)

	// Every Pipeline of the namespace, sorted by name.
	out, _, err = tugboat("status", "--dora", "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var all struct {
		Pipelines []doraJSON `json:"pipelines"`
	}
	g.Expect(json.Unmarshal([]byte(out), &all)).To(Succeed(), out)
	g.Expect(all.Pipelines).To(HaveLen(2))
	g.Expect(all.Pipelines[0].Pipeline).To(Equal("api"))
	g.Expect(all.Pipelines[0].Deployments).To(BeZero())
	g.Expect(all.Pipelines[0].LeadTime).To(BeNil())
	g.Expect(all.Pipelines[0].ChangeFailureRate).To(BeNil(), "no change: the rate is unknown, not 0")
	g.Expect(out).NotTo(ContainSubstring(`"changeFailureRate": null`))
	expectScript(g, all.Pipelines[1], ns)

	// The table: one row per Pipeline; unknown figures print as "-".
	out, _, err = tugboat("status", "--dora", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).To(Equal([]string{
		"PIPELINE", "ENVIRONMENT", "WINDOW", "DEPLOYMENTS", "PER", "DAY", "LEAD", "TIME", "P50", "LEAD", "TIME", "P90", "CHANGE", "FAILURE", "RESTORE", "P50", "RESTORE", "P90",
	}))
	g.Expect(lineWith(out, "web")).To(Equal([]string{"web", "production", "30d", "2", "0.07", "1d1h5m", "2d40m", "33.3%", "55m", "55m"}), out)
	g.Expect(lineWith(out, "api")).To(Equal([]string{"api", "production", "30d", "0", "0.00", "-", "-", "-", "-", "-"}), out)

	// One Pipeline in detail.
	out, _, err = tugboat("status", "web", "--dora", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(HavePrefix("Pipeline " + ns + "/web: DORA figures of production over 30d, to "))
	g.Expect(out).To(MatchRegexp(`deployment frequency\s+0\.07/day\s+2 deployments\n`))
	g.Expect(out).To(MatchRegexp(`lead time\s+median 1d1h5m, p90 2d40m\s+2 deployments from dev\n`))
	g.Expect(out).To(MatchRegexp(`change-failure rate\s+33\.3%\s+1 failed of 3 changes\n`))
	g.Expect(out).To(MatchRegexp(`time to restore\s+median 55m, p90 55m\s+1 restored failure\n`))

	// A 10-day window leaves 1.0.0's deployment out.
	out, _, err = tugboat("status", "web", "--dora", "--dora-window", "240h", "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var short doraJSON
	g.Expect(json.Unmarshal([]byte(out), &short)).To(Succeed(), out)
	g.Expect(short.Deployments).To(Equal(1))
	g.Expect(short.LeadTime).To(Equal(&summaryJSON{Count: 1, MedianSeconds: 175200, P90Seconds: 175200}))
	g.Expect(short.Changes).To(Equal(2))
}

func TestStatusDORA_badInput(t *testing.T) {
	ns := newNamespace(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown pipeline", []string{"status", "nope", "--dora", "-n", ns}, "pipeline " + ns + "/nope not found"},
		{"zero window", []string{"status", "--dora", "--dora-window", "0s", "-n", ns}, "--dora-window must be positive, not 0s"},
		{"negative window", []string{"status", "--dora", "--dora-window", "-1h", "-n", ns}, "--dora-window must be positive, not -1h0m0s"},
		{"not a duration", []string{"status", "--dora", "--dora-window", "30d", "-n", ns}, `invalid argument "30d" for "--dora-window" flag`},
		{"window without --dora", []string{"status", "--dora-window", "1h", "-n", ns}, "--dora-window needs --dora"},
		{"unknown output", []string{"status", "--dora", "-o", "csv", "-n", ns}, `unknown output format "csv"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := tugboat(tt.args...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tt.want))
		})
	}

	// An empty namespace: no pipelines, said in words; an empty list in JSON.
	g := NewWithT(t)
	out, _, err := tugboat("status", "--dora", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("No pipelines in namespace " + ns + ".\n"))
	out, _, err = tugboat("status", "--dora", "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchJSON(`{"pipelines": []}`))
}
