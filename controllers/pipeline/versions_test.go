package pipeline

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/chartversion"
)

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1.0.0", "1.0.0", 0},
		{"1.0.1", "1.0.0", 1},
		{"1.10.0", "1.9.0", 1}, // numeric, not lexical
		{"2.0.0", "10.0.0", -1},
		{"1.0.0-rc.1", "1.0.0", -1}, // a prerelease precedes its release
		{"1.0.0-rc.2", "1.0.0-rc.1", 1},
		{"1.0.0-rc.10", "1.0.0-rc.9", 1},
		{"1.0.0-alpha", "1.0.0-beta", -1},
		{"1.0.0+build.2", "1.0.0+build.1", 0}, // build metadata has no precedence
		{"v1.2.0", "1.1.0", 1},
		{"1.2", "1.1.9", 1},
		// Not semver: string order.
		{"release-b", "release-a", 1},
		{"latest", "latest", 0},
		{"1.0.0", "stable", -1},
	} {
		if got := chartversion.Compare(tc.a, tc.b); sign(got) != tc.want {
			t.Errorf("chartversion.Compare(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := chartversion.Compare(tc.b, tc.a); sign(got) != -tc.want {
			t.Errorf("chartversion.Compare(%q, %q) = %d, want %d (antisymmetry)", tc.b, tc.a, got, -tc.want)
		}
	}
}

func sign(n int) int {
	switch {
	case n > 0:
		return 1
	case n < 0:
		return -1
	}
	return 0
}

func TestSortVersions_newestFirst(t *testing.T) {
	g := NewWithT(t)
	vs := []string{"1.9.0", "1.10.0", "1.10.0-rc.1", "0.1.0", "2.0.0-alpha", "1.10.0-rc.2"}
	sortVersions(vs)
	g.Expect(vs).To(Equal([]string{"2.0.0-alpha", "1.10.0", "1.10.0-rc.2", "1.10.0-rc.1", "1.9.0", "0.1.0"}))

	other := []string{"b", "c", "a"}
	sortVersions(other)
	g.Expect(other).To(Equal([]string{"c", "b", "a"}), "non-semver versions fall back to string order")
}

func envStatus(versions ...string) tugboatv1alpha1.EnvironmentStatus {
	es := tugboatv1alpha1.EnvironmentStatus{Name: "production"}
	for i, v := range versions {
		es.Targets = append(es.Targets, tugboatv1alpha1.TargetStatus{Spoke: "s", Namespace: "apps", Release: "web", Revision: int32(i + 1), Version: v})
	}
	return es
}

func TestUpToDate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dst     tugboatv1alpha1.EnvironmentStatus
		version string
		want    bool
	}{
		{"every target runs the version", envStatus("1.4.0", "1.4.0"), "1.4.0", true},
		{"one target lags", envStatus("1.4.0", "1.3.0"), "1.4.0", false},
		{"every target older", envStatus("1.3.0"), "1.4.0", false},
		{"never downgrade: a target runs newer", envStatus("1.5.0"), "1.4.0", true},
		{"never downgrade: one target newer, one older", envStatus("1.3.0", "1.5.0"), "1.4.0", true},
		{"never downgrade a release to its prerelease", envStatus("1.4.0"), "1.4.0-rc.1", true},
		{"a prerelease is upgraded to its release", envStatus("1.4.0-rc.1"), "1.4.0", false},
		{"a target that has not reported", envStatus("", "1.4.0"), "1.4.0", false},
		{"no targets", envStatus(), "1.4.0", false},
	} {
		if got := upToDate(tc.dst.Targets, tc.version); got != tc.want {
			t.Errorf("%s: upToDate(%v, %q) = %v, want %v", tc.name, tc.dst.Targets, tc.version, got, tc.want)
		}
	}
}

func history(revs ...tugboatv1alpha1.RevisionSummary) *tugboatv1alpha1.ReleaseHistory {
	rh := &tugboatv1alpha1.ReleaseHistory{}
	for i := len(revs) - 1; i >= 0; i-- { // newest first, as the recorder keeps them
		rh.Status.Revisions = append(rh.Status.Revisions, tugboatv1alpha1.Revision{RevisionSummary: revs[i]})
	}
	if len(revs) > 0 {
		cur := revs[len(revs)-1]
		rh.Status.Current = &cur
	}
	return rh
}

func rev(n int32, version string, status tugboatv1alpha1.ReleaseStatus, deployed time.Time) tugboatv1alpha1.RevisionSummary {
	return tugboatv1alpha1.RevisionSummary{
		Revision: n, Chart: "web", ChartVersion: version, Status: status,
		Health: tugboatv1alpha1.HealthCurrent, LastDeployed: &metav1.Time{Time: deployed},
	}
}

func TestRollbackOf(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	rollbackAt := func(rh *tugboatv1alpha1.ReleaseHistory) *tugboatv1alpha1.HeldEnvironment { return rollbackOf(rh, t0) }
	dep, sup, failed := tugboatv1alpha1.ReleaseStatusDeployed, tugboatv1alpha1.ReleaseStatusSuperseded, tugboatv1alpha1.ReleaseStatusFailed

	g.Expect(rollbackAt(history())).To(BeNil(), "nothing reported")
	g.Expect(rollbackAt(history(rev(1, "1.0.0", dep, t0)))).To(BeNil(), "a first install")
	g.Expect(rollbackAt(history(rev(1, "1.0.0", sup, t0), rev(2, "1.1.0", dep, t0)))).To(BeNil(), "an upgrade")
	g.Expect(rollbackAt(history(rev(1, "1.0.0", sup, t0), rev(2, "1.0.0", dep, t0)))).To(BeNil(), "a redeploy of the same version")
	g.Expect(rollbackAt(history(rev(1, "1.0.0-rc.1", sup, t0), rev(2, "1.0.0", dep, t0)))).To(BeNil(), "a prerelease to its release is an upgrade")

	// helm rollback: revision 3 runs 1.0.0 again after 1.1.0.
	hold := rollbackAt(history(rev(1, "1.0.0", sup, t0), rev(2, "1.1.0", sup, t0.Add(time.Minute)), rev(3, "1.0.0", dep, t0.Add(2*time.Minute))))
	g.Expect(hold).NotTo(BeNil())
	g.Expect(hold.Version).To(Equal("1.0.0"))
	g.Expect(hold.Since.Time).To(Equal(t0.Add(2 * time.Minute)))
	g.Expect(hold.Message).To(Equal("rolled back from 1.1.0 (revision 2) to 1.0.0 (revision 3)"))

	// A rollback after a failed upgrade is a rollback too.
	g.Expect(rollbackAt(history(rev(1, "1.0.0", sup, t0), rev(2, "1.1.0", failed, t0), rev(3, "1.0.0", dep, t0)))).NotTo(BeNil())
	// Semver, not string order: 1.10.0 → 1.9.0 is a rollback, 1.9.0 → 1.10.0 is not.
	g.Expect(rollbackAt(history(rev(1, "1.10.0", sup, t0), rev(2, "1.9.0", dep, t0)))).NotTo(BeNil())
	g.Expect(rollbackAt(history(rev(1, "1.9.0", sup, t0), rev(2, "1.10.0", dep, t0)))).To(BeNil())

	// A rollback in progress (not deployed yet) holds nothing yet.
	g.Expect(rollbackAt(history(rev(1, "1.0.0", sup, t0), rev(2, "1.1.0", sup, t0), rev(3, "1.0.0", tugboatv1alpha1.ReleaseStatusPendingRollback, t0)))).To(BeNil())

	// The newest revision is not the current one (an uninstall, or a stale
	// list): no hold.
	rh := history(rev(1, "1.1.0", sup, t0), rev(2, "1.0.0", dep, t0))
	rh.Status.Current = &tugboatv1alpha1.RevisionSummary{Revision: 1, ChartVersion: "1.1.0", Status: dep}
	g.Expect(rollbackAt(rh)).To(BeNil())
}
