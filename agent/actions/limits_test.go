package actions

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestLimits_chartSources(t *testing.T) {
	l := Limits{ChartSources: []string{"https://Charts.Example.com/stable/", "oci://ghcr.io/org/web"}}
	for _, tc := range []struct {
		repo, chart string
		ok          bool
	}{
		{"https://charts.example.com/stable", "web", true},
		{"https://charts.example.com/stable/", "web", true},
		{"HTTPS://CHARTS.EXAMPLE.COM/stable", "web", true},
		{"https://charts.example.com/stable/sub", "web", true},
		{"https://charts.example.com/stable-evil", "web", false},
		{"https://charts.example.com.evil.io/stable", "web", false},
		{"https://charts.example.com/stable/../private", "web", false},
		{"https://user:pass@charts.example.com/stable", "web", false},
		{"https://charts.example.com/stable?x=1", "web", false},
		{"http://charts.example.com/stable", "web", false},
		{"https://charts.example.com", "web", false},
		{"https://charts.example.com/stable", "../web", false},
		{"oci://ghcr.io/org", "web", true},
		{"oci://ghcr.io/org", "api", false},
		{"oci://ghcr.io/org/web", "web", true}, // under the prefix too
		{"file:///charts", "web", false},
	} {
		err := l.checkSource(tc.repo, tc.chart)
		if (err == nil) != tc.ok {
			t.Errorf("checkSource(%q, %q) = %v, want allowed=%v", tc.repo, tc.chart, err, tc.ok)
		}
	}
	g := NewWithT(t)
	g.Expect(Limits{ChartSources: []string{Any}}.checkSource("https://anywhere.example", "web")).To(Succeed())
	g.Expect(Limits{}.checkSource("https://anywhere.example", "web")).To(MatchError(ContainSubstring("is not allowed")))
}

func TestLimits_namespacesAndVersions(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Limits{}.checkNamespace("apps")).To(MatchError("namespace apps is not in --actions-allowed-namespaces"))
	g.Expect(Limits{Namespaces: []string{"web", "apps"}}.checkNamespace("apps")).To(Succeed())
	g.Expect(Limits{Namespaces: []string{Any}}.checkNamespace("apps")).To(Succeed())

	g.Expect(Limits{}.checkVersion("1.2.0", "1.0.0")).To(MatchError(ContainSubstring("1.0.0 is a downgrade from 1.2.0 and downgrades are not allowed")))
	g.Expect(Limits{}.checkVersion("1.2.0", "1.2.1")).To(Succeed())
	g.Expect(Limits{}.checkVersion("1.2.0", "1.2.0-rc.1")).To(HaveOccurred())
	g.Expect(Limits{}.checkVersion("", "1.0.0")).To(Succeed())
	g.Expect(Limits{AllowDowngrades: true}.checkVersion("1.2.0", "1.0.0")).To(Succeed())
}

func TestOptions_validate(t *testing.T) {
	g := NewWithT(t)
	o := NewOptions()
	g.Expect(o.Validate()).To(Succeed(), "the defaults are valid (and refuse everything)")
	o.Limits.Namespaces = []string{"Not_A_Namespace"}
	o.Limits.ChartSources = []string{"ftp://charts"}
	o.CredentialsSecret = "no-slash"
	err := o.Validate()
	g.Expect(err).To(MatchError(ContainSubstring("Not_A_Namespace")))
	g.Expect(err).To(MatchError(ContainSubstring("ftp")))
	g.Expect(err).To(MatchError(ContainSubstring("--actions-credentials-secret")))
	for _, bad := range []int{-1, 1} {
		o := NewOptions()
		o.HistoryMax = bad
		g.Expect(o.Validate()).To(MatchError(ContainSubstring("--actions-history-max must be 0 (unlimited) or at least 2")), "history max %d", bad)
	}
	g.Expect(NewOptions().HistoryMax).To(Equal(10), "helm's own default")
	g.Expect(NewOptions().pendingGrace()).To(Equal(DefaultUpgradeTimeout + pendingGraceMargin))
}
