package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// TestAPIValidation checks the generated CRDs against a real kube-apiserver:
// invalid objects are rejected with a message naming the field, valid ones
// round-trip unchanged, defaults apply, and immutable fields stay so. One
// control plane serves every subtest.
func TestAPIValidation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real API server")
	}
	c := harness.StartT(t, harness.Options{Name: "api", ControlPlaneOnly: true, TugboatCRDs: true})
	ctx := context.Background()

	t.Run("rejects invalid objects, naming the field", func(t *testing.T) { testRejectsInvalid(ctx, t, c.Client) })
	t.Run("round-trips valid objects of every kind", func(t *testing.T) { testRoundTrips(ctx, t, c.Client) })
	t.Run("round-trips status through the status subresource", func(t *testing.T) { testStatusRoundTrip(ctx, t, c.Client) })
	t.Run("applies defaults", func(t *testing.T) { testDefaults(ctx, t, c.Client) })
	t.Run("keeps immutable fields immutable", func(t *testing.T) { testImmutable(ctx, t, c.Client) })
	t.Run("validates PromotionPreviews", func(t *testing.T) { testPromotionPreviews(ctx, t, c.Client) })
}

const ns = "default"

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }

// minimalPipeline is a valid Pipeline that each invalid case breaks in one way.
func minimalPipeline(name string) *tugboatv1.Pipeline {
	return &tugboatv1.Pipeline{
		ObjectMeta: meta(name),
		Spec: tugboatv1.PipelineSpec{
			Release:   "web",
			Promotion: tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyKubernetes},
			Environments: []tugboatv1.Environment{
				{Name: "staging", Targets: []tugboatv1.Target{{Spoke: "staging-1", Namespace: "apps"}}},
				{Name: "production", Targets: []tugboatv1.Target{{Spoke: "prod-1", Namespace: "apps"}}},
			},
		},
	}
}

func minimalSpoke(name string) *tugboatv1.Spoke {
	return &tugboatv1.Spoke{
		ObjectMeta: meta(name),
		Spec:       tugboatv1.SpokeSpec{KeySecretRef: tugboatv1.LocalSecretReference{Name: name + "-key"}},
	}
}

func minimalPromotionTarget(name string) *tugboatv1.PromotionTarget {
	return &tugboatv1.PromotionTarget{
		ObjectMeta: meta(name),
		Spec:       tugboatv1.PromotionTargetSpec{Promotion: "web-production-1.4.0", Spoke: "prod-1", Namespace: "apps", Release: "web"},
	}
}

func minimalPromotion(name string) *tugboatv1.Promotion {
	return &tugboatv1.Promotion{
		ObjectMeta: meta(name),
		Spec: tugboatv1.PromotionSpec{
			Pipeline:    "web",
			From:        "staging",
			To:          "production",
			Version:     "1.4.0",
			RequestedBy: tugboatv1.RequestedByAuto,
		},
	}
}

func minimalReleaseHistory(name string) *tugboatv1.ReleaseHistory {
	return &tugboatv1.ReleaseHistory{
		ObjectMeta: meta(name),
		Spec:       tugboatv1.ReleaseHistorySpec{Spoke: "staging-1", Namespace: "apps", Release: "web"},
	}
}

func pipelineWith(name string, mutate func(p *tugboatv1.Pipeline)) client.Object {
	p := minimalPipeline(name)
	mutate(p)
	return p
}

// rolloutWith is a valid Pipeline whose production environment has a
// rollout (a canary of one spoke) that mutate breaks.
func rolloutWith(name string, mutate func(r *tugboatv1.Rollout)) client.Object {
	return pipelineWith(name, func(p *tugboatv1.Pipeline) {
		r := &tugboatv1.Rollout{Canary: &tugboatv1.CanaryWave{Spokes: []string{"prod-1"}}}
		mutate(r)
		p.Spec.Environments[1].Rollout = r
	})
}

func testRejectsInvalid(ctx context.Context, t *testing.T, c client.Client) {
	cases := []struct {
		name string
		obj  client.Object
		// want are substrings of the error: the field path, and what is wrong.
		want []string
	}{
		{
			name: "pipeline without environments",
			obj:  pipelineWith("no-envs", func(p *tugboatv1.Pipeline) { p.Spec.Environments = []tugboatv1.Environment{} }),
			want: []string{"spec.environments", "at least 1 items"},
		},
		{
			name: "pipeline with null environments",
			obj:  pipelineWith("null-envs", func(p *tugboatv1.Pipeline) { p.Spec.Environments = nil }),
			want: []string{"spec.environments"},
		},
		{
			name: "duplicate environment names",
			obj: pipelineWith("dup-envs", func(p *tugboatv1.Pipeline) {
				p.Spec.Environments[1].Name = p.Spec.Environments[0].Name
			}),
			want: []string{"spec.environments[1]", "Duplicate value"},
		},
		{
			name: "environment without targets",
			obj:  pipelineWith("no-targets", func(p *tugboatv1.Pipeline) { p.Spec.Environments[0].Targets = []tugboatv1.Target{} }),
			want: []string{"spec.environments[0].targets", "at least 1 items"},
		},
		{
			name: "target without a spoke",
			obj:  pipelineWith("no-spoke", func(p *tugboatv1.Pipeline) { p.Spec.Environments[1].Targets[0].Spoke = "" }),
			want: []string{"spec.environments[1].targets[0]", "a target names exactly one of spoke and spokeSelector"},
		},
		{
			name: "duplicate targets",
			obj: pipelineWith("dup-targets", func(p *tugboatv1.Pipeline) {
				p.Spec.Environments[0].Targets = append(p.Spec.Environments[0].Targets, p.Spec.Environments[0].Targets[0])
			}),
			want: []string{"spec.environments[0].targets", "targets must be unique"},
		},
		{
			name: "negative soak time",
			obj: pipelineWith("neg-soak", func(p *tugboatv1.Pipeline) {
				p.Spec.Environments[0].Gates.SoakTime = &metav1.Duration{Duration: -5 * time.Minute}
			}),
			want: []string{"spec.environments[0].gates.soakTime", "must not be negative"},
		},
		{
			name: "zero timeout",
			obj:  pipelineWith("zero-timeout", func(p *tugboatv1.Pipeline) { p.Spec.Timeout = &metav1.Duration{} }),
			want: []string{"spec.timeout", "timeout must be positive"},
		},
		{
			name: "unknown strategy type",
			obj:  pipelineWith("bad-strategy", func(p *tugboatv1.Pipeline) { p.Spec.Promotion.Type = "carrierPigeon" }),
			want: []string{"spec.promotion.type", `Unsupported value: "carrierPigeon"`},
		},
		{
			name: "unknown strategy type in an environment override",
			obj: pipelineWith("bad-env-strategy", func(p *tugboatv1.Pipeline) {
				p.Spec.Environments[1].Promotion = &tugboatv1.PromotionStrategy{Type: "ftp"}
			}),
			want: []string{"spec.environments[1].promotion.type", `Unsupported value: "ftp"`},
		},
		{
			name: "pullRequest strategy without its configuration",
			obj:  pipelineWith("pr-no-config", func(p *tugboatv1.Pipeline) { p.Spec.Promotion.Type = tugboatv1.StrategyPullRequest }),
			want: []string{"spec.promotion.pullRequest", "pullRequest is required"},
		},
		{
			name: "configuration of another strategy",
			obj: pipelineWith("wrong-config", func(p *tugboatv1.Pipeline) {
				p.Spec.Promotion.Webhook = &tugboatv1.WebhookStrategy{URL: "https://ci.example.com/promote"}
			}),
			want: []string{"spec.promotion.webhook", "webhook is required when type is webhook, and forbidden otherwise"},
		},
		{
			name: "unknown git provider",
			obj: pipelineWith("bad-provider", func(p *tugboatv1.Pipeline) {
				p.Spec.Promotion = tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyPullRequest, PullRequest: &tugboatv1.PullRequestStrategy{
					URL: "https://git.example.com/org/fleet.git", Provider: "bitbucket", SecretRef: tugboatv1.LocalSecretReference{Name: "git"},
				}}
			}),
			want: []string{"spec.promotion.pullRequest.provider", `Unsupported value: "bitbucket"`},
		},
		{
			name: "pull request path escaping the repository",
			obj: pipelineWith("pr-dotdot", func(p *tugboatv1.Pipeline) {
				p.Spec.Promotion = tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyPullRequest, PullRequest: &tugboatv1.PullRequestStrategy{
					URL: "https://git.example.com/org/fleet.git", Provider: tugboatv1.GitProviderGitea,
					SecretRef: tugboatv1.LocalSecretReference{Name: "git"}, Path: "clusters/../../etc",
				}}
			}),
			want: []string{"spec.promotion.pullRequest.path", "must not contain '..'"},
		},
		{
			name: "environment name of 64 characters",
			obj:  pipelineWith("long-env", func(p *tugboatv1.Pipeline) { p.Spec.Environments[0].Name = strings.Repeat("a", 64) }),
			want: []string{"spec.environments[0].name", "Too long"},
		},
		{
			name: "environment name that is not a DNS label",
			obj:  pipelineWith("bad-env-name", func(p *tugboatv1.Pipeline) { p.Spec.Environments[0].Name = "Staging_EU" }),
			want: []string{"spec.environments[0].name", "should match"},
		},
		{
			name: "notifier type without its configuration",
			obj: pipelineWith("notify-no-config", func(p *tugboatv1.Pipeline) {
				p.Spec.Notify = []tugboatv1.Notifier{{Name: "chat", Type: tugboatv1.NotifierSlack}}
			}),
			want: []string{"spec.notify[0].slack", "slack is required"},
		},
		{
			name: "pipeline name over 63 characters",
			obj:  pipelineWith(strings.Repeat("p", 64), func(*tugboatv1.Pipeline) {}),
			want: []string{"metadata.name must be at most 63 characters"},
		},
		{
			name: "spoke without a key secret name",
			obj:  &tugboatv1.Spoke{ObjectMeta: meta("no-key"), Spec: tugboatv1.SpokeSpec{}},
			want: []string{"spec.keySecretRef.name"},
		},
		{
			name: "spoke with both clusterRef and kubeConfigSecretRef",
			obj: func() client.Object {
				s := minimalSpoke("both-refs")
				s.Spec.ClusterRef = &tugboatv1.ObjectReference{Name: "both-refs"}
				s.Spec.KubeConfigSecretRef = &tugboatv1.SecretKeyReference{Name: "kubeconfig"}
				return s
			}(),
			want: []string{"spec.kubeConfigSecretRef", "mutually exclusive"},
		},
		{
			// Issue 12, High 1: another namespace's Cluster is another
			// tenant's.
			name: "spoke with a clusterRef into another namespace",
			obj: func() client.Object {
				s := minimalSpoke("other-tenant")
				s.Spec.ClusterRef = &tugboatv1.ObjectReference{Namespace: "tenant-b", Name: "prod-1"}
				return s
			}(),
			want: []string{"spec.clusterRef", "a Spoke only reaches clusters in its own namespace"},
		},
		{
			name: "spoke with a clusterRef naming its own namespace (unset is the only spelling)",
			obj: func() client.Object {
				s := minimalSpoke("own-ns")
				s.Spec.ClusterRef = &tugboatv1.ObjectReference{Namespace: ns, Name: "prod-1"}
				return s
			}(),
			want: []string{"spec.clusterRef", "clusterRef.namespace must be unset"},
		},
		{
			name: "spoke name with a dot",
			obj:  minimalSpoke("staging.one"),
			want: []string{"metadata.name must be a DNS label"},
		},
		{
			name: "spoke agent bootstrap without a kubeconfig",
			obj: func() client.Object {
				s := minimalSpoke("boot-no-kubeconfig")
				s.Spec.AgentBootstrap = &tugboatv1.AgentBootstrap{HubURL: "https://tugboat.example.com"}
				return s
			}(),
			want: []string{"spec.agentBootstrap", "needs clusterRef or kubeConfigSecretRef"},
		},
		{
			name: "spoke agent bootstrap to a plain http hub",
			obj: func() client.Object {
				s := minimalSpoke("boot-http")
				s.Spec.ClusterRef = &tugboatv1.ObjectReference{Name: "boot-http"}
				s.Spec.AgentBootstrap = &tugboatv1.AgentBootstrap{HubURL: "http://tugboat.example.com"}
				return s
			}(),
			want: []string{"spec.agentBootstrap.hubURL", "should match"},
		},
		{
			name: "spoke class with a bad selector",
			obj: &tugboatv1.SpokeClass{ObjectMeta: meta("bad-selector"), Spec: tugboatv1.SpokeClassSpec{
				ClusterSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}},
			}},
			want: []string{"spec.clusterSelector", "operator must be In, NotIn, Exists or DoesNotExist"},
		},
		{
			name: "promotion from an environment into itself",
			obj: func() client.Object {
				p := minimalPromotion("same-env")
				p.Spec.To = p.Spec.From
				return p
			}(),
			want: []string{"spec.to", "from and to must differ"},
		},
		{
			name: "promotion with an unknown requester",
			obj: func() client.Object {
				p := minimalPromotion("bad-requester")
				p.Spec.RequestedBy = "robot"
				return p
			}(),
			want: []string{"spec.requestedBy", `Unsupported value: "robot"`},
		},
		{
			name: "promotion without a version",
			obj: func() client.Object {
				p := minimalPromotion("no-version")
				p.Spec.Version = ""
				return p
			}(),
			want: []string{"spec.version"},
		},
		// Rollouts (issue 24): one problem per row, in the production
		// environment's rollout.
		{
			name: "canary naming both spokes and a count",
			obj: rolloutWith("canary-two", func(r *tugboatv1.Rollout) {
				r.Canary = &tugboatv1.CanaryWave{Spokes: []string{"prod-1"}, Count: ptr.To[int32](1)}
			}),
			want: []string{"spec.environments[1].rollout.canary", "a canary names exactly one of spokes, spokeSelector and count"},
		},
		{
			name: "canary naming nothing",
			obj: rolloutWith("canary-none", func(r *tugboatv1.Rollout) {
				r.Canary = &tugboatv1.CanaryWave{SoakTime: &metav1.Duration{Duration: time.Minute}}
			}),
			want: []string{"spec.environments[1].rollout.canary", "a canary names exactly one of spokes, spokeSelector and count"},
		},
		{
			name: "canary with an empty spokeSelector",
			obj: rolloutWith("canary-empty-sel", func(r *tugboatv1.Rollout) {
				r.Canary = &tugboatv1.CanaryWave{SpokeSelector: &metav1.LabelSelector{}}
			}),
			want: []string{"spec.environments[1].rollout.canary.spokeSelector", "canary spokeSelector must not be empty"},
		},
		{
			name: "canary count of 0",
			obj: rolloutWith("canary-zero", func(r *tugboatv1.Rollout) {
				r.Canary = &tugboatv1.CanaryWave{Count: ptr.To[int32](0)}
			}),
			want: []string{"spec.environments[1].rollout.canary.count", "greater than or equal to 1"},
		},
		{
			name: "canary spoke that is not a DNS label",
			obj: rolloutWith("canary-bad-name", func(r *tugboatv1.Rollout) {
				r.Canary = &tugboatv1.CanaryWave{Spokes: []string{"Prod_1"}}
			}),
			want: []string{"spec.environments[1].rollout.canary.spokes[0]", "should match"},
		},
		{
			name: "wave of 0 targets",
			obj:  rolloutWith("wave-zero", func(r *tugboatv1.Rollout) { r.Waves = []tugboatv1.Wave{{Size: intstr.FromInt32(0)}} }),
			want: []string{"spec.environments[1].rollout.waves[0].size", "size must be a count of at least 1 or a percentage from 1% to 100%"},
		},
		{
			name: "wave of 0%",
			obj:  rolloutWith("wave-zero-pct", func(r *tugboatv1.Rollout) { r.Waves = []tugboatv1.Wave{{Size: intstr.FromString("0%")}} }),
			want: []string{"spec.environments[1].rollout.waves[0].size", "from 1% to 100%"},
		},
		{
			name: "wave over 100%",
			obj:  rolloutWith("wave-150-pct", func(r *tugboatv1.Rollout) { r.Waves = []tugboatv1.Wave{{Size: intstr.FromString("150%")}} }),
			want: []string{"spec.environments[1].rollout.waves[0].size", "from 1% to 100%"},
		},
		{
			name: "wave size that is neither a count nor a percentage",
			obj:  rolloutWith("wave-words", func(r *tugboatv1.Rollout) { r.Waves = []tugboatv1.Wave{{Size: intstr.FromString("ten")}} }),
			want: []string{"spec.environments[1].rollout.waves[0].size", "size must be a count"},
		},
		{
			name: "more than 20 waves",
			obj: rolloutWith("waves-21", func(r *tugboatv1.Rollout) {
				for range tugboatv1.MaxWaves + 1 {
					r.Waves = append(r.Waves, tugboatv1.Wave{Size: intstr.FromInt32(1)})
				}
			}),
			want: []string{"spec.environments[1].rollout.waves", "must have at most 20 items"},
		},
		{
			name: "negative soak time of a wave",
			obj: rolloutWith("wave-neg-soak", func(r *tugboatv1.Rollout) {
				r.Waves = []tugboatv1.Wave{{Size: intstr.FromString("50%"), SoakTime: &metav1.Duration{Duration: -time.Minute}}}
			}),
			want: []string{"spec.environments[1].rollout.waves[0].soakTime", "soakTime must not be negative"},
		},
		{
			name: "zero progress deadline",
			obj:  rolloutWith("zero-deadline", func(r *tugboatv1.Rollout) { r.ProgressDeadline = &metav1.Duration{} }),
			want: []string{"spec.environments[1].rollout.progressDeadline", "progressDeadline must be positive"},
		},
		{
			name: "rollback with an environment's notification strategy",
			obj: pipelineWith("rollback-notification", func(p *tugboatv1.Pipeline) {
				p.Spec.Environments[1].Rollout = &tugboatv1.Rollout{Canary: &tugboatv1.CanaryWave{Count: ptr.To[int32](1)}, OnFailure: tugboatv1.RolloutRollback}
				p.Spec.Environments[1].Promotion = &tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyNotification}
			}),
			want: []string{"spec.environments", "rollout.onFailure Rollback needs the environment's strategy to be helm, kubernetes or pullRequest"},
		},
		{
			name: "rollback with the Pipeline's default webhook strategy",
			obj: pipelineWith("rollback-hook", func(p *tugboatv1.Pipeline) {
				p.Spec.Environments[1].Rollout = &tugboatv1.Rollout{Canary: &tugboatv1.CanaryWave{Count: ptr.To[int32](1)}, OnFailure: tugboatv1.RolloutRollback}
				p.Spec.Promotion = tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyWebhook, Webhook: &tugboatv1.WebhookStrategy{URL: "https://ci.example.com/promote"}}
			}),
			want: []string{"spec.environments", "tugboat cannot roll back what a webhook or notification strategy's external actor changed"},
		},
		{
			name: "negative failure budget",
			obj:  rolloutWith("budget-neg", func(r *tugboatv1.Rollout) { r.MaxFailures = ptr.To(intstr.FromInt32(-1)) }),
			want: []string{"spec.environments[1].rollout.maxFailures", "maxFailures must be a count of at least 0 or a percentage from 0% to 100%"},
		},
		{
			name: "failure budget over 100%",
			obj:  rolloutWith("budget-101", func(r *tugboatv1.Rollout) { r.MaxFailures = ptr.To(intstr.FromString("101%")) }),
			want: []string{"spec.environments[1].rollout.maxFailures", "from 0% to 100%"},
		},
		{
			name: "unknown action when the budget is spent",
			obj:  rolloutWith("on-failure", func(r *tugboatv1.Rollout) { r.OnFailure = "Retry" }),
			want: []string{"spec.environments[1].rollout.onFailure", `Unsupported value: "Retry"`},
		},
		{
			name: "release history with a release name over 53 characters",
			obj: func() client.Object {
				r := minimalReleaseHistory("long-release")
				r.Spec.Release = strings.Repeat("r", 54)
				return r
			}(),
			want: []string{"spec.release", "Too long"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := c.Create(ctx, tc.obj)
			if err == nil {
				_ = c.Delete(ctx, tc.obj)
			}
			g.Expect(err).To(HaveOccurred(), "the API server accepted the object")
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

// fullPipeline sets every field, including those with defaults, so that what
// the server returns equals what was sent.
func fullPipeline(name string) *tugboatv1.Pipeline {
	return &tugboatv1.Pipeline{
		ObjectMeta: meta(name),
		Spec: tugboatv1.PipelineSpec{
			Release: "web",
			Environments: []tugboatv1.Environment{
				{
					Name:    "staging",
					Targets: []tugboatv1.Target{{Spoke: "staging-1", Namespace: "apps"}},
					Gates:   tugboatv1.Gates{SoakTime: &metav1.Duration{Duration: 10 * time.Minute}, RequireHealthy: ptr.To(true)},
					Promotion: &tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyHelm, Helm: &tugboatv1.HelmStrategy{
						Repository: "oci://registry.example.com/charts/web", ValuesPolicy: tugboatv1.ValuesPolicyResetThenReuse,
					}},
				},
				{
					Name: "production",
					Targets: []tugboatv1.Target{
						{Spoke: "prod-1", Namespace: "apps", HelmRelease: &tugboatv1.ObjectReference{Namespace: "flux-system", Name: "web"}},
						{Spoke: "prod-2", Namespace: "apps", Release: "web-eu"},
					},
					Gates: tugboatv1.Gates{SoakTime: &metav1.Duration{}, RequireApproval: true, RequireHealthy: ptr.To(false)},
					Rollout: &tugboatv1.Rollout{
						Canary: &tugboatv1.CanaryWave{
							SpokeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}},
							SoakTime:      &metav1.Duration{Duration: 30 * time.Minute}, ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute},
						},
						Waves: []tugboatv1.Wave{
							{Size: intstr.FromString("10%"), SoakTime: &metav1.Duration{Duration: 15 * time.Minute}},
							{Size: intstr.FromInt32(100), ProgressDeadline: &metav1.Duration{Duration: 20 * time.Minute}},
						},
						SoakTime:         &metav1.Duration{Duration: 10 * time.Minute},
						ProgressDeadline: &metav1.Duration{Duration: 15 * time.Minute},
						MaxFailures:      ptr.To(intstr.FromString("5%")),
						OnFailure:        tugboatv1.RolloutRollback,
					},
				},
			},
			Promotion: tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyPullRequest, PullRequest: &tugboatv1.PullRequestStrategy{
				URL: "https://git.example.com/org/fleet.git", Branch: "main", Path: "clusters/production",
				Provider: tugboatv1.GitProviderGitea, SecretRef: tugboatv1.LocalSecretReference{Name: "git"},
			}},
			Notify: []tugboatv1.Notifier{
				{Name: "chat", Type: tugboatv1.NotifierSlack, Slack: &tugboatv1.SlackNotifier{SecretRef: tugboatv1.LocalSecretReference{Name: "slack"}, Channel: "#deploys"}},
				{Name: "mail", Type: tugboatv1.NotifierEmail, Email: &tugboatv1.EmailNotifier{
					Server: "smtp.example.com:587", From: "tugboat@example.com", To: []string{"oncall@example.com", "team@example.com"},
					SecretRef: &tugboatv1.LocalSecretReference{Name: "smtp"},
				}},
				{Name: "hook", Type: tugboatv1.NotifierWebhook, Webhook: &tugboatv1.WebhookNotifier{URL: "https://hooks.example.com/tugboat", SecretRef: &tugboatv1.LocalSecretReference{Name: "hook"}}},
				{Name: "flux", Type: tugboatv1.NotifierFlux, Flux: &tugboatv1.FluxNotifier{Address: "http://notification-controller.flux-system.svc/"}},
			},
			SecretRef:    &tugboatv1.LocalSecretReference{Name: "ci"},
			Timeout:      &metav1.Duration{Duration: time.Hour},
			HistoryLimit: ptr.To[int32](5),
			Suspend:      true,
		},
	}
}

func testRoundTrips(ctx context.Context, t *testing.T, c client.Client) {
	webhookPromotion := minimalPromotion("web-production-1.4.1")
	webhookPromotion.Spec.Version = "1.4.1"
	webhookPromotion.Spec.RequestedBy = tugboatv1.RequestedByCI
	webhookPromotion.Spec.Requester = "https://ci.example.com/jobs/42"
	notifyPromotion := minimalPromotion("web-staging-1.4.0")
	notifyPromotion.Spec.From = ""
	notifyPromotion.Spec.To = "staging"
	notifyPromotion.Spec.RequestedBy = tugboatv1.RequestedByUser

	spoke := minimalSpoke("staging-1")
	spoke.Spec.KubeConfigSecretRef = &tugboatv1.SecretKeyReference{Name: "staging-1-kubeconfig", Key: "config"}
	capiSpoke := minimalSpoke("prod-1")
	capiSpoke.Spec.ClusterRef = &tugboatv1.ObjectReference{Name: "prod-1"}

	rh := minimalReleaseHistory("staging-1.apps.web")
	rh.Spec.HelmRelease = &tugboatv1.ObjectReference{Namespace: "apps", Name: "web"}

	cases := []struct {
		name string
		obj  client.Object
		get  client.Object
		spec func(client.Object) any
	}{
		{"Pipeline", fullPipeline("web"), &tugboatv1.Pipeline{}, func(o client.Object) any { return o.(*tugboatv1.Pipeline).Spec }},
		{"Spoke with a kubeconfig Secret", spoke, &tugboatv1.Spoke{}, func(o client.Object) any { return o.(*tugboatv1.Spoke).Spec }},
		{"Spoke with a Cluster API Cluster", capiSpoke, &tugboatv1.Spoke{}, func(o client.Object) any { return o.(*tugboatv1.Spoke).Spec }},
		{"Promotion (kubernetes)", minimalPromotion("web-production-1.4.0"), &tugboatv1.Promotion{}, func(o client.Object) any { return o.(*tugboatv1.Promotion).Spec }},
		{"Promotion (webhook)", webhookPromotion, &tugboatv1.Promotion{}, func(o client.Object) any { return o.(*tugboatv1.Promotion).Spec }},
		{"Promotion (notification, first environment)", notifyPromotion, &tugboatv1.Promotion{}, func(o client.Object) any { return o.(*tugboatv1.Promotion).Spec }},
		{"ReleaseHistory", rh, &tugboatv1.ReleaseHistory{}, func(o client.Object) any { return o.(*tugboatv1.ReleaseHistory).Spec }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			want := tc.spec(tc.obj.DeepCopyObject().(client.Object))
			g.Expect(c.Create(ctx, tc.obj)).To(Succeed())
			t.Cleanup(func() { _ = c.Delete(ctx, tc.obj) })

			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(tc.obj), tc.get)).To(Succeed())
			g.Expect(tc.spec(tc.get)).To(Equal(want))
		})
	}
}

func testStatusRoundTrip(ctx context.Context, t *testing.T, c client.Client) {
	t.Run("Promotion", func(t *testing.T) {
		g := NewWithT(t)
		p := minimalPromotion("status-roundtrip")
		g.Expect(c.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, p) })

		// metav1.Time decodes into local time at second precision: build the
		// expected values the same way.
		at := func(sec int64) *metav1.Time { t := metav1.Unix(1767225600+sec, 0); return &t }
		p.Status = tugboatv1.PromotionStatus{
			ObservedGeneration: p.Generation,
			Conditions: []metav1.Condition{{
				Type: tugboatv1.ReadyCondition.String(), Status: metav1.ConditionFalse, ObservedGeneration: p.Generation,
				LastTransitionTime: *at(30), Reason: tugboatv1.VerifyingReason.String(), Message: "waiting for prod-1 to report 1.4.0",
			}},
			Phase:          tugboatv1.PromotionVerifying,
			Attempts:       1,
			StrategyResult: &tugboatv1.StrategyResult{URL: "https://git.example.com/org/fleet/pulls/7", Reference: "tugboat/web/production/1.4.0@1a2b3c", Message: "opened pull request #7"},
			Notifications: []tugboatv1.NotificationDelivery{
				{Notifier: "chat", Event: tugboatv1.EventPromotionRunning, Reference: "C024BE91L/1700000000.000100",
					DeliveryState: tugboatv1.DeliveryState{Phase: tugboatv1.NotificationDelivered, Attempts: 1, LastAttemptAt: at(5), DeliveredAt: at(5)}},
				{Notifier: "hook", Event: tugboatv1.EventPromotionRunning,
					DeliveryState: tugboatv1.DeliveryState{Phase: tugboatv1.NotificationPending, Attempts: 2, LastAttemptAt: at(20), Error: "503 Service Unavailable"}},
			},
			Approval:  &tugboatv1.Approval{ApprovedBy: "alice", Time: *at(2), Message: "ship it"},
			StartedAt: at(1),
			Rollout: &tugboatv1.RolloutStatus{
				Phase: tugboatv1.RolloutProgressing,
				Resolved: &tugboatv1.Rollout{
					Canary:           &tugboatv1.CanaryWave{Spokes: []string{"prod-1"}},
					Waves:            []tugboatv1.Wave{{Size: intstr.FromString("50%")}},
					ProgressDeadline: &metav1.Duration{Duration: 10 * time.Minute},
					MaxFailures:      ptr.To(intstr.FromInt32(1)),
					OnFailure:        tugboatv1.RolloutPause,
				},
				CurrentWave: 1,
				Waves: []tugboatv1.WaveStatus{
					{Name: "canary", Targets: 1, Succeeded: 1, StartedAt: at(3), CompletedAt: at(9)},
					{Name: "wave-1", Targets: 2, InProgress: 1, Failed: 1, StartedAt: at(10)},
					{Name: "final", Targets: 1, Pending: 1},
				},
				MaxFailures: 1,
				Failed:      1,
				FailedTargets: []tugboatv1.FailedTarget{{
					Spoke: "prod-2", Namespace: "apps", Release: "web", Wave: "wave-1", Reason: tugboatv1.TargetHealthFailed,
					Revision: 13, Message: "Deployment web: ProgressDeadlineExceeded", Since: at(25),
				}},
				Message:           "wave-1: 1 of 2 targets in progress; 1 of 1 allowed failures used",
				RollbackStartedAt: at(35),
			},
		}
		want := p.Status.DeepCopy()
		g.Expect(c.Status().Update(ctx, p)).To(Succeed())

		got := &tugboatv1.Promotion{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status).To(Equal(*want))
		g.Expect(got.Spec).To(Equal(minimalPromotion("status-roundtrip").Spec))
	})

	t.Run("PromotionTarget", func(t *testing.T) {
		g := NewWithT(t)
		pt := minimalPromotionTarget("status-roundtrip")
		g.Expect(c.Create(ctx, pt)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, pt) })
		at := func(sec int64) *metav1.Time { t := metav1.Unix(1767225600+sec, 0); return &t }
		pt.Status = tugboatv1.PromotionTargetStatus{
			Version: "1.3.9", Revision: 12, Health: tugboatv1.HealthCurrent, Message: "runs 1.3.9", LastTransitionTime: at(10),
			Action: &tugboatv1.TargetAction{ID: strings.Repeat("cd", 16), Phase: tugboatv1.ActionSucceeded, Revision: 12, Deliveries: 2, LastUpdateTime: at(8)},
			Rollout: &tugboatv1.TargetRollout{
				Wave: 0, ActedAt: *at(3), BaselineRevision: 11, BaselineInstallation: 1, BaselineVersion: "1.3.9",
				Rollback: &tugboatv1.TargetAction{ID: strings.Repeat("ab", 16), Phase: tugboatv1.ActionSucceeded, Revision: 13, Deliveries: 1,
					Message: "rolled back release apps/web to revision 11", LastUpdateTime: at(40)},
			},
		}
		want := pt.Status.DeepCopy()
		g.Expect(c.Status().Update(ctx, pt)).To(Succeed())
		got := &tugboatv1.PromotionTarget{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pt), got)).To(Succeed())
		g.Expect(got.Status).To(Equal(*want))
		g.Expect(got.Spec).To(Equal(minimalPromotionTarget("status-roundtrip").Spec))

		// Bad input: one problem per update, naming the field.
		bad := got.DeepCopy()
		bad.Status.Rollout.Rollback.Phase = "Undone"
		err := c.Status().Update(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`status.rollout.rollback.phase: Unsupported value: "Undone"`))

		bad = got.DeepCopy()
		bad.Status.Rollout.BaselineVersion = strings.Repeat("9", 65)
		err = c.Status().Update(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`status.rollout.baselineVersion: Too long`))

		bad = got.DeepCopy()
		bad.Status.Message = strings.Repeat("m", 1025)
		err = c.Status().Update(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`status.message: Too long`))

		// Its spec names the target and never changes.
		bad = got.DeepCopy()
		bad.Spec.Spoke = "prod-2"
		err = c.Update(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec is immutable"))

		bad = minimalPromotionTarget("no-spoke")
		bad.Spec.Spoke = ""
		err = c.Create(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec.spoke"))
	})

	t.Run("Promotion status is validated too", func(t *testing.T) {
		g := NewWithT(t)
		p := minimalPromotion("status-invalid")
		g.Expect(c.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, p) })

		// One problem per update: the API server skips CEL rules once the
		// schema's own checks failed.
		bad := p.DeepCopy()
		bad.Status.Phase = "Exploded"
		err := c.Status().Update(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`status.phase: Unsupported value: "Exploded"`))

		bad = p.DeepCopy()
		bad.Status.Rollout = &tugboatv1.RolloutStatus{Phase: "Sideways"}
		err = c.Status().Update(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`status.rollout.phase: Unsupported value: "Sideways"`))

		bad = p.DeepCopy()
		bad.Status.Rollout = &tugboatv1.RolloutStatus{FailedTargets: []tugboatv1.FailedTarget{{
			Spoke: "prod-2", Namespace: "apps", Release: "web", Wave: "wave-1", Reason: "Unlucky",
		}}}
		err = c.Status().Update(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`status.rollout.failedTargets[0].reason: Unsupported value: "Unlucky"`))

		bad = p.DeepCopy()
		bad.Status.Phase = tugboatv1.PromotionFailed
		bad.Status.Approval = &tugboatv1.Approval{ApprovedBy: "alice", RejectedBy: "bob", Time: metav1.Unix(1767225600, 0)}
		err = c.Status().Update(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("status.approval"))
		g.Expect(err.Error()).To(ContainSubstring("exactly one of approvedBy and rejectedBy"))
	})

	t.Run("Pipeline holds", func(t *testing.T) {
		g := NewWithT(t)
		p := minimalPipeline("status-holds")
		g.Expect(c.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, p) })

		p.Status.HeldEnvironments = []tugboatv1.HeldEnvironment{{
			Name: "production", Reason: tugboatv1.HoldRolloutFailed, Since: metav1.Unix(1767225600, 0), Version: "1.4.0",
			Message: "promotion web-production-1.4.0 rolled back: the canary failed",
		}}
		want := p.Status.DeepCopy()
		g.Expect(c.Status().Update(ctx, p)).To(Succeed())
		got := &tugboatv1.Pipeline{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.HeldEnvironments).To(Equal(want.HeldEnvironments))

		bad := got.DeepCopy()
		bad.Status.HeldEnvironments[0].Reason = "Bored"
		err := c.Status().Update(ctx, bad)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`status.heldEnvironments[0].reason: Unsupported value: "Bored"`))
	})

	t.Run("ReleaseHistory", func(t *testing.T) {
		g := NewWithT(t)
		rh := minimalReleaseHistory("staging-1.apps.status")
		rh.Spec.Release = "status"
		g.Expect(c.Create(ctx, rh)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, rh) })

		summary := tugboatv1.RevisionSummary{
			Revision: 7, Installation: 1, Chart: "web", ChartVersion: "1.4.0", AppVersion: "2.0.1",
			ValuesDigest: "sha256:" + strings.Repeat("ab", 32), ManifestDigest: "sha256:" + strings.Repeat("cd", 32),
			Status: tugboatv1.ReleaseStatusDeployed, Health: tugboatv1.HealthCurrent,
			FirstDeployed: ptr.To(metav1.Unix(1764547200, 0)), LastDeployed: ptr.To(metav1.Unix(1767225600, 0)),
		}
		rh.Status = tugboatv1.ReleaseHistoryStatus{
			Current: &summary,
			Revisions: []tugboatv1.Revision{{
				RevisionSummary: summary,
				ReleaseUID:      "8d3f1c2e-5b7a-4c9d-9e1f-0a2b3c4d5e6f",
				Events: []tugboatv1.ReleaseEvent{{
					ID: strings.Repeat("0f", 16), Time: metav1.Unix(1767225601, 0), Type: tugboatv1.EventTypeNormal, Reason: "Created",
					Object: &tugboatv1.EventObjectReference{Kind: "Pod", Namespace: "apps", Name: "web-7d9f-x"}, Message: "Pod web-7d9f-x created", Count: 3,
				}},
			}},
			LastEventTime: ptr.To(metav1.Unix(1767225601, 0)),
		}
		want := rh.Status.DeepCopy()
		g.Expect(c.Status().Update(ctx, rh)).To(Succeed())

		got := &tugboatv1.ReleaseHistory{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rh), got)).To(Succeed())
		g.Expect(got.Status).To(Equal(*want))
	})
}

func testDefaults(ctx context.Context, t *testing.T, c client.Client) {
	g := NewWithT(t)
	p := minimalPipeline("defaults")
	p.Spec.Promotion = tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyPullRequest, PullRequest: &tugboatv1.PullRequestStrategy{
		URL: "https://git.example.com/org/fleet.git", Provider: tugboatv1.GitProviderGitHub, SecretRef: tugboatv1.LocalSecretReference{Name: "git"},
	}}
	p.Spec.Environments[1].Promotion = &tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyHelm, Helm: &tugboatv1.HelmStrategy{}}
	p.Spec.Environments[1].Rollout = &tugboatv1.Rollout{Canary: &tugboatv1.CanaryWave{Count: ptr.To[int32](1)}}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(ctx, p) })

	got := &tugboatv1.Pipeline{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(got.Spec.Timeout).To(Equal(&metav1.Duration{Duration: 30 * time.Minute}))
	g.Expect(got.Spec.HistoryLimit).To(Equal(ptr.To[int32](10)))
	g.Expect(got.Spec.Promotion.PullRequest.Branch).To(Equal("main"))
	g.Expect(got.Spec.Environments[1].Promotion.Helm.ValuesPolicy).To(Equal(tugboatv1.ValuesPolicyReuse))
	// No rollout stays no rollout (one wave, as before); a rollout gets a
	// 10m progress deadline, no failure budget, and pauses when it fails.
	g.Expect(got.Spec.Environments[0].Rollout).To(BeNil())
	g.Expect(got.Spec.Environments[1].Rollout).To(Equal(&tugboatv1.Rollout{
		Canary:           &tugboatv1.CanaryWave{Count: ptr.To[int32](1)},
		ProgressDeadline: &metav1.Duration{Duration: 10 * time.Minute},
		MaxFailures:      ptr.To(intstr.FromInt32(0)),
		OnFailure:        tugboatv1.RolloutPause,
	}))
	for _, env := range got.Spec.Environments {
		g.Expect(env.Gates.RequireHealthy).To(Equal(ptr.To(true)), "environment %s", env.Name)
		g.Expect(env.Gates.RequireApproval).To(BeFalse())
		g.Expect(env.Gates.SoakTime).To(BeNil())
	}

	s := minimalSpoke("defaults")
	s.Spec.KubeConfigSecretRef = &tugboatv1.SecretKeyReference{Name: "defaults-kubeconfig"}
	g.Expect(c.Create(ctx, s)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(ctx, s) })
	gotSpoke := &tugboatv1.Spoke{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(s), gotSpoke)).To(Succeed())
	g.Expect(gotSpoke.Spec.KubeConfigSecretRef.Key).To(Equal(tugboatv1.DefaultKubeConfigSecretKey))
}

func testImmutable(ctx context.Context, t *testing.T, c client.Client) {
	t.Run("Promotion spec", func(t *testing.T) {
		g := NewWithT(t)
		p := minimalPromotion("immutable")
		g.Expect(c.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, p) })

		p.Spec.Version = "1.5.0"
		err := c.Update(ctx, p)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec is immutable"))
	})
	t.Run("ReleaseHistory spoke", func(t *testing.T) {
		g := NewWithT(t)
		rh := minimalReleaseHistory("staging-1.apps.immutable")
		rh.Spec.Release = "immutable"
		g.Expect(c.Create(ctx, rh)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, rh) })

		rh.Spec.Spoke = "staging-2"
		err := c.Update(ctx, rh)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec.spoke"))
		g.Expect(err.Error()).To(ContainSubstring("spoke is immutable"))

		// A change elsewhere in the spec is fine.
		rh.Spec.Spoke = "staging-1"
		rh.Spec.HelmRelease = &tugboatv1.ObjectReference{Name: "immutable"}
		g.Expect(c.Update(ctx, rh)).To(Succeed())
	})
}
