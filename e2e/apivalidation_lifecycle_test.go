package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// TestAPIValidation_lifecycleSteps checks the lifecycle-step API (issue 25)
// against a real kube-apiserver: the steps of an environment, a
// Promotion's status.steps, Lifecycles and LifecycleEvents. Each bad input
// is refused with a message naming the field and what is wrong; a full
// Pipeline with steps and a full LifecycleEvent round-trip unchanged; an
// event's spec stays immutable.
func TestAPIValidation_lifecycleSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real API server")
	}
	c := harness.StartT(t, harness.Options{Name: "api-steps", ControlPlaneOnly: true, TugboatCRDs: true})
	ctx := context.Background()

	t.Run("rejects invalid objects, naming the field", func(t *testing.T) { testStepsRejectsInvalid(ctx, t, c.Client) })
	t.Run("round-trips steps, lifecycles and events", func(t *testing.T) { testStepsRoundTrip(ctx, t, c.Client) })
	t.Run("refuses bad step and event status", func(t *testing.T) { testStepsStatus(ctx, t, c.Client) })
	t.Run("metrics steps", func(t *testing.T) { testMetricsSteps(ctx, t, c.Client) })
	t.Run("keeps an event's spec immutable", func(t *testing.T) {
		g := NewWithT(t)
		ev := minimalLifecycleEvent("immutable-event")
		g.Expect(c.Client.Create(ctx, ev)).To(Succeed())
		t.Cleanup(func() { _ = c.Client.Delete(ctx, ev) })
		ev.Spec.Version = "9.9.9"
		err := c.Client.Update(ctx, ev)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec is immutable"))
	})
}

// stepsWith is a valid Pipeline whose production environment has one
// external pre step and one webhook post step, which mutate breaks.
func stepsWith(name string, mutate func(s *tugboatv1.Steps)) client.Object {
	return pipelineWith(name, func(p *tugboatv1.Pipeline) {
		s := &tugboatv1.Steps{
			Pre: []tugboatv1.Step{{Name: "migrate", Type: tugboatv1.StepExternal,
				External: &tugboatv1.ExternalStep{Lifecycle: "db-migrate"}}},
			Post: []tugboatv1.Step{{Name: "qa", Type: tugboatv1.StepWebhook,
				Webhook: &tugboatv1.WebhookStep{URL: "https://qa.example.com/tugboat"}}},
		}
		mutate(s)
		p.Spec.Environments[1].Steps = s
	})
}

// helmStepsWith is stepsWith in an environment whose strategy is helm.
func helmStepsWith(name string, mutate func(s *tugboatv1.Steps)) client.Object {
	p := stepsWith(name, mutate).(*tugboatv1.Pipeline)
	p.Spec.Environments[1].Promotion = &tugboatv1.PromotionStrategy{Type: tugboatv1.StrategyHelm,
		Helm: &tugboatv1.HelmStrategy{Repository: "https://charts.example.com", Chart: "web"}}
	return p
}

func minimalLifecycle(name string) *tugboatv1.Lifecycle {
	return &tugboatv1.Lifecycle{ObjectMeta: meta(name), Spec: tugboatv1.LifecycleSpec{EventKey: "db-migrate"}}
}

func minimalLifecycleEvent(name string) *tugboatv1.LifecycleEvent {
	return &tugboatv1.LifecycleEvent{ObjectMeta: meta(name), Spec: tugboatv1.LifecycleEventSpec{
		Lifecycle: "db-migrate", EventKey: "db-migrate", Promotion: "web-production-1.4.0", Pipeline: "web",
		Environment: "production", Version: "1.4.0", Step: "migrate", Stage: tugboatv1.StepStagePre, Attempt: 1,
		Targets:     []tugboatv1.EventTarget{{Spoke: "prod-1", Namespace: "apps", Release: "web"}},
		TargetCount: 1, Deadline: metav1.Unix(1767225600, 0),
	}}
}

func testStepsRejectsInvalid(ctx context.Context, t *testing.T, c client.Client) {
	step := func(name string) tugboatv1.Step {
		return tugboatv1.Step{Name: name, Type: tugboatv1.StepExternal, External: &tugboatv1.ExternalStep{Lifecycle: "db-migrate"}}
	}
	cases := []struct {
		name string
		obj  client.Object
		want []string
	}{
		{
			name: "a helmTest step in an environment whose strategy is not helm",
			obj:  stepsWith("step-helmtest-kube", func(s *tugboatv1.Steps) { s.Post[0] = tugboatv1.Step{Name: "smoke", Type: tugboatv1.StepHelmTest} }),
			want: []string{"spec.environments", "a helmTest step needs the environment's strategy to be helm"},
		},
		{
			name: "a helmTest pre step",
			obj: helmStepsWith("step-helmtest-pre", func(s *tugboatv1.Steps) {
				s.Pre[0] = tugboatv1.Step{Name: "smoke", Type: tugboatv1.StepHelmTest}
			}),
			want: []string{"spec.environments[1].steps.pre", "a helmTest step runs as a post step only"},
		},
		{
			name: "helmTest configuration on a webhook step",
			obj: helmStepsWith("step-helmtest-webhook", func(s *tugboatv1.Steps) {
				s.Post[0].HelmTest = &tugboatv1.HelmTestStep{Waves: tugboatv1.HelmTestAll}
			}),
			want: []string{"spec.environments[1].steps.post[0].helmTest", "helmTest is allowed only when type is helmTest"},
		},
		{
			name: "an unknown helmTest waves",
			obj: helmStepsWith("step-helmtest-waves", func(s *tugboatv1.Steps) {
				s.Post[0] = tugboatv1.Step{Name: "smoke", Type: tugboatv1.StepHelmTest, HelmTest: &tugboatv1.HelmTestStep{Waves: "Last"}}
			}),
			want: []string{"spec.environments[1].steps.post[0].helmTest.waves", `Unsupported value: "Last"`, `supported values: "Canary", "All", "Each"`},
		},
		{
			name: "an unknown step type",
			obj:  stepsWith("step-shell", func(s *tugboatv1.Steps) { s.Pre[0].Type = "shell" }),
			want: []string{"spec.environments[1].steps.pre[0].type", `Unsupported value: "shell"`},
		},
		{
			name: "an external step without its configuration",
			obj:  stepsWith("step-no-external", func(s *tugboatv1.Steps) { s.Pre[0].External = nil }),
			want: []string{"spec.environments[1].steps.pre[0].external", "external is required when type is external, and forbidden otherwise"},
		},
		{
			name: "a webhook step with an external configuration",
			obj: stepsWith("step-both", func(s *tugboatv1.Steps) {
				s.Post[0].External = &tugboatv1.ExternalStep{Lifecycle: "db-migrate"}
			}),
			want: []string{"spec.environments[1].steps.post[0].external", "external is required when type is external, and forbidden otherwise"},
		},
		{
			name: "a webhook step without its configuration",
			obj:  stepsWith("step-no-webhook", func(s *tugboatv1.Steps) { s.Post[0].Webhook = nil }),
			want: []string{"spec.environments[1].steps.post[0].webhook", "webhook is required when type is webhook, and forbidden otherwise"},
		},
		{
			name: "a webhook URL that is not http(s)",
			obj:  stepsWith("step-ftp", func(s *tugboatv1.Steps) { s.Post[0].Webhook.URL = "ftp://qa.example.com" }),
			want: []string{"spec.environments[1].steps.post[0].webhook.url", "should match"},
		},
		{
			name: "a step name used in pre and post",
			obj:  stepsWith("step-dup-stages", func(s *tugboatv1.Steps) { s.Post[0].Name = "migrate" }),
			want: []string{"spec.environments[1].steps", "step names must be unique across pre and post"},
		},
		{
			name: "a step name used twice in pre",
			obj:  stepsWith("step-dup-pre", func(s *tugboatv1.Steps) { s.Pre = append(s.Pre, step("migrate")) }),
			want: []string{"spec.environments[1].steps.pre[1]", "Duplicate value"},
		},
		{
			name: "more than 10 steps in a stage",
			obj: stepsWith("step-eleven", func(s *tugboatv1.Steps) {
				s.Pre = nil
				for i := range 11 {
					s.Pre = append(s.Pre, step(fmt.Sprintf("check-%d", i)))
				}
			}),
			want: []string{"spec.environments[1].steps.pre", "must have at most 10 items"},
		},
		{
			name: "a step name that is not a DNS label",
			obj:  stepsWith("step-bad-name", func(s *tugboatv1.Steps) { s.Pre[0].Name = "Migrate_DB" }),
			want: []string{"spec.environments[1].steps.pre[0].name", "should match"},
		},
		{
			name: "a zero timeout",
			obj:  stepsWith("step-zero-timeout", func(s *tugboatv1.Steps) { s.Pre[0].Timeout = &metav1.Duration{} }),
			want: []string{"spec.environments[1].steps.pre[0].timeout", "timeout must be positive and at most 24h"},
		},
		{
			name: "a timeout over a day",
			obj:  stepsWith("step-long-timeout", func(s *tugboatv1.Steps) { s.Pre[0].Timeout = &metav1.Duration{Duration: 25 * time.Hour} }),
			want: []string{"spec.environments[1].steps.pre[0].timeout", "timeout must be positive and at most 24h"},
		},
		{
			name: "more than 10 retries",
			obj:  stepsWith("step-retries", func(s *tugboatv1.Steps) { s.Pre[0].Retries = 11 }),
			want: []string{"spec.environments[1].steps.pre[0].retries", "less than or equal to 10"},
		},
		{
			name: "negative retries",
			obj:  stepsWith("step-neg-retries", func(s *tugboatv1.Steps) { s.Pre[0].Retries = -1 }),
			want: []string{"spec.environments[1].steps.pre[0].retries", "greater than or equal to 0"},
		},
		{
			name: "an external step naming a lifecycle that is not a DNS label",
			obj:  stepsWith("step-bad-lifecycle", func(s *tugboatv1.Steps) { s.Pre[0].External.Lifecycle = "DB migrate" }),
			want: []string{"spec.environments[1].steps.pre[0].external.lifecycle", "should match"},
		},
		{
			name: "a lifecycle without an event key",
			obj:  func() client.Object { l := minimalLifecycle("lc-no-key"); l.Spec.EventKey = ""; return l }(),
			want: []string{"spec.eventKey"},
		},
		{
			name: "a lifecycle with an event key holding a space",
			obj:  func() client.Object { l := minimalLifecycle("lc-bad-key"); l.Spec.EventKey = "db migrate"; return l }(),
			want: []string{"spec.eventKey", "should match"},
		},
		{
			name: "a lifecycle with a negative timeout",
			obj: func() client.Object {
				l := minimalLifecycle("lc-neg-timeout")
				l.Spec.Timeout = &metav1.Duration{Duration: -time.Minute}
				return l
			}(),
			want: []string{"spec.timeout", "timeout must be positive and at most 24h"},
		},
		{
			name: "a lifecycle with a description over 1 KiB",
			obj: func() client.Object {
				l := minimalLifecycle("lc-long-desc")
				l.Spec.Description = strings.Repeat("d", 1025)
				return l
			}(),
			want: []string{"spec.description", "Too long"},
		},
		{
			name: "an event with more than 100 targets",
			obj: func() client.Object {
				ev := minimalLifecycleEvent("ev-targets")
				for i := range 100 {
					ev.Spec.Targets = append(ev.Spec.Targets, tugboatv1.EventTarget{Spoke: fmt.Sprintf("prod-%d", i+2), Namespace: "apps", Release: "web"})
				}
				return ev
			}(),
			want: []string{"spec.targets", "must have at most 100 items"},
		},
		{
			name: "an event of attempt 0",
			obj:  func() client.Object { ev := minimalLifecycleEvent("ev-attempt"); ev.Spec.Attempt = 0; return ev }(),
			want: []string{"spec.attempt", "greater than or equal to 1"},
		},
		{
			name: "an event of an unknown stage",
			obj:  func() client.Object { ev := minimalLifecycleEvent("ev-stage"); ev.Spec.Stage = "During"; return ev }(),
			want: []string{"spec.stage", `Unsupported value: "During"`},
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

func testStepsRoundTrip(ctx context.Context, t *testing.T, c client.Client) {
	t.Run("Pipeline with steps", func(t *testing.T) {
		g := NewWithT(t)
		p := stepsWith("steps-roundtrip", func(s *tugboatv1.Steps) {
			s.Pre[0].Timeout, s.Pre[0].Retries = &metav1.Duration{Duration: 15 * time.Minute}, 2
			s.Post[0].Webhook.SecretRef = &tugboatv1.LocalSecretReference{Name: "qa-hook"}
		}).(*tugboatv1.Pipeline)
		want := p.Spec.Environments[1].Steps.DeepCopy()
		g.Expect(c.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, p) })
		got := &tugboatv1.Pipeline{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Spec.Environments[1].Steps).To(Equal(want))
	})
	t.Run("Pipeline with a helmTest step", func(t *testing.T) {
		g := NewWithT(t)
		p := helmStepsWith("steps-helmtest-roundtrip", func(s *tugboatv1.Steps) {
			s.Post = append(s.Post,
				tugboatv1.Step{Name: "smoke", Type: tugboatv1.StepHelmTest, Timeout: &metav1.Duration{Duration: 5 * time.Minute}},
				tugboatv1.Step{Name: "smoke-all", Type: tugboatv1.StepHelmTest, HelmTest: &tugboatv1.HelmTestStep{Waves: tugboatv1.HelmTestAll}},
				tugboatv1.Step{Name: "smoke-each", Type: tugboatv1.StepHelmTest, HelmTest: &tugboatv1.HelmTestStep{Waves: tugboatv1.HelmTestEach}})
		}).(*tugboatv1.Pipeline)
		want := p.Spec.Environments[1].Steps.DeepCopy()
		g.Expect(c.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, p) })
		got := &tugboatv1.Pipeline{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Spec.Environments[1].Steps).To(Equal(want))
	})
	t.Run("Lifecycle", func(t *testing.T) {
		g := NewWithT(t)
		l := minimalLifecycle("lc-roundtrip")
		l.Spec.Timeout, l.Spec.Description = &metav1.Duration{Duration: 20 * time.Minute}, "runs the schema migration"
		want := l.Spec
		g.Expect(c.Create(ctx, l)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, l) })
		got := &tugboatv1.Lifecycle{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(l), got)).To(Succeed())
		g.Expect(got.Spec).To(Equal(want))
	})
}

func testStepsStatus(ctx context.Context, t *testing.T, c client.Client) {
	t.Run("LifecycleEvent Done without finishedBy", func(t *testing.T) {
		g := NewWithT(t)
		ev := minimalLifecycleEvent("ev-status")
		g.Expect(c.Create(ctx, ev)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, ev) })
		ev.Status = tugboatv1.LifecycleEventStatus{Phase: tugboatv1.EventDone, Message: "migrated"}
		err := c.Status().Update(ctx, ev)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("a Done or Error event needs finishedBy and finishedAt"))

		ev.Status.Phase = "Skipped"
		err = c.Status().Update(ctx, ev)
		g.Expect(err).To(MatchError(ContainSubstring(`status.phase: Unsupported value: "Skipped"`)))

		at := metav1.Unix(1767225600, 0)
		ev.Status = tugboatv1.LifecycleEventStatus{Phase: tugboatv1.EventError, Message: "lock held", FinishedBy: "alice", FinishedAt: &at}
		g.Expect(c.Status().Update(ctx, ev)).To(Succeed())
		got := &tugboatv1.LifecycleEvent{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(ev), got)).To(Succeed())
		g.Expect(got.Status.FinishedBy).To(Equal("alice"))
		g.Expect(got.Status.Phase).To(Equal(tugboatv1.EventError))
	})
	t.Run("Promotion status.steps", func(t *testing.T) {
		g := NewWithT(t)
		p := minimalPromotion("steps-status")
		g.Expect(c.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(ctx, p) })
		ok := tugboatv1.StepStatus{Name: "migrate", Stage: tugboatv1.StepStagePre, Type: tugboatv1.StepExternal, Phase: tugboatv1.StepRunning, Attempts: 1}

		long := ok
		long.Message = strings.Repeat("m", 1025)
		p.Status.Steps = []tugboatv1.StepStatus{long}
		err := c.Status().Update(ctx, p)
		g.Expect(err).To(MatchError(ContainSubstring("status.steps[0].message: Too long")))

		bad := ok
		bad.Phase = "Skipped"
		p.Status.Steps = []tugboatv1.StepStatus{bad}
		err = c.Status().Update(ctx, p)
		g.Expect(err).To(MatchError(ContainSubstring(`status.steps[0].phase: Unsupported value: "Skipped"`)))

		p.Status.Steps = []tugboatv1.StepStatus{ok, ok}
		err = c.Status().Update(ctx, p)
		g.Expect(err).To(MatchError(ContainSubstring("status.steps[1]: Duplicate value")))

		p.Status.Steps = []tugboatv1.StepStatus{ok}
		g.Expect(c.Status().Update(ctx, p)).To(Succeed())
	})
}
