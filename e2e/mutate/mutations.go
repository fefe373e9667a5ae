package main

// mutations are the deliberate bugs, each a rule of its package that a test
// must hold. Keep Old unique in its file.
var mutations = []mutation{
	// controllers/pipeline: the promotion rules (plan, summarize).
	// (Dropping plan's `!src.converged` guard alone is an equivalent
	// mutant: an unconverged environment has no version, and upToDate
	// refuses an empty one. The convergence rule itself is mutated here.)
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_status.go", Name: "converged while a target is not deployed or healthy",
		Old: "if converged {\n\t\t\tev.converged, ev.version", New: "if converged || len(es.Versions) == 1 {\n\t\t\tev.converged, ev.version"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_decide.go", Name: "soak time ignored",
		Old: "soakTime(src.env) > 0 && wait > 0", New: "soakTime(src.env) > 0 && wait < 0"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_decide.go", Name: "hold checked on the destination only",
		Old: "if held(p, src.env.Name) != nil || held(p, dst.env.Name) != nil {", New: "if held(p, dst.env.Name) != nil {"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_decide.go", Name: "suspended source Spoke promoted from",
		Old: "if len(src.suspended) > 0 || len(dst.suspended) > 0 {", New: "if len(dst.suspended) > 0 {"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_decide.go", Name: "destination not reported promoted into",
		Old: "if !reported(dstStatus) {", New: "if false {"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_decide.go", Name: "second Promotion for the same version",
		Old: "if promoted(promos, byName, p.Name, dst.env.Name, version) {", New: "if false {"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_decide.go", Name: "promote while one is running",
		Old: `running != "" {`, New: `running == "-" {`},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_decide.go", Name: "downgrade a destination running newer",
		Old: `if t.Version != "" && compareVersions(t.Version, version) > 0 {`, New: `if t.Version != "" && compareVersions(t.Version, version) < 0 {`},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_status.go", Name: "health gate lets Unknown through",
		Old: "} else if requireHealthy && c.Health != tugboatv1alpha1.HealthCurrent {", New: "} else if requireHealthy && c.Health == tugboatv1alpha1.HealthFailed {"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_status.go", Name: "mixed versions count as converged",
		Old: "if len(es.Versions) != 1 {", New: "if len(es.Versions) == 0 {"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_status.go", Name: "soak not reset by a new version",
		Old: "ok && ps.HealthySince != nil && len(ps.Versions) == 1 && ps.Versions[0] == ev.version", New: "ok && ps.HealthySince != nil"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_status.go", Name: "hold never released",
		Old: "if !had || resumed(p, h.Name, h.Since.Time) {", New: "if !had {"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_status.go", Name: "a resume before the hold releases it",
		Old: "return err == nil && !t.Before(since.Truncate(time.Second))", New: "return err == nil && !t.IsZero() || since.IsZero()"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_status.go", Name: "a redeploy of the same version is a rollback",
		Old: "compareVersions(cur.ChartVersion, before.ChartVersion) >= 0", New: "compareVersions(cur.ChartVersion, before.ChartVersion) > 0"},
	{Pkg: "controllers/pipeline", File: "controllers/pipeline/pipeline_status.go", Name: "an uninstalled target is not absent",
		Old: "ts.Absent = true\n\t\t\t\tev.notReady = append(ev.notReady, id+\" was uninstalled\")", New: "ev.notReady = append(ev.notReady, id+\" was uninstalled\")"},

	// controllers/releasehistory: recording (apply.go).
	{Pkg: "controllers/releasehistory", File: "controllers/releasehistory/apply.go", Name: "a redelivered merged event counts again",
		Old: "if same(&r.Events[i]) && !t.After(r.Events[i].Time.Time) {", New: "if false {"},
	{Pkg: "controllers/releasehistory", File: "controllers/releasehistory/apply.go", Name: "a known event id is recorded again",
		Old: "if hasEvent(st, e.ID) {", New: "if false {"},
	{Pkg: "controllers/releasehistory", File: "controllers/releasehistory/apply.go", Name: "a revision moves back (pending after deployed)",
		Old: "statusRank(wire.ReleaseStatus(r.Status)) > statusRank(s.Status)", New: "statusRank(wire.ReleaseStatus(r.Status)) < statusRank(s.Status)"},
	{Pkg: "controllers/releasehistory", File: "controllers/releasehistory/apply.go", Name: "current is the oldest revision",
		Old: "newest := st.Revisions[0].RevisionSummary", New: "newest := st.Revisions[len(st.Revisions)-1].RevisionSummary"},
	{Pkg: "controllers/releasehistory", File: "controllers/releasehistory/apply.go", Name: "one revision over the limit kept",
		Old: "if len(st.Revisions) > revisionLimit {", New: "if len(st.Revisions) > revisionLimit+1 {"},
	{Pkg: "controllers/releasehistory", File: "controllers/releasehistory/apply.go", Name: "uninstall keeps the last upgrade's message",
		Old: "(e.State.Status != wire.StatusSuperseded && e.State.Status != wire.StatusUninstalled)", New: "(e.State.Status != wire.StatusSuperseded)"},
	{Pkg: "controllers/releasehistory", File: "controllers/releasehistory/apply.go", Name: "a reinstall overwrites the old life",
		Old: "\t\tat.life++\n", New: "\t\tat.life += 0\n"},
	{Pkg: "controllers/releasehistory", File: "controllers/releasehistory/apply.go", Name: "an event goes to its revision number, not its storage object",
		Old: "case e.ReleaseUID != \"\" && findByUID(st, e.ReleaseUID) != nil:", New: "case false:"},
	{Pkg: "controllers/releasehistory", File: "controllers/releasehistory/apply.go", Name: "a release missing from the snapshot is not uninstalled",
		Old: "\t\tr.Status = tugboatv1alpha1.ReleaseStatusUninstalled\n", New: "\t\tr.Status = tugboatv1alpha1.ReleaseStatusSuperseded\n"},

	// webhook/receiver: de-duplication and freshness.
	{Pkg: "webhook/receiver", File: "webhook/receiver/dedupe.go", Name: "no de-duplication",
		Old: "if _, seen := c.idx[k]; seen {", New: "if _, seen := c.idx[k]; false && seen {"},
	{Pkg: "webhook/receiver", File: "webhook/receiver/dedupe.go", Name: "the de-duplication window never evicts",
		Old: "if old := c.ring[c.next]; old.used {\n\t\t\tdelete(c.idx, old.key)", New: "if old := c.ring[c.next]; old.used {\n\t\t\t_ = old.key"},
	{Pkg: "webhook/receiver", File: "webhook/receiver/dedupe.go", Name: "a failed batch's ids count as recorded",
		Old: "\t\tif !committed {\n\t\t\tcontinue\n\t\t}\n", New: ""},
	{Pkg: "webhook/receiver", File: "webhook/receiver/flux.go", Name: "a stale Flux event is accepted",
		Old: "ev.Timestamp.Time.Before(now.Add(-s.opts.ReplayWindow)) ||", New: "false ||"},

	// agent/reporter: delivery outcomes (its backoff lives in agent/hubhttp).
	{Pkg: "agent/reporter", File: "agent/reporter/send.go", Name: "a 5xx counts as accepted",
		Old: "case res.code >= 200 && res.code < 300:", New: "case res.code >= 200 && res.code < 600:"},
	{Pkg: "agent/reporter", File: "agent/reporter/send.go", Name: "a 5xx counts as rejected (dropped)",
		Old: "case res.code == http.StatusBadRequest || res.code == http.StatusRequestEntityTooLarge:", New: "case res.code >= 400 && res.code != http.StatusTooManyRequests:"},
	{Pkg: "agent/reporter", File: "agent/reporter/send.go", Name: "no resync after an outage",
		Old: "\t\tr.disconnected = true\n\t\treturn retry, d", New: "\t\treturn retry, d"},
	{Pkg: "agent/hubhttp", File: "agent/hubhttp/hubhttp.go", Name: "no exponential backoff",
		Old: "\t\tceiling *= 2\n", New: "\t\tceiling *= 1\n"},
	{Pkg: "agent/reporter", File: "agent/reporter/send.go", Name: "Retry-After ignored",
		Old: "if res.hasRetry && (res.code == http.StatusTooManyRequests || res.code == http.StatusServiceUnavailable) {", New: "if false && res.hasRetry {"},
}
