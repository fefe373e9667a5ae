package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
)

// figures are one scenario's counts. Releases is what the scenario did;
// everything else is read back: Helm revisions from the spokes' Helm
// storage, recorded revisions, events and Promotions from the hub's API.
type figures struct {
	Scenario string
	Faults   string
	Took     time.Duration
	// Releases is how many helm CLI upgrades the scenario made in dev.
	Releases int
	// Revisions is how many Helm revisions the spokes' storage holds for
	// the scenario's release (dev and staging).
	Revisions int
	// Recorded is how many of them the hub's ReleaseHistories hold with
	// the same chart version and status and the event of that status.
	Recorded int
	// PromotionsExpected is one per version to be promoted (each version
	// released in dev, but one superseded there during an outage);
	// PromotionsMade counts the Succeeded Promotions to staging of those
	// versions that staging's Helm storage shows applied.
	PromotionsExpected, PromotionsMade int
	// Duplicates and Lost say what was counted twice or is missing.
	Duplicates, Lost []string
	// Replaced is how many pending revisions restarted agents replaced
	// (a second real start of the revision, not a duplicate).
	Replaced int32
}

func (f figures) row() string {
	return fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %s |", f.Scenario, f.Faults, f.Releases, f.Revisions, f.Recorded,
		f.PromotionsExpected, f.PromotionsMade, len(f.Duplicates), len(f.Lost), f.Took.Round(time.Second))
}

const figuresHeader = "| scenario | faults | releases | Helm revisions | recorded | promotions expected | made | duplicates | lost | took |\n" +
	"|---|---|---|---|---|---|---|---|---|---|"

// statusReasons is the reason of the event the agent sends when a revision
// reaches each Helm status (agent/tracker statusEventLocked).
var statusReasons = map[release.Status]string{
	release.StatusPendingInstall: "InstallStarted", release.StatusPendingUpgrade: "UpgradeStarted",
	release.StatusPendingRollback: "RollbackStarted", release.StatusDeployed: "Deployed", release.StatusFailed: "Failed",
	release.StatusSuperseded: "Superseded", release.StatusUninstalling: "Uninstalling", release.StatusUninstalled: "Uninstalled",
}

// isStatusReason reports whether reason is that of a release status event.
func isStatusReason(reason string) bool {
	for _, r := range statusReasons {
		if r == reason {
			return true
		}
	}
	return false
}

// count compares, for a scenario's release, the Helm revisions on each
// spoke with the hub's ReleaseHistory, and the versions released in dev
// with the Promotions and staging's revisions.
func (e *chaosEnv) count(g Gomega, name string, run chaosRun) figures {
	fig := figures{Scenario: name, Releases: len(run.released), PromotionsExpected: len(run.expected)}
	for _, spoke := range chaosSpokes {
		revs := e.storage(g, spoke, name)
		fig.Revisions += len(revs)
		rh := e.f.history(g, spoke, "apps", name)
		if rh == nil {
			fig.Lost = append(fig.Lost, fmt.Sprintf("%s: no ReleaseHistory", spoke))
			continue
		}
		seen := map[int32]int{}
		replaced := e.replacedPending(g, spoke)
		for _, n := range replaced {
			fig.Replaced += n
		}
		for _, r := range rh.Status.Revisions {
			seen[r.Revision]++
			if seen[r.Revision] == 2 {
				fig.Duplicates = append(fig.Duplicates, fmt.Sprintf("%s: revision %d recorded twice", spoke, r.Revision))
			}
			fig.Duplicates = append(fig.Duplicates, duplicateEvents(spoke, &r, replaced[r.Revision])...)
		}
		for _, hr := range revs {
			if msg := recordedAs(rh, hr); msg != "" {
				fig.Lost = append(fig.Lost, fmt.Sprintf("%s: revision %d (%s %s): %s", spoke, hr.Version, hr.Chart.Metadata.Version, hr.Info.Status, msg))
				continue
			}
			fig.Recorded++
		}
		if last := latest(revs); last != nil && rh.Status.Current != nil && rh.Status.Current.Revision != int32(last.Version) {
			fig.Lost = append(fig.Lost, fmt.Sprintf("%s: current is revision %d, Helm's is %d", spoke, rh.Status.Current.Revision, last.Version))
		}
	}

	// Promotions: one per released version, Succeeded, applied once.
	var list tugboatv1alpha1.PromotionList
	g.Expect(e.f.hub.Client.List(context.Background(), &list, client.InNamespace(e.f.ns),
		client.MatchingLabels{pipeline.LabelPipeline: name})).To(Succeed())
	byVersion := map[string][]tugboatv1alpha1.Promotion{}
	for _, pr := range list.Items {
		byVersion[pr.Spec.Version] = append(byVersion[pr.Spec.Version], pr)
	}
	applied := map[string]int{}
	for _, hr := range e.storage(g, "staging", name) {
		applied[hr.Chart.Metadata.Version]++
	}
	for v, prs := range byVersion {
		if len(prs) > 1 {
			fig.Duplicates = append(fig.Duplicates, fmt.Sprintf("%d Promotions of %s", len(prs), v))
		}
		if !slices.Contains(run.released, v) {
			fig.Duplicates = append(fig.Duplicates, fmt.Sprintf("a Promotion of %s, never released in dev", v))
		}
	}
	for _, v := range run.expected {
		switch prs := byVersion[v]; {
		case len(prs) == 0:
			fig.Lost = append(fig.Lost, fmt.Sprintf("no Promotion of %s", v))
		case applied[v] == 0:
			fig.Lost = append(fig.Lost, fmt.Sprintf("%s not applied on staging (Promotion %s)", v, prs[0].Status.Phase))
		case applied[v] > 1:
			fig.Duplicates = append(fig.Duplicates, fmt.Sprintf("%s applied %d times on staging", v, applied[v]))
		case prs[0].Status.Phase != tugboatv1alpha1.PromotionSucceeded:
			fig.Lost = append(fig.Lost, fmt.Sprintf("Promotion of %s is %s", v, prs[0].Status.Phase))
		default:
			fig.PromotionsMade++
		}
	}
	slices.Sort(fig.Duplicates)
	slices.Sort(fig.Lost)
	return fig
}

// recordedAs says how the hub's history differs from a Helm revision, or
// "" when it holds it: the same chart version and status, and the event of
// that status.
func recordedAs(rh *tugboatv1alpha1.ReleaseHistory, hr *release.Release) string {
	r := revisionOf(rh, int32(hr.Version))
	if r == nil {
		return "not recorded"
	}
	if r.ChartVersion != hr.Chart.Metadata.Version {
		return "recorded at chart version " + r.ChartVersion
	}
	if string(r.Status) != hr.Info.Status.String() {
		return "recorded as " + string(r.Status)
	}
	if eventWith(r, statusReasons[hr.Info.Status]) == nil {
		return fmt.Sprintf("no %s event among %v", statusReasons[hr.Info.Status], reasons(r))
	}
	return ""
}

// duplicateEvents lists the events of a recorded revision that were counted
// twice: an id held by two entries, or a status the revision reached once
// counted more than once. A revision whose pending attempt was replaced
// replaced times really started 1+replaced times.
func duplicateEvents(spoke string, r *tugboatv1alpha1.Revision, replaced int32) []string {
	var out []string
	ids := map[string]bool{}
	statuses := map[string]int32{}
	for _, ev := range r.Events {
		if ids[ev.ID] {
			out = append(out, fmt.Sprintf("%s: revision %d: event %s (%s) twice", spoke, r.Revision, ev.ID, ev.Reason))
		}
		ids[ev.ID] = true
		if ev.Object == nil && isStatusReason(ev.Reason) {
			statuses[ev.Reason] += max(ev.Count, 1)
		}
	}
	for reason, n := range statuses {
		allowed := int32(1)
		if strings.HasSuffix(reason, "Started") {
			allowed += replaced
		}
		if n > allowed {
			out = append(out, fmt.Sprintf("%s: revision %d: %s counted %d times", spoke, r.Revision, reason, n))
		}
	}
	return out
}

func latest(revs []*release.Release) *release.Release {
	var last *release.Release
	for _, r := range revs {
		if last == nil || r.Version > last.Version {
			last = r
		}
	}
	return last
}

// settle waits until a scenario's counts show nothing lost (the hub may
// still be catching up after the last fault), then returns them; the test
// fails, and goes on with the next scenario, on anything lost or
// duplicated.
func (e *chaosEnv) settle(g Gomega, name string, run chaosRun, bound time.Duration) figures {
	var fig figures
	// A Gomega that does not fail the test: past the bound, what is still
	// missing is reported below, item by item.
	soft := NewGomega(func(string, ...int) {})
	soft.Eventually(func(g Gomega) {
		fig = e.count(g, name, run)
		g.Expect(fig.Lost).To(BeEmpty())
	}).WithTimeout(bound).WithPolling(time.Second).Should(Succeed())
	fig = e.count(g, name, run)
	e.t.Logf("%s: %d releases, %d Helm revisions, %d recorded, promotions %d expected, %d made; duplicates %d, lost %d; pending revisions replaced by a restarted agent: %d",
		name, fig.Releases, fig.Revisions, fig.Recorded, fig.PromotionsExpected, fig.PromotionsMade, len(fig.Duplicates), len(fig.Lost), fig.Replaced)
	for _, d := range fig.Duplicates {
		e.t.Errorf("%s: duplicate: %s", name, d)
	}
	for _, l := range fig.Lost {
		e.t.Errorf("%s: lost: %s", name, l)
	}
	return fig
}
