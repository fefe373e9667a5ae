package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/e2e/chaos"
	"tugboat.dev/tugboat/e2e/harness"
)

// envChaosScenarios, when set, runs only the named scenarios (comma-
// separated), e.g. CHAOS_SCENARIOS=network,clock.
const envChaosScenarios = "CHAOS_SCENARIOS"

// promoteBound bounds the wait for one promotion once its faults are over:
// generous, for a loaded 2-core machine.
const promoteBound = 4 * time.Minute

// chaosScenario injects one kind of fault into a stream of releases.
type chaosScenario struct {
	name string
	run  func(g Gomega, e *chaosEnv, r *rand.Rand, name string) chaosRun
}

// chaosRun is what a scenario did: the versions it released in dev, those
// of them to be promoted (all but a version superseded in dev while the
// hub could not see it: the pipeline promotes what dev runs), and its
// faults.
type chaosRun struct {
	released, expected []string
	faults             string
}

// TestChaos runs real releases (the helm CLI in dev, promoted to staging
// by the staging agent through the helm strategy) while faults are
// injected: the hub is SIGKILLed, the hub's kube-apiserver is crashed and
// its etcd paused, agents are killed and the spokes' API servers crashed,
// the agent-hub link is dropped, delayed and cut (40 s, 5 min and 20 min of
// protocol time, scaled), and the hub's clock is skewed within and past the
// replay window. Each scenario then compares the Helm revisions on the
// spokes (their Helm storage) with the hub's ReleaseHistories, and the
// versions released with the Promotions, and fails on anything lost or
// counted twice. CHAOS_SEED reproduces a run's schedule; CHAOS_SCALE and
// CHAOS_TIME_SCALE lengthen it (make chaos). See docs/reliability.md.
func TestChaos(t *testing.T) {
	cfg, err := chaos.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if 6*cfg.Scale > 18 {
		t.Fatalf("%s=%d: at most 3 (a scenario's releases must fit the 20 revisions a ReleaseHistory keeps)", chaos.EnvScale, cfg.Scale)
	}
	t.Logf("chaos run: %s (load average %s); reproduce with: %s go test -count=1 -run TestChaos ./e2e/", cfg, loadAverage(), cfg)
	scenarios := []chaosScenario{
		{"hub-kill", chaosHubKill},
		{"hub-control-plane", chaosHubControlPlane},
		{"agent-and-spoke", chaosAgentAndSpoke},
		{"network", chaosNetwork},
		{"clock", chaosClock}, // last: it replaces the hub process with an in-process hub
	}
	if only := os.Getenv(envChaosScenarios); only != "" {
		var picked []chaosScenario
		for _, sc := range scenarios {
			if strings.Contains(","+only+",", ","+sc.name+",") {
				picked = append(picked, sc)
			}
		}
		scenarios = picked
	}
	g := NewWithT(t)
	began := time.Now()
	e := newChaosEnv(t, cfg, chaosVersions(6*cfg.Scale))
	t.Logf("fleet up in %s", time.Since(began).Round(time.Second))
	var rows []string
	defer func() { t.Logf("chaos figures (%s):\n%s\n%s", cfg, figuresHeader, strings.Join(rows, "\n")) }()
	for _, sc := range scenarios {
		start := time.Now()
		e.setup(g, sc.name)
		run := sc.run(g, e, cfg.Rand(sc.name), sc.name)
		fig := e.settle(g, sc.name, run, 3*time.Minute)
		fig.Faults, fig.Took = run.faults, time.Since(start)
		rows = append(rows, fig.row())
	}
	t.Logf("chaos suite took %s (load average %s)", time.Since(began).Round(time.Second), loadAverage())
}

// chaosHubKill kills the hub process (SIGKILL) 2·scale times, each at a
// random point 0–6 s after a release (while the hub records it, decides or
// runs its promotion), and starts it again after 0–3 s.
func chaosHubKill(g Gomega, e *chaosEnv, r *rand.Rand, name string) chaosRun {
	kills := 2 * e.cfg.Scale
	var released []string
	for i := 1; i <= kills+1; i++ {
		v := versionN(i)
		e.release(g, "dev", name, v)
		released = append(released, v)
		if i <= kills {
			e.inject(r, 0, 6*time.Second, "hub SIGKILL", func() { e.killHub(g) })
			<-after(chaos.Between(r, 0, 3*time.Second)) // the hub stays down
			e.startHub()
		}
		e.waitPromoted(g, name, v, promoteBound)
	}
	return chaosRun{released: released, expected: released, faults: fmt.Sprintf("%d× hub SIGKILL", kills)}
}

// chaosHubControlPlane crashes the hub's kube-apiserver (SIGKILL, then a
// restart) 0–3 s after a release, while the hub writes its history, and
// pauses the hub's etcd (SIGSTOP) for 2–8 s, in turn.
func chaosHubControlPlane(g Gomega, e *chaosEnv, r *rand.Rand, name string) chaosRun {
	hub := e.f.hub
	var released []string
	restarts, pauses := 0, 0
	for i := 1; i <= 2*e.cfg.Scale; i++ {
		v := versionN(i)
		e.release(g, "dev", name, v)
		released = append(released, v)
		if i%2 == 1 {
			e.inject(r, 0, 3*time.Second, "hub kube-apiserver SIGKILL and restart", func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				g.Expect(hub.Restart(ctx, harness.ProcessKubeAPIServer, 0)).To(Succeed())
			})
			restarts++
		} else {
			e.inject(r, 0, 3*time.Second, "hub etcd paused, then resumed", func() {
				g.Expect(hub.Pause(harness.ProcessEtcd)).To(Succeed())
				<-after(chaos.Between(r, 2*time.Second, 8*time.Second)) // etcd stays paused
				g.Expect(hub.Resume(harness.ProcessEtcd)).To(Succeed())
			})
			pauses++
		}
		e.waitPromoted(g, name, v, promoteBound)
	}
	return chaosRun{released: released, expected: released, faults: fmt.Sprintf("%d× hub kube-apiserver crash, %d× hub etcd pause", restarts, pauses)}
}

// chaosAgentAndSpoke kills an agent (SIGKILL to its process group) and
// starts it again after 0–3 s, and crashes a spoke's kube-apiserver: in
// dev just after a release, in staging during the promotion.
func chaosAgentAndSpoke(g Gomega, e *chaosEnv, r *rand.Rand, name string) chaosRun {
	var released []string
	var faults []string
	for i := 1; i <= 4*e.cfg.Scale; i++ {
		v := versionN(i)
		e.release(g, "dev", name, v)
		released = append(released, v)
		spoke := chaosSpokes[(i-1)%2] // dev, staging, dev, staging, ...
		lo, hi := time.Duration(0), 3*time.Second
		if spoke == "staging" {
			lo, hi = time.Second, 6*time.Second // while staging applies the promotion
		}
		if (i-1)%4 < 2 {
			e.inject(r, lo, hi, spoke+" agent SIGKILL", func() { e.killAgent(g, spoke) })
			<-after(chaos.Between(r, 0, 3*time.Second)) // the agent stays down
			e.startAgent(spoke)
			faults = append(faults, spoke+" agent SIGKILL")
		} else {
			e.inject(r, lo, hi, spoke+" kube-apiserver SIGKILL and restart", func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				g.Expect(e.spokes[spoke].Restart(ctx, harness.ProcessKubeAPIServer, 0)).To(Succeed())
			})
			faults = append(faults, spoke+" kube-apiserver crash")
		}
		e.waitPromoted(g, name, v, promoteBound)
	}
	return chaosRun{released: released, expected: released, faults: strings.Join(compact(faults), ", ")}
}

// chaosNetwork puts faults on both agents' links to the hub: every
// connection dropped several times, a delay of 1–2.5 s on every chunk
// either way, and the link cut for 40 s, 5 min and 20 min of protocol time
// (scaled by CHAOS_TIME_SCALE) with releases made during each cut.
func chaosNetwork(g Gomega, e *chaosEnv, r *rand.Rand, name string) chaosRun {
	var released, expected []string
	next := func() string {
		v := versionN(len(released) + 1)
		e.release(g, "dev", name, v)
		released = append(released, v)
		return v
	}
	drops := 0
	var delays []string
	for range e.cfg.Scale {
		v := next()
		expected = append(expected, v)
		for range 3 {
			e.inject(r, 0, 2*time.Second, "connections dropped", func() {
				for _, p := range e.proxies {
					drops += p.Drop()
				}
			})
		}
		e.waitPromoted(g, name, v, promoteBound)

		d := chaos.Between(r, time.Second, 2500*time.Millisecond)
		delays = append(delays, d.Round(100*time.Millisecond).String())
		for _, p := range e.proxies {
			p.SetDelay(d)
		}
		v = next()
		expected = append(expected, v)
		e.waitPromoted(g, name, v, promoteBound)
		for _, p := range e.proxies {
			p.SetDelay(0)
		}
	}
	var cuts []string
	for _, c := range []struct {
		protocol time.Duration
		releases int
	}{{40 * time.Second, 1}, {5 * time.Minute, 1}, {20 * time.Minute, 2}} {
		outage := e.cfg.Protocol(c.protocol, 2*time.Second)
		cuts = append(cuts, fmt.Sprintf("%s (%s)", c.protocol, outage))
		before := e.recordedRevision(g, "dev", name)
		for _, p := range e.proxies {
			p.Cut()
		}
		var v string
		for range c.releases {
			v = next()
		}
		expected = append(expected, v) // the last: dev runs it when the link is back
		<-after(outage)                // the outage lasts
		g.Expect(e.recordedRevision(g, "dev", name)).To(Equal(before), "nothing reaches the hub while the link is cut")
		for _, p := range e.proxies {
			p.Restore()
		}
		e.waitPromoted(g, name, v, promoteBound)
	}
	return chaosRun{released: released, expected: expected, faults: fmt.Sprintf("%d connections dropped, delays %s, cuts %s", drops, strings.Join(delays, " "), strings.Join(cuts, ", "))}
}

// recordedRevision is the current revision the hub records for a release
// on a spoke (0 when none).
func (e *chaosEnv) recordedRevision(g Gomega, spoke, name string) int32 {
	if rh := e.f.history(g, spoke, "apps", name); rh != nil && rh.Status.Current != nil {
		return rh.Status.Current.Revision
	}
	return 0
}

// chaosClock runs the hub in-process with a skewed clock (the receiver's
// Clock option): ±4m50s, within the ±5 min replay window, must work; ±6
// min is refused (401, stale_timestamp) and nothing is recorded, and once
// the skew is removed everything arrives.
func chaosClock(g Gomega, e *chaosEnv, r *rand.Rand, name string) chaosRun {
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	reg := prometheus.NewRegistry()
	e.startInProcessHub(g, clock, reg)
	hold := e.cfg.Protocol(chaosStateInterval, time.Second) * 5
	var released, skews []string
	for range e.cfg.Scale {
		within := 4*time.Minute + 50*time.Second
		past := 6 * time.Minute
		order := []time.Duration{within, -within, past, -past}
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, s := range order {
			skews = append(skews, s.String())
			before := e.recordedRevision(g, "dev", name)
			refused := staleRejections(g, reg)
			skew.Store(int64(s))
			v := versionN(len(released) + 1)
			e.release(g, "dev", name, v)
			released = append(released, v)
			if s == within || s == -within {
				e.waitPromoted(g, name, v, promoteBound)
				continue
			}
			g.Eventually(func() float64 { return staleRejections(g, reg) }).WithTimeout(time.Minute).
				Should(BeNumerically(">", refused), "requests refused with 401 stale_timestamp")
			g.Consistently(func() int32 { return e.recordedRevision(g, "dev", name) }).WithTimeout(hold).WithPolling(200*time.Millisecond).
				Should(Equal(before), "nothing is recorded while the hub's clock is %s off", s)
			skew.Store(0)
			e.waitPromoted(g, name, v, promoteBound)
		}
	}
	return chaosRun{released: released, expected: released, faults: fmt.Sprintf("hub clock skewed %s (in turn)", strings.Join(skews, ", "))}
}

// staleRejections is how many requests the in-process hub's receiver
// refused for a stale timestamp.
func staleRejections(g Gomega, reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "tugboat_receiver_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == wire.ErrStaleTimestamp.Error() {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// compact counts repeated descriptions: "a, a, b" → "2× a, 1× b".
func compact(items []string) []string {
	counts := map[string]int{}
	var order []string
	for _, it := range items {
		if counts[it] == 0 {
			order = append(order, it)
		}
		counts[it]++
	}
	out := make([]string, 0, len(order))
	for _, it := range order {
		out = append(out, fmt.Sprintf("%d× %s", counts[it], it))
	}
	return out
}
