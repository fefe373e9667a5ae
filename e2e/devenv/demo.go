package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/bins"
)

// DemoTaintKey is the taint the demo puts on staging's node ("dedicated
// nodes"): every version of the sample chart tolerates it but 1.1.0, the
// demo's bad release, whose pods then never schedule in staging.
const DemoTaintKey = "tugboat.dev/dedicated"

// DemoPromotionTimeout is the sample Pipeline's spec.timeout in the demo:
// how long the failing 1.1.0 promotion into staging waits before it fails.
const DemoPromotionTimeout = 15 * time.Second

// DemoOptions configure RunDemo.
type DemoOptions struct {
	// Env configures the environment; RunDemo sets Spokes (3) and the
	// sample Pipeline's timeout.
	Env Options
	// Out receives the story: each step, live progress lines while it
	// waits, and the timeline at the end. Defaults to io.Discard.
	Out io.Writer
	// Approve approves a Promotion as the hub's kubeconfig user, the way
	// `tugboat approve` does, and returns what it printed. Required.
	Approve func(ctx context.Context, env *Env, promotion string) (string, error)
	// StepTimeout bounds each wait. Defaults to 90s.
	StepTimeout time.Duration
}

// Demo is a finished (or failed) run of the guided demo.
type Demo struct {
	// Env is the environment; RunDemo leaves it running, the caller
	// stops it.
	Env *Env
	// Steps are the steps that ran, in order.
	Steps []DemoStep
	// Start is when the demo started.
	Start time.Time
}

// DemoStep is one step of the demo and what it saw on the hub.
type DemoStep struct {
	Title      string
	Start, End time.Time
	// Facts are what the hub recorded by the end of the step, one line
	// each: "promotion NAME: PHASE", "release SPOKE/NAMESPACE/NAME
	// revision N: CHART VERSION, HEALTH", "hold ENV: MESSAGE",
	// "approved by USER".
	Facts []string
}

// RunDemo runs the guided demo: it brings up a hub and the spokes dev,
// staging and production (production behind an approval gate), installs
// the sample chart 1.0.0 in dev with the helm CLI, follows its promotion to
// staging and to production's approval gate, approves it with
// opts.Approve, upgrades dev to 1.1.0, which never becomes healthy in
// staging (the promotion fails and production keeps 1.0.0), then to 1.2.0,
// which runs healthy in staging but fails staging's smoke test (the
// sample Pipeline's helmTest post step, DemoTestStep): its promotion fails
// with the test Pod's log, and 1.2.0 stops in staging. Last it rolls
// staging back with `helm rollback`, which holds the environment. The
// returned Demo holds the environment, still running, unless Up failed.
func RunDemo(ctx context.Context, opts DemoOptions) (*Demo, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Approve == nil {
		return nil, errors.New("RunDemo needs an Approve function")
	}
	if opts.StepTimeout == 0 {
		opts.StepTimeout = 90 * time.Second
	}
	envOpts := opts.Env
	envOpts.Spokes = 3
	envOpts.NoApproval = false
	envOpts.NoSlackCapture = true
	envOpts.ExternalControllers, envOpts.NoControllers = false, false
	envOpts.PipelineTimeout = DemoPromotionTimeout
	d := &demoRun{Demo: &Demo{Start: time.Now()}, out: opts.Out, opts: opts}
	envOpts.Progress = &prefixWriter{w: opts.Out, prefix: "    "}

	d.begin("Start a hub and the spokes dev, staging and production (production behind an approval gate)")
	env, err := Up(ctx, envOpts)
	if err != nil {
		return d.Demo, err
	}
	d.Env = env
	if env.Helm == "" {
		if env.Helm, err = demoHelm(ctx, envOpts); err != nil {
			return d.Demo, err
		}
	}
	if err := d.setup(ctx); err != nil {
		return d.Demo, err
	}
	d.end()
	for _, step := range []func(context.Context) error{
		d.installInDev, d.promotedToStaging, d.heldAtTheGate, d.approve,
		d.upgradeDev("1.1.0"), d.failsInStaging, d.upgradeDev(DemoFailingTestVersion), d.testFailsInStaging, d.rollBackStaging,
	} {
		if err := step(ctx); err != nil {
			return d.Demo, err
		}
		d.end()
	}
	return d.Demo, nil
}

// demoHelm finds the pinned helm CLI when Up did not build it ($TUGBOAT_K8S_BIN).
func demoHelm(ctx context.Context, opts Options) (string, error) {
	root := opts.RepoRoot
	if root == "" {
		wd, _ := os.Getwd()
		var err error
		if root, err = bins.FindRepoRoot(wd); err != nil {
			return "", fmt.Errorf("the demo runs the helm CLI: %w", err)
		}
	}
	return bins.EnsureHelm(ctx, root, opts.Progress)
}

type demoRun struct {
	*Demo
	out  io.Writer
	opts DemoOptions
	cur  *DemoStep
}

func (d *demoRun) begin(title string) {
	d.Steps = append(d.Steps, DemoStep{Title: title, Start: time.Now()})
	d.cur = &d.Steps[len(d.Steps)-1]
	fmt.Fprintf(d.out, "\n%d. %s\n", len(d.Steps), title)
}

func (d *demoRun) end() {
	d.cur.End = time.Now()
	fmt.Fprintf(d.out, "   done in %s\n", seconds(d.cur.End.Sub(d.cur.Start)))
}

// fact records and prints what the hub recorded.
func (d *demoRun) fact(format string, args ...any) {
	f := fmt.Sprintf(format, args...)
	d.cur.Facts = append(d.cur.Facts, f)
	fmt.Fprintf(d.out, "   ✔ %s\n", f)
}

// say prints a line of the story.
func (d *demoRun) say(format string, args ...any) {
	fmt.Fprintf(d.out, "   "+format+"\n", args...)
}

// setup taints staging's node (its dedicated nodes, which 1.1.0 forgot to
// tolerate).
func (d *demoRun) setup(ctx context.Context) error {
	staging := d.Env.Spokes[1]
	var node corev1.Node
	if err := staging.Client.Get(ctx, client.ObjectKey{Name: staging.NodeName}, &node); err != nil {
		return err
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: DemoTaintKey, Value: "staging", Effect: corev1.TaintEffectNoSchedule})
	if err := staging.Client.Patch(ctx, &node, patch); err != nil {
		return fmt.Errorf("tainting staging's node: %w", err)
	}
	d.say("hub receiver %s; Pipeline %s/%s: dev → staging → production, helm strategy, timeout %s",
		d.Env.HubURL, d.Env.Namespace, d.Env.Pipeline, DemoPromotionTimeout)
	d.say("staging's node is dedicated (taint %s=staging:NoSchedule); demo 1.1.0 forgot the toleration", DemoTaintKey)
	return nil
}

func (d *demoRun) installInDev(ctx context.Context) error {
	d.begin("helm install demo 1.0.0 in dev")
	if err := d.helm(ctx, "dev", "install", DemoChart, d.Env.ChartRepoURL+"/"+DemoChart+"-1.0.0.tgz", "-n", DemoNamespace); err != nil {
		return err
	}
	return d.waitRelease(ctx, "dev", "1.0.0", tugboatv1alpha1.HealthCurrent)
}

func (d *demoRun) promotedToStaging(ctx context.Context) error {
	d.begin("The hub promotes 1.0.0 to staging (the staging agent runs the upgrade)")
	if err := d.waitPromotion(ctx, "staging", "1.0.0", tugboatv1alpha1.PromotionSucceeded); err != nil {
		return err
	}
	return d.waitRelease(ctx, "staging", "1.0.0", tugboatv1alpha1.HealthCurrent)
}

func (d *demoRun) heldAtTheGate(ctx context.Context) error {
	d.begin("1.0.0 waits at production's approval gate")
	return d.waitPromotion(ctx, "production", "1.0.0", tugboatv1alpha1.PromotionWaitingApproval)
}

func (d *demoRun) approve(ctx context.Context) error {
	name := d.promotionName("production", "1.0.0")
	d.begin("tugboat approve " + name + " (as the hub's authenticated kubeconfig user)")
	out, err := d.opts.Approve(ctx, d.Env, name)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line != "" {
			d.say("| %s", line)
		}
	}
	if err != nil {
		return fmt.Errorf("tugboat approve %s: %w", name, err)
	}
	if err := d.waitPromotion(ctx, "production", "1.0.0", tugboatv1alpha1.PromotionSucceeded); err != nil {
		return err
	}
	var pr tugboatv1alpha1.Promotion
	if err := d.Env.Hub.Client.Get(ctx, client.ObjectKey{Namespace: d.Env.Namespace, Name: name}, &pr); err != nil {
		return err
	}
	if pr.Status.Approval != nil {
		d.fact("approved by %s", pr.Status.Approval.ApprovedBy)
	}
	return d.waitRelease(ctx, "production", "1.0.0", tugboatv1alpha1.HealthCurrent)
}

// upgradeDev is the step that upgrades dev to version with the helm CLI.
func (d *demoRun) upgradeDev(version string) func(context.Context) error {
	return func(ctx context.Context) error {
		d.begin("helm upgrade demo " + version + " in dev")
		if err := d.helm(ctx, "dev", "upgrade", DemoChart, d.Env.ChartRepoURL+"/"+DemoChart+"-"+version+".tgz", "-n", DemoNamespace); err != nil {
			return err
		}
		return d.waitRelease(ctx, "dev", version, tugboatv1alpha1.HealthCurrent)
	}
}

func (d *demoRun) failsInStaging(ctx context.Context) error {
	d.begin("1.1.0 never becomes healthy in staging: the promotion fails, production keeps 1.0.0")
	if err := d.waitPromotion(ctx, "staging", "1.1.0", tugboatv1alpha1.PromotionFailed); err != nil {
		return err
	}
	if err := d.recordRelease(ctx, "staging"); err != nil {
		return err
	}
	if err := d.recordRelease(ctx, "production"); err != nil {
		return err
	}
	return d.noPromotion(ctx, "production", "1.1.0")
}

// DemoFailingTestVersion is the sample chart's version whose smoke test
// fails (its test Pod carries tugboat.dev/test-result: fail, which the
// harness's kwok stages honor): the demo shows it stopped in staging.
const DemoFailingTestVersion = "1.2.0"

// testFailsInStaging follows 1.2.0 into staging, where it runs healthy but
// its smoke test fails: the promotion fails, naming the step, the failing
// test Pod and the end of its log (waitPromotion prints them whole), and
// the Pipeline does not promote 1.2.0 out of staging.
func (d *demoRun) testFailsInStaging(ctx context.Context) error {
	v := DemoFailingTestVersion
	d.begin(v + " runs healthy in staging, but its smoke test fails: " + v + " stops there, production keeps 1.0.0")
	if err := d.waitPromotion(ctx, "staging", v, tugboatv1alpha1.PromotionFailed); err != nil {
		return err
	}
	if err := d.recordRelease(ctx, "staging"); err != nil {
		return err
	}
	if err := d.waitStopped(ctx, v); err != nil {
		return err
	}
	if err := d.recordRelease(ctx, "production"); err != nil {
		return err
	}
	return d.noPromotion(ctx, "production", v)
}

// noPromotion checks, and records, that the hub created no Promotion of
// version into env.
func (d *demoRun) noPromotion(ctx context.Context, env, version string) error {
	var pr tugboatv1alpha1.Promotion
	err := d.Env.Hub.Client.Get(ctx, client.ObjectKey{Namespace: d.Env.Namespace, Name: d.promotionName(env, version)}, &pr)
	switch {
	case err == nil:
		return fmt.Errorf("expected no promotion of %s into %s, found %s (phase %s)", version, env, pr.Name, pr.Status.Phase)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("looking for a promotion of %s into %s: %w", version, env, err)
	}
	d.fact("no promotion of %s into %s", version, env)
	return nil
}

func (d *demoRun) rollBackStaging(ctx context.Context) error {
	d.begin("helm rollback demo 1 in staging: the hub holds staging")
	if err := d.helm(ctx, "staging", "rollback", DemoChart, "1", "-n", DemoNamespace); err != nil {
		return err
	}
	if err := d.waitRelease(ctx, "staging", "1.0.0", tugboatv1alpha1.HealthCurrent); err != nil {
		return err
	}
	return d.waitHold(ctx, "staging")
}

// helm runs the helm CLI against a spoke, with its caches in the
// environment's directory.
func (d *demoRun) helm(ctx context.Context, spoke string, args ...string) error {
	args = append([]string{"--kubeconfig", d.Env.KubeconfigFor(spoke)}, args...)
	d.say("$ helm %s", strings.Join(args[2:], " ")+" --kubeconfig "+filepath.Base(d.Env.KubeconfigFor(spoke)))
	cmd := exec.CommandContext(ctx, d.Env.Helm, args...)
	home := filepath.Join(d.Env.Dir, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("helm %s: %w\n%s", strings.Join(args[2:], " "), err, out.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasPrefix(line, "STATUS:") || strings.HasPrefix(line, "REVISION:") || strings.HasPrefix(line, "Rollback was") {
			d.say("| %s", line)
		}
	}
	return nil
}

func (d *demoRun) promotionName(env, version string) string {
	return d.Env.Pipeline + "-" + env + "-" + version
}
