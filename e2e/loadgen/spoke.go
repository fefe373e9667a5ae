package loadgen

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"tugboat.dev/tugboat/api/wire"
)

// agentVersion is what the simulated agents report.
const agentVersion = "loadgen"

// release is one simulated Helm release and where its rollout stands.
type release struct {
	idx             int // index among the spoke's releases
	namespace, name string
	revision        int
	minor           int // chart version 1.<minor>.0
	status          wire.ReleaseStatus
	health          wire.Health
	healthReason    string
	firstDeployed   time.Time
	lastDeployed    time.Time
	// step is the next rollout step: 0 starts an upgrade, 1 deploys it, 2
	// reports its health.
	step int
	// chartVersion, when set, is the chart version an action upgraded
	// to; else it is 1.<minor>.0.
	chartVersion string
	// prev is the state before an action's upgrade, superseded once it
	// is healthy.
	prev wire.ReleaseState
}

func (r *release) version() string {
	if r.chartVersion != "" {
		return r.chartVersion
	}
	return fmt.Sprintf("1.%d.0", r.minor)
}

func (r *release) state() wire.ReleaseState {
	return wire.ReleaseState{
		Namespace: r.namespace, Release: r.name, Chart: r.name, ChartVersion: r.version(),
		AppVersion: fmt.Sprintf("2.%d", r.minor), Revision: r.revision, Status: r.status,
		Health: r.health, HealthReason: r.healthReason,
		FirstDeployed: r.firstDeployed, LastDeployed: r.lastDeployed,
	}
}

// spokeSim is one simulated agent. Only its own goroutine uses it, but
// under ServeActions, where its actions loop and its heartbeat share it
// under mu.
type spokeSim struct {
	mu       sync.Mutex
	index    int
	spoke    Spoke
	releases []release
	next     int   // the release whose rollout advances next
	seq      int64 // event sequence, so every event id is new
	uid      int64 // object uid counter
	rollouts int
	// lastState is when the last snapshot was accepted.
	lastState time.Time
}

func newSpokeSim(index int, s Spoke, releases int, now time.Time) *spokeSim {
	sim := &spokeSim{index: index, spoke: s, releases: make([]release, releases)}
	for i := range sim.releases {
		sim.releases[i] = release{
			idx: i, namespace: fmt.Sprintf("team-%d", i%4), name: fmt.Sprintf("svc-%02d", i),
			revision: 1, minor: 0, status: wire.StatusDeployed, health: wire.HealthCurrent,
			firstDeployed: now.Add(-time.Hour).UTC().Truncate(time.Second),
			lastDeployed:  now.Add(-time.Hour).UTC().Truncate(time.Second),
		}
	}
	return sim
}

// snapshot returns the body of a state snapshot of every release.
func (s *spokeSim) snapshot(now time.Time) ([]byte, int) {
	snap := wire.StateSnapshot{
		Spoke: s.spoke.Name, AgentVersion: agentVersion, KubernetesVersion: "v1.36.3",
		TakenAt: now.UTC(), Releases: make([]wire.ReleaseState, len(s.releases)),
	}
	for i := range s.releases {
		snap.Releases[i] = s.releases[i].state()
	}
	b, _ := json.Marshal(snap) // the wire types always marshal
	return b, len(snap.Releases)
}

// sampled is an event of a batch whose arrival in a ReleaseHistory can be
// watched for.
type sampled struct {
	history string
	id      string
}

// batch advances the rollouts of perBatch releases by one step each and
// returns the event batch reporting it, and its first release-state event.
func (s *spokeSim) batch(now time.Time, perBatch int) ([]byte, int, sampled) {
	rels := make([]*release, 0, perBatch)
	for range min(perBatch, len(s.releases)) {
		rels = append(rels, &s.releases[s.next])
		s.next = (s.next + 1) % len(s.releases)
	}
	return s.batchOf(now, rels...)
}

// batchOf advances the rollouts of rels by one step each and returns the
// event batch reporting it, and its first release-state event.
func (s *spokeSim) batchOf(now time.Time, rels ...*release) ([]byte, int, sampled) {
	var events []wire.Event
	var first sampled
	for _, r := range rels {
		n := len(events)
		events = s.step(events, r, now)
		if first.id == "" {
			for _, e := range events[n:] {
				if e.State != nil && e.Revision == r.revision {
					first = sampled{history: s.spoke.Name + "." + r.namespace + "." + r.name, id: e.ID}
					break
				}
			}
		}
	}
	b, _ := json.Marshal(wire.EventBatch{Spoke: s.spoke.Name, AgentVersion: agentVersion, SentAt: now.UTC(), Events: events})
	return b, len(events), first
}

// step appends the events of r's next rollout step.
func (s *spokeSim) step(events []wire.Event, r *release, now time.Time) []wire.Event {
	deploy := wire.ObjectRef{Kind: "Deployment", Namespace: r.namespace, Name: r.name, UID: s.objectUID(r, 0)}
	switch r.step {
	case 0: // helm upgrade starts: the release Secret, then the Deployment changes.
		r.revision++
		r.minor++
		r.chartVersion = ""
		r.status, r.health, r.healthReason = wire.StatusPendingUpgrade, wire.HealthInProgress, "Deployment "+r.name+" is rolling out"
		st := r.state()
		events = append(events,
			s.event(r, wire.EventReleaseStarted, wire.EventTypeNormal, "UpgradeStarted", nil, &st, now, "Helm upgrade to "+r.version()+" started"),
			s.event(r, wire.EventObjectUpdated, wire.EventTypeNormal, "Updated", &deploy, nil, now, "Deployment "+r.name+" modified"),
			s.event(r, wire.EventObjectCreated, wire.EventTypeNormal, "Created", s.replicaSet(r), nil, now, "ReplicaSet created"),
		)
		r.step = 1
	case 1: // Helm is done; Pods start.
		r.status = wire.StatusDeployed
		r.lastDeployed = now.UTC().Truncate(time.Second)
		st := r.state()
		for i := 1; i <= 2; i++ {
			pod := s.pod(r, i)
			events = append(events,
				s.event(r, wire.EventObjectCreated, wire.EventTypeNormal, "Created", pod, nil, now, "Pod "+pod.Name+" created"),
				s.event(r, wire.EventKubernetes, wire.EventTypeNormal, "Pulled", pod, nil, now,
					fmt.Sprintf("Successfully pulled image \"registry.local/%s:2.%d\" in 1.2s", r.name, r.minor)),
			)
		}
		events = append(events, s.event(r, wire.EventReleaseStatus, wire.EventTypeNormal, "Deployed", nil, &st, now, "revision deployed"))
		r.step = 2
	case 2: // the rollout completes (or fails), the old revision is superseded.
		s.rollouts++
		prev := r.state()
		prev.Revision, prev.Status, prev.ChartVersion = r.revision-1, wire.StatusSuperseded, fmt.Sprintf("1.%d.0", r.minor-1)
		prev.AppVersion, prev.Health, prev.HealthReason = fmt.Sprintf("2.%d", r.minor-1), wire.HealthUnknown, ""
		if s.rollouts%10 == 0 {
			r.health, r.healthReason = wire.HealthFailed, "Deployment "+r.name+": ProgressDeadlineExceeded"
			pod := s.pod(r, 1)
			events = append(events, s.event(r, wire.EventKubernetes, wire.EventTypeWarning, "BackOff", pod, nil, now, "Back-off restarting failed container"))
		} else {
			r.health, r.healthReason = wire.HealthCurrent, ""
		}
		st := r.state()
		events = append(events,
			s.event(r, wire.EventHealthChanged, typeOf(r.health), "Health"+string(r.health), nil, &st, now, "release health is "+string(r.health)),
			s.event(r, wire.EventObjectDeleted, wire.EventTypeNormal, "Deleted", s.oldPod(r), nil, now, "old Pod deleted"),
		)
		e := wire.Event{
			Spoke: s.spoke.Name, Namespace: r.namespace, Release: r.name, Revision: prev.Revision,
			Kind: wire.EventReleaseStatus, Type: wire.EventTypeNormal, Reason: "Superseded", State: &prev,
			Message: "revision superseded", Time: now.UTC(), Sequence: s.nextSeq(),
		}
		e.ID = e.ComputeID()
		events = append(events, e)
		r.step = 0
	}
	return events
}

func typeOf(h wire.Health) wire.EventType {
	if h == wire.HealthFailed {
		return wire.EventTypeWarning
	}
	return wire.EventTypeNormal
}

func (s *spokeSim) nextSeq() int64 { s.seq++; return s.seq }

func (s *spokeSim) event(r *release, kind wire.EventKind, typ wire.EventType, reason string, obj *wire.ObjectRef, st *wire.ReleaseState, now time.Time, msg string) wire.Event {
	e := wire.Event{
		Spoke: s.spoke.Name, Namespace: r.namespace, Release: r.name, Revision: r.revision,
		Kind: kind, Type: typ, Reason: reason, Object: obj, State: st,
		Message: msg, Time: now.UTC(), Sequence: s.nextSeq(),
	}
	e.ID = e.ComputeID()
	return e
}

// objectUID is a UUID-shaped uid unique to (spoke, release, revision, n).
func (s *spokeSim) objectUID(r *release, n int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8000-%012x", s.index, r.idx, n, r.revision)
}

func (s *spokeSim) replicaSet(r *release) *wire.ObjectRef {
	return &wire.ObjectRef{Kind: "ReplicaSet", Namespace: r.namespace, Name: fmt.Sprintf("%s-%08x", r.name, r.revision), UID: s.objectUID(r, 1)}
}

func (s *spokeSim) pod(r *release, i int) *wire.ObjectRef {
	return &wire.ObjectRef{Kind: "Pod", Namespace: r.namespace, Name: fmt.Sprintf("%s-%08x-%d", r.name, r.revision, i), UID: s.objectUID(r, 1+i)}
}

func (s *spokeSim) oldPod(r *release) *wire.ObjectRef {
	s.uid++
	return &wire.ObjectRef{Kind: "Pod", Namespace: r.namespace, Name: fmt.Sprintf("%s-%08x-1", r.name, r.revision-1), UID: fmt.Sprintf("old-%d-%d", s.index, s.uid)}
}

// release returns the spoke's release namespace/name, or nil.
func (s *spokeSim) release(namespace, name string) *release {
	for i := range s.releases {
		if r := &s.releases[i]; r.namespace == namespace && r.name == name {
			return r
		}
	}
	return nil
}

// upgradeStarted starts an upgrade of r to version, as an action does,
// and returns the event batch the agent sends when Helm's pending record
// appears: ReleaseStarted for the next revision, pending upgrade,
// InProgress.
func (s *spokeSim) upgradeStarted(r *release, version string, now time.Time) ([]byte, int) {
	r.prev = r.state()
	r.revision++
	r.minor++
	r.chartVersion = version
	r.status, r.health, r.healthReason = wire.StatusPendingUpgrade, wire.HealthInProgress, "Deployment "+r.name+" is rolling out"
	r.step = 0
	st := r.state()
	events := []wire.Event{s.event(r, wire.EventReleaseStarted, wire.EventTypeNormal, "UpgradeStarted", nil, &st, now, "Helm upgrade to "+version+" started")}
	b, _ := json.Marshal(wire.EventBatch{Spoke: s.spoke.Name, AgentVersion: agentVersion, SentAt: now.UTC(), Events: events})
	return b, len(events)
}

// upgradeHealthy ends the upgrade upgradeStarted began, and returns the
// event batch the agent sends once it rolled out: the new revision
// deployed and Current, the previous one superseded.
func (s *spokeSim) upgradeHealthy(r *release, now time.Time) ([]byte, int) {
	r.status, r.health, r.healthReason = wire.StatusDeployed, wire.HealthCurrent, ""
	r.lastDeployed = now.UTC().Truncate(time.Second)
	st := r.state()
	prev := r.prev
	prev.Status, prev.Health, prev.HealthReason = wire.StatusSuperseded, wire.HealthUnknown, ""
	events := []wire.Event{
		s.event(r, wire.EventReleaseStatus, wire.EventTypeNormal, "Deployed", nil, &st, now, "revision deployed"),
		s.event(r, wire.EventHealthChanged, wire.EventTypeNormal, "HealthCurrent", nil, &st, now, "release health is Current"),
	}
	e := wire.Event{
		Spoke: s.spoke.Name, Namespace: r.namespace, Release: r.name, Revision: prev.Revision,
		Kind: wire.EventReleaseStatus, Type: wire.EventTypeNormal, Reason: "Superseded", State: &prev,
		Message: "revision superseded", Time: now.UTC(), Sequence: s.nextSeq(),
	}
	e.ID = e.ComputeID()
	events = append(events, e)
	b, _ := json.Marshal(wire.EventBatch{Spoke: s.spoke.Name, AgentVersion: agentVersion, SentAt: now.UTC(), Events: events})
	return b, len(events)
}
