package webhook

import (
	"time"

	"tugboat.dev/tugboat/controllers/notify"
)

// Schema identifiers: the body's apiVersion and kind. A change that removes
// or redefines a field gets a new apiVersion; fields may be added to v1.
const (
	APIVersion = "notify.tugboat.dev/v1"
	Kind       = "Notice"
)

// Payload is the JSON body of a webhook notice, schema
// notify.tugboat.dev/v1 Notice. docs/notifiers.md documents every field.
type Payload struct {
	// APIVersion is "notify.tugboat.dev/v1".
	APIVersion string `json:"apiVersion"`
	// Kind is "Notice".
	Kind string `json:"kind"`
	// ID identifies the notice: a redelivery carries the same ID, so a
	// receiver can de-duplicate.
	ID string `json:"id"`
	// Event is what happened: PromotionCreated, ..., DeploymentDegraded.
	Event string `json:"event"`
	// Summary is true for a summary notice, sent once when a promotion or a
	// deployment completes, with the whole Timeline.
	Summary bool `json:"summary"`
	// Severity is "error" for a failed promotion and a failed or degraded
	// deployment, else "info".
	Severity string `json:"severity"`
	// Time is when the event happened (RFC 3339).
	Time time.Time `json:"time"`
	// Title is the notice's one-line headline for people.
	Title string `json:"title"`
	// Text is the whole notice as plain text for people.
	Text string `json:"text"`
	// Pipeline is the Pipeline the notice is about.
	Pipeline PipelineRef `json:"pipeline"`
	// Promotion is set for Promotion* events.
	Promotion *Promotion `json:"promotion,omitempty"`
	// Hold is set for Hold* events.
	Hold *Hold `json:"hold,omitempty"`
	// Deployment is set for Deployment* events.
	Deployment *Deployment `json:"deployment,omitempty"`
	// Targets are the promotion's destination targets, or the deployment's
	// target, as last reported.
	Targets []Target `json:"targets"`
	// Timeline is every recorded step, oldest first (summary notices; empty
	// otherwise).
	Timeline []Step `json:"timeline"`
}

// PipelineRef names a Pipeline.
type PipelineRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Release is the Pipeline's release name.
	Release string `json:"release,omitempty"`
}

// Promotion describes a promotion.
type Promotion struct {
	Name    string `json:"name"`
	From    string `json:"from,omitempty"`
	To      string `json:"to"`
	Version string `json:"version"`
	Phase   string `json:"phase,omitempty"`
	// Message is the Ready condition's message: a failure's reason.
	Message string `json:"message,omitempty"`
	// URL links to what the strategy produced (the pull request).
	URL      string `json:"url,omitempty"`
	Strategy string `json:"strategy,omitempty"`
	// RequestedBy is auto, user or ci; Requester who (for user and ci).
	RequestedBy string `json:"requestedBy,omitempty"`
	Requester   string `json:"requester,omitempty"`
	// ApprovalsRequired is how many approvals the destination requires.
	ApprovalsRequired int `json:"approvalsRequired,omitempty"`
	// Preview summarizes what the Promotion would change (issue 26);
	// `tugboat diff <name>` shows the diffs. Never a secret.
	Preview string `json:"preview,omitempty"`
	// DashboardURL is the Promotion's page on the hub's dashboard (its
	// preview), when the hub knows the dashboard's address.
	DashboardURL string `json:"dashboardURL,omitempty"`
	// Rollout is the rollout's progress in one line, for a Promotion that
	// rolls out in waves; Wave the wave a PromotionWaveCompleted notice is
	// about ("canary (1 of 3)").
	Rollout    string     `json:"rollout,omitempty"`
	Wave       string     `json:"wave,omitempty"`
	Votes      []Vote     `json:"votes,omitempty"`
	ApprovedBy string     `json:"approvedBy,omitempty"`
	RejectedBy string     `json:"rejectedBy,omitempty"`
	Created    *time.Time `json:"created,omitempty"`
	Started    *time.Time `json:"started,omitempty"`
	Done       *time.Time `json:"done,omitempty"`
}

// Vote is one authenticated approval decision.
type Vote struct {
	// Decision is Approve or Reject.
	Decision string `json:"decision"`
	// User is the authenticated identity; Source what authenticated it
	// (Kubernetes, Slack, CI).
	User        string    `json:"user"`
	DisplayName string    `json:"displayName,omitempty"`
	Source      string    `json:"source"`
	Time        time.Time `json:"time"`
	Message     string    `json:"message,omitempty"`
}

// Hold describes a rollback hold on an environment.
type Hold struct {
	Environment string     `json:"environment"`
	Version     string     `json:"version,omitempty"`
	Message     string     `json:"message,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
}

// Deployment describes a release on one target.
type Deployment struct {
	Spoke        string `json:"spoke"`
	Namespace    string `json:"namespace"`
	Release      string `json:"release"`
	Environment  string `json:"environment,omitempty"`
	Revision     int32  `json:"revision,omitempty"`
	ChartVersion string `json:"chartVersion,omitempty"`
	AppVersion   string `json:"appVersion,omitempty"`
	// Status is Helm's release status (deployed, failed, pending-upgrade...).
	Status string `json:"status,omitempty"`
	// Health is Current, InProgress, Failed or Unknown.
	Health       string `json:"health,omitempty"`
	HealthReason string `json:"healthReason,omitempty"`
	Description  string `json:"description,omitempty"`
}

// Target is one target as last reported.
type Target struct {
	Environment string `json:"environment,omitempty"`
	Spoke       string `json:"spoke"`
	Namespace   string `json:"namespace"`
	Release     string `json:"release"`
	Version     string `json:"version,omitempty"`
	Revision    int32  `json:"revision,omitempty"`
	Health      string `json:"health,omitempty"`
	// Done is true once the target runs the version, healthy.
	Done    bool   `json:"done"`
	Message string `json:"message,omitempty"`
}

// Step is one line of a timeline.
type Step struct {
	Time time.Time `json:"time"`
	// Source is "hub", or a target as spoke/namespace/release.
	Source string `json:"source"`
	Text   string `json:"text"`
}

// NewPayload is the body for n.
func NewPayload(n notify.Notice) Payload {
	p := Payload{
		APIVersion: APIVersion,
		Kind:       Kind,
		ID:         notify.ID(n),
		Event:      string(n.Event),
		Summary:    n.Summary,
		Severity:   "info",
		Time:       n.Time.UTC(),
		Title:      notify.Title(n),
		Text:       notify.Text(n),
		Pipeline:   PipelineRef{Namespace: n.Namespace, Name: n.Pipeline, Release: n.Release},
		Targets:    []Target{},
		Timeline:   []Step{},
	}
	if notify.IsFailure(n) {
		p.Severity = "error"
	}
	if pr := n.Promotion; pr != nil {
		q := &Promotion{
			Name: pr.Name, From: pr.From, To: pr.To, Version: pr.Version, Phase: string(pr.Phase),
			Message: pr.Message, URL: pr.URL, Strategy: string(pr.Strategy),
			RequestedBy: string(pr.RequestedBy), Requester: pr.Requester,
			ApprovalsRequired: pr.ApprovalsRequired, Preview: pr.Preview, DashboardURL: pr.DashboardURL, Rollout: pr.Rollout, Wave: pr.Wave,
			ApprovedBy: pr.ApprovedBy, RejectedBy: pr.RejectedBy,
			Created: timePtr(pr.Created), Started: utc(pr.Started), Done: utc(pr.Done),
		}
		for _, v := range pr.Votes {
			q.Votes = append(q.Votes, Vote{
				Decision: string(v.Decision), User: v.User, DisplayName: v.DisplayName,
				Source: string(v.Source), Time: v.Time.UTC(), Message: v.Message,
			})
		}
		p.Promotion = q
	}
	if h := n.Hold; h != nil {
		p.Hold = &Hold{Environment: h.Environment, Version: h.Version, Message: h.Message, Since: timePtr(h.Since)}
	}
	if d := n.Deployment; d != nil {
		p.Deployment = &Deployment{
			Spoke: d.Spoke, Namespace: d.Namespace, Release: d.Release, Environment: d.Environment,
			Revision: d.Revision, ChartVersion: d.ChartVersion, AppVersion: d.AppVersion,
			Status: string(d.Status), Health: string(d.Health), HealthReason: d.HealthReason,
			Description: d.Description,
		}
	}
	for _, t := range n.Targets {
		p.Targets = append(p.Targets, Target{
			Environment: t.Environment, Spoke: t.Spoke, Namespace: t.Namespace, Release: t.Release,
			Version: t.Version, Revision: t.Revision, Health: string(t.Health), Done: t.Done, Message: t.Message,
		})
	}
	for _, s := range n.Timeline {
		p.Timeline = append(p.Timeline, Step{Time: s.Time.UTC(), Source: s.Source, Text: s.Text})
	}
	return p
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return timePtr(*t)
}
