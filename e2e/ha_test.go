package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
	"tugboat.dev/tugboat/cmd/tugboat/app/hub/hubtest"
	"tugboat.dev/tugboat/e2e/chaos"
	"tugboat.dev/tugboat/e2e/harness"
	"tugboat.dev/tugboat/e2e/identity"
)

// These tests run the hub as it is deployed with replicas > 1: every
// replica serves the receiver and records ReleaseHistories, and one
// replica, elected on a Lease, runs the controllers (docs/scaling.md).

// Lease timings of the tests' hubs: short, so that a killed leader is
// replaced within seconds, and loose enough that a loaded machine does
// not make a leader miss its renewals.
const (
	haLeaseDuration = 8 * time.Second
	haRenewDeadline = 6 * time.Second
	haRetryPeriod   = time.Second
)

// haLeaseName is the hub's Lease (cmd/tugboat/app/hub LeaderElectionID).
const haLeaseName = "tugboat-hub.tugboat.dev"

// hubReleaseNamespace is the namespace installHubChart installs the hub
// chart into: the hub's Lease lives there, the only namespace where the
// chart's RBAC lets the hub hold one (Role tugboat-hub-leader-election).
const hubReleaseNamespace = "tugboat-system"

// haOptions are an in-process hub replica's options: leader election on,
// its Lease in namespace.
func haOptions(namespace string) hub.Options {
	opts := hubtest.Options()
	opts.LeaderElection = true
	opts.LeaderElectionNamespace = namespace
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = haLeaseDuration, haRenewDeadline, haRetryPeriod
	return opts
}

// elected reports whether h's manager won the election.
func elected(h *hub.Hub) bool {
	select {
	case <-h.Manager.Elected():
		return true
	default:
		return false
	}
}

// readyz is the status code of the receiver's /readyz at addr (0 when it
// does not answer).
func readyz(addr string) int {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// postTo sends body to the receiver at addr, signed with key now, and
// returns its answer.
func postTo(g Gomega, addr, path string, key, body []byte) reply {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	wire.SignRequest(req, key, body, time.Now())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return reply{code: resp.StatusCode, body: raw}
}

// installBatch is what an agent sends for the install of release web at
// revision 1 on spoke: started, the objects created, deployed, healthy.
func installBatch(t *testing.T, spoke string, at time.Time) ([]byte, int) {
	const ns, rel = "apps", "web"
	events := []wire.Event{
		stateEvent(spoke, wire.EventReleaseStarted, "InstallStarted", releaseState(ns, rel, "1.0.0", 1, wire.StatusPendingInstall, wire.HealthInProgress), at, 1),
		objectEvent(spoke, ns, rel, 1, wire.EventObjectCreated, "Created", wire.ObjectRef{Kind: "Deployment", Namespace: ns, Name: rel, UID: "uid-deploy"}, at.Add(100*time.Millisecond), 2),
		objectEvent(spoke, ns, rel, 1, wire.EventObjectCreated, "Created", wire.ObjectRef{Kind: "Pod", Namespace: ns, Name: rel + "-7d9f-x", UID: "uid-pod"}, at.Add(200*time.Millisecond), 3),
		stateEvent(spoke, wire.EventReleaseStatus, "Deployed", releaseState(ns, rel, "1.0.0", 1, wire.StatusDeployed, wire.HealthInProgress), at.Add(time.Second), 4),
		stateEvent(spoke, wire.EventHealthChanged, "RolloutComplete", releaseState(ns, rel, "1.0.0", 1, wire.StatusDeployed, wire.HealthCurrent), at.Add(3*time.Second), 5),
	}
	return batchBody(t, spoke, events...), len(events)
}

// recorded is a ReleaseHistory's record without what names the spoke (the
// event ids, which hash it): two spokes sent the same events compare equal.
func recorded(rh *tugboatv1alpha1.ReleaseHistory) (*tugboatv1alpha1.RevisionSummary, []tugboatv1alpha1.Revision) {
	revs := make([]tugboatv1alpha1.Revision, len(rh.Status.Revisions))
	for i := range rh.Status.Revisions {
		r := *rh.Status.Revisions[i].DeepCopy()
		for j := range r.Events {
			r.Events[j].ID = ""
		}
		revs[i] = r
	}
	return rh.Status.Current, revs
}

// TestHA_replicasReceiveActiveActiveAndRecordARedeliveryOnce runs two hub
// replicas in-process against one real hub control plane, each with its own
// leader election identity, as the chart deploys them. Both receivers are
// Ready while only one replica leads (readiness does not wait for
// leadership). The same event batch posted to both replicas at once, three
// times each, leaves the ReleaseHistory identical to that of a spoke whose
// batch was delivered once: the ReleaseHistory is the source of truth for
// de-duplication, not a replica's memory. A late event of an older
// revision sent to the replica that did not see the newer one does not move
// the release back. A leader that stops hands the Lease over, and the other
// replica then runs the controllers.
func TestHA_replicasReceiveActiveActiveAndRecordARedeliveryOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubCluster := startHubCluster(t)
	f := &fleet{t: t, hub: hubCluster, ns: "ha"}
	g.Expect(hubCluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})).To(Succeed())
	installHubChart(t, hubCluster, f.ns)

	var replicas []*hub.Hub
	var addrs []string
	var stops []func()
	for range 2 {
		opts := haOptions(hubReleaseNamespace)
		opts.Receiver.BindAddress = freeAddr(t)
		h, stop := hubtest.Start(t, identity.HubConfig(hubCluster.RESTConfig), opts)
		replicas, addrs, stops = append(replicas, h), append(addrs, opts.Receiver.BindAddress), append(stops, stop)
	}
	// Both serve; exactly one leads, and the other is Ready all the same.
	g.Eventually(func(g Gomega) {
		g.Expect(readyz(addrs[0])).To(Equal(http.StatusOK))
		g.Expect(readyz(addrs[1])).To(Equal(http.StatusOK))
		g.Expect(elected(replicas[0]) != elected(replicas[1])).To(BeTrue(), "exactly one leader")
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	leader := slices.IndexFunc(replicas, elected)
	follower := 1 - leader
	g.Consistently(func() bool { return elected(replicas[follower]) }).WithTimeout(2 * haRetryPeriod).Should(BeFalse())
	g.Expect(readyz(addrs[follower])).To(Equal(http.StatusOK), "the follower is Ready without leading")
	var lease coordinationv1.Lease
	g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: hubReleaseNamespace, Name: haLeaseName}, &lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil(), "the Lease names its holder")

	// The leader's Spoke controller generates the spokes' keys.
	onceKey, twiceKey := f.registerSpoke("once"), f.registerSpoke("twice")
	// Each replica authenticates spokes from its own cache.
	for _, h := range replicas {
		g.Eventually(func() error {
			return h.Manager.GetCache().Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "twice"}, &tugboatv1alpha1.Spoke{})
		}).WithTimeout(10 * time.Second).Should(Succeed())
	}
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)

	// One delivery, to one replica: the reference.
	body, n := installBatch(t, "once", at)
	r := postTo(g, addrs[leader], wire.EventsPath("once"), onceKey, body)
	g.Expect(r.code).To(Equal(http.StatusAccepted), "%s", r.body)
	g.Expect(r.accepted(g).Accepted).To(Equal(n))

	// The same batch to both replicas at once, three times each: an agent
	// that timed out and retried through the Service, landing elsewhere.
	body, _ = installBatch(t, "twice", at)
	var wg sync.WaitGroup
	replies := make([]reply, 6)
	for i := range replies {
		wg.Go(func() {
			replies[i] = postTo(NewWithT(t), addrs[i%2], wire.EventsPath("twice"), twiceKey, body)
		})
	}
	wg.Wait()
	for i, r := range replies {
		g.Expect(r.code).To(Equal(http.StatusAccepted), "delivery %d to replica %d: %s", i, i%2, r.body)
		a := r.accepted(g)
		g.Expect(a.Received).To(Equal(n))
		g.Expect(a.Accepted+a.Duplicates).To(Equal(n), "delivery %d: every event is either new or a duplicate", i)
	}

	history := func(spoke string) func(g Gomega) *tugboatv1alpha1.ReleaseHistory {
		return func(g Gomega) *tugboatv1alpha1.ReleaseHistory {
			rh := f.history(g, spoke, "apps", "web")
			g.Expect(rh).NotTo(BeNil())
			return rh
		}
	}
	// Both histories hold the install's five events, healthy.
	for _, spoke := range []string{"once", "twice"} {
		g.Eventually(func(g Gomega) {
			rh := history(spoke)(g)
			g.Expect(rh.Status.Revisions).To(HaveLen(1))
			g.Expect(rh.Status.Revisions[0].Events).To(HaveLen(n))
			g.Expect(rh.Status.Current).NotTo(BeNil())
			g.Expect(rh.Status.Current.Health).To(Equal(tugboatv1alpha1.HealthCurrent))
		}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "history of %s", spoke)
	}
	onceCur, onceRevs := recorded(history("once")(g))
	twice := history("twice")(g)
	twiceCur, twiceRevs := recorded(twice)
	g.Expect(twiceCur).To(Equal(onceCur))
	g.Expect(twiceRevs).To(Equal(onceRevs), "six concurrent deliveries to two replicas record what one delivery does")
	ids := map[string]int{}
	for _, ev := range twice.Status.Revisions[0].Events {
		ids[ev.ID]++
		g.Expect(ev.Count).To(BeNumerically("<=", 1), "event %s (%s) counted %d times", ev.ID, ev.Reason, ev.Count)
	}
	g.Expect(ids).To(HaveLen(n))

	// Ordering across replicas: revision 2 reaches the leader, then a late
	// event of revision 1 reaches the follower, whose memory never saw
	// revision 2. The release stays at revision 2.
	upgrade := batchBody(t, "twice",
		stateEvent("twice", wire.EventReleaseStarted, "UpgradeStarted", releaseState("apps", "web", "1.1.0", 2, wire.StatusPendingUpgrade, wire.HealthInProgress), at.Add(10*time.Second), 6),
		stateEvent("twice", wire.EventReleaseStatus, "Deployed", releaseState("apps", "web", "1.1.0", 2, wire.StatusDeployed, wire.HealthCurrent), at.Add(12*time.Second), 7),
	)
	r = postTo(g, addrs[leader], wire.EventsPath("twice"), twiceKey, upgrade)
	g.Expect(r.code).To(Equal(http.StatusAccepted), "%s", r.body)
	g.Eventually(func(g Gomega) int32 {
		rh := history("twice")(g)
		g.Expect(rh.Status.Current).NotTo(BeNil())
		return rh.Status.Current.Revision
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal(int32(2)))
	late := batchBody(t, "twice",
		stateEvent("twice", wire.EventHealthChanged, "RolloutComplete", releaseState("apps", "web", "1.0.0", 1, wire.StatusDeployed, wire.HealthCurrent), at.Add(11*time.Second), 8))
	r = postTo(g, addrs[follower], wire.EventsPath("twice"), twiceKey, late)
	g.Expect(r.code).To(Equal(http.StatusAccepted), "%s", r.body)
	g.Consistently(func(g Gomega) string {
		cur := history("twice")(g).Status.Current
		g.Expect(cur).NotTo(BeNil())
		return fmt.Sprintf("revision %d, %s", cur.Revision, cur.ChartVersion)
	}).WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal("revision 2, 1.1.0"))

	// A leader that stops (a rollout, SIGTERM) hands the Lease over instead
	// of letting it run out: once it stopped, the Lease no longer names it.
	g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: hubReleaseNamespace, Name: haLeaseName}, &lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	was := *lease.Spec.HolderIdentity
	stops[leader]()
	g.Expect(hubCluster.Client.Get(ctx, client.ObjectKey{Namespace: hubReleaseNamespace, Name: haLeaseName}, &lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(Not(Equal(was)))), "the stopped leader released the Lease")
	// The other replica takes over and runs the controllers: its Spoke
	// controller generates a new spoke's key.
	g.Eventually(func() bool { return elected(replicas[follower]) }).WithTimeout(3 * haLeaseDuration).Should(BeTrue())
	g.Expect(f.registerSpoke("after")).NotTo(BeEmpty())
	g.Expect(readyz(addrs[follower])).To(Equal(http.StatusOK))
}

// haEnv is the chaos suite's fleet (chaosEnv: a hub control plane, dev and
// staging spokes with an agent process each) with two `tugboat hub`
// processes behind one balancer instead of one hub: the agents reach the
// replicas through their chaos proxies and the balancer, as they reach a
// hub Service.
type haEnv struct {
	*chaosEnv
	lb *balancer
	// hubs are the running replicas.
	hubs []*hubProcess
}

// haHubFlags are a replica's flags on top of the chaos suite's.
func (e *haEnv) haHubFlags() []string {
	return append(e.hubFlags(), "--leader-elect=true", "--leader-election-namespace", hubReleaseNamespace,
		"--leader-election-lease-duration", haLeaseDuration.String(),
		"--leader-election-renew-deadline", haRenewDeadline.String(),
		"--leader-election-retry-period", haRetryPeriod.String())
}

func newHAEnv(t *testing.T, cfg chaos.Config, versions []string) *haEnv {
	t.Helper()
	e := &haEnv{}
	e.chaosEnv = newChaosFleet(t, cfg, versions, "ha", func(ce *chaosEnv) string {
		e.chaosEnv = ce
		// startHubProcess returns once the replica's receiver is Ready: the
		// second one is, while the first leads.
		for range 2 {
			e.hubs = append(e.hubs, startHubProcess(t, e.bin, e.f.hubKubeconfig(), e.haHubFlags()...))
		}
		e.lb = newBalancer(t, e.hubs[0].addr, e.hubs[1].addr)
		return e.lb.Addr()
	})
	return e
}

// leads reports whether hp holds the Lease, from its
// leader_election_master_status gauge.
func leads(hp *hubProcess) (bool, error) {
	resp, err := http.Get("http://" + hp.metricsAddr + "/metrics")
	if err != nil {
		return false, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	return strings.Contains(string(raw), `leader_election_master_status{name="`+haLeaseName+`"} 1`), nil
}

// leader waits until exactly one running replica leads and returns it.
func (e *haEnv) leader(g Gomega) int {
	idx := -1
	g.Eventually(func(g Gomega) {
		idx = -1
		for i, hp := range e.hubs {
			ok, err := leads(hp)
			g.Expect(err).NotTo(HaveOccurred())
			if ok {
				g.Expect(idx).To(Equal(-1), "two replicas lead")
				idx = i
			}
		}
		g.Expect(idx).NotTo(Equal(-1), "no replica leads")
	}).WithTimeout(3 * haLeaseDuration).WithPolling(250 * time.Millisecond).Should(Succeed())
	return idx
}

// killLeader kills the leading replica (SIGKILL: no hand-over, the Lease
// must expire), starts a new replica in its place behind the balancer, and
// waits until one of the running replicas leads.
func (e *haEnv) killLeader(g Gomega) {
	i := e.leader(g)
	pid := e.hubs[i].pid()
	g.Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	killed := time.Now()
	g.Eventually(func() bool { return harness.ProcessAlive(pid) }).WithTimeout(30 * time.Second).Should(BeFalse())
	survivor := e.hubs[1-i]
	e.hubs[i] = startHubProcess(e.t, e.bin, e.f.hubKubeconfig(), e.haHubFlags()...)
	e.lb.set(survivor.addr, e.hubs[i].addr)
	e.leader(g)
	e.t.Logf("leader moved within %s of the kill (lease duration %s)", time.Since(killed).Round(100*time.Millisecond), haLeaseDuration)
}

// TestHA_leaderKilledDuringReleases runs two `tugboat hub` processes with
// leader election (each its own identity) behind a balancer, with real
// agents on dev and staging and real Helm releases (the helm CLI in dev,
// promoted to staging by its agent, helm strategy). During the stream of
// releases it SIGKILLs the leading replica twice, each time 0–3 s after a
// release (while the hub records it or runs its promotion), and starts a
// new replica in its place. The counts of the chaos suite (Helm storage
// against ReleaseHistories, released versions against Promotions) show
// nothing lost and nothing counted twice, and every version is promoted
// after the leader moved.
func TestHA_leaderKilledDuringReleases(t *testing.T) {
	cfg, err := chaos.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	const releases = 4
	g := NewWithT(t)
	began := time.Now()
	e := newHAEnv(t, cfg, chaosVersions(releases))
	t.Logf("fleet up in %s (load average %s)", time.Since(began).Round(time.Second), loadAverage())
	const name = "ha"
	e.setup(g, name)
	// Active-active: the agents' connections went to both replicas.
	g.Expect(e.lb.connections(e.hubs[0].addr)).To(BeNumerically(">", 0), "replica 0 served no connection")
	g.Expect(e.lb.connections(e.hubs[1].addr)).To(BeNumerically(">", 0), "replica 1 served no connection")

	r := cfg.Rand("ha")
	var released []string
	kills := 0
	for i := 1; i <= releases; i++ {
		v := versionN(i)
		e.release(g, "dev", name, v)
		released = append(released, v)
		if i == 2 || i == 3 {
			e.inject(r, 0, 3*time.Second, "leader SIGKILL", func() { e.killLeader(g) })
			kills++
		}
		e.waitPromoted(g, name, v, promoteBound)
	}
	run := chaosRun{released: released, expected: released, faults: fmt.Sprintf("%d× leader SIGKILL", kills)}
	fig := e.settle(g, name, run, time.Minute)
	fig.Faults, fig.Took = run.faults, time.Since(began)
	t.Logf("HA figures:\n%s\n%s", figuresHeader, fig.row())
	g.Expect(fig.PromotionsMade).To(Equal(releases))
}
