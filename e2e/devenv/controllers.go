package devenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/harness"
)

// DefaultNamespace holds the dev environment's Spokes on the hub.
const DefaultNamespace = "tugboat-system"

// startControllers registers a Spoke per spoke cluster on the hub, starts
// the hub process against the hub cluster and an agent process against
// each spoke, and waits until every Spoke is Ready.
func (e *Env) startControllers(ctx context.Context, opts Options) error {
	exe := opts.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	logDir := filepath.Join(e.Dir, "logs")
	keyDir := filepath.Join(e.Dir, "keys")
	for _, d := range []string{logDir, keyDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	hc := e.Hub.Client
	if err := hc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, s := range e.Spokes {
		sp := &tugboatv1alpha1.Spoke{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: s.Name},
			Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: s.Name + "-key"}},
		}
		if err := hc.Create(ctx, sp); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering spoke %s: %w", s.Name, err)
		}
		// The demo namespace exists on every spoke: an agent installs a
		// missing release (--actions-install-missing) but creates no
		// namespace.
		if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s on spoke %s: %w", DemoNamespace, s.Name, err)
		}
	}

	repo, err := StartChartRepo(filepath.Join(e.Dir, "charts"))
	if err != nil {
		return fmt.Errorf("serving the sample chart repository: %w", err)
	}
	e.repo, e.ChartRepoURL = repo, repo.URL
	fmt.Fprintf(opts.Progress, "serving the sample chart %s %v at %s\n", DemoChart, DemoVersions, repo.URL)

	port := opts.HubPort
	if port == 0 {
		if port, err = freePort(); err != nil {
			return err
		}
	}
	hubAddr := fmt.Sprintf("127.0.0.1:%d", port)
	e.HubURL = "http://" + hubAddr
	hubArgs := []string{
		// As the hub chart's ServiceAccount, with the chart's RBAC and
		// policies (installHubIdentity): the local hub has no more rights
		// than an installed one.
		"hub", "--kubeconfig", e.HubProcessKubeconfig(),
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--receiver-bind-address=" + hubAddr,
	}
	if !opts.NoSlackCapture {
		if e.slack, err = startSlackCapture(e.Dir); err != nil {
			return fmt.Errorf("starting the Slack stand-in: %w", err)
		}
		e.SlackCapture = e.slack.Path
		hubArgs = append(hubArgs, "--slack-api-url="+e.slack.URL, "--egress-allow-loopback")
		fmt.Fprintf(opts.Progress, "Slack messages of the sample pipeline go to %s\n", e.slack.Path)
	}
	e.commands = append(e.commands, CommandState{Name: "hub", Args: hubArgs})
	for _, s := range e.Spokes {
		e.commands = append(e.commands, CommandState{Name: "agent-" + s.Name, Args: e.agentArgs(s.Name, filepath.Join(keyDir, s.Name+".key"))})
	}
	if opts.ExternalControllers {
		return e.prepareExternalControllers(ctx, opts)
	}
	fmt.Fprintf(opts.Progress, "starting the hub (receiver %s)\n", e.HubURL)
	if err := e.start(exe, "hub", logDir, hubArgs); err != nil {
		return err
	}

	for i, s := range e.Spokes {
		var key corev1.Secret
		if err := poll(ctx, 30*time.Second, func() bool {
			return hc.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: s.Name + "-key"}, &key) == nil
		}); err != nil {
			return fmt.Errorf("waiting for the hub to generate the key of spoke %s (hub log: %s): %w", s.Name, filepath.Join(logDir, "hub.log"), err)
		}
		keyFile := filepath.Join(keyDir, s.Name+".key")
		if err := os.WriteFile(keyFile, key.Data[tugboatv1alpha1.SpokeKeySecretKey], 0o600); err != nil {
			return err
		}
		fmt.Fprintf(opts.Progress, "starting the agent of %s\n", s.Name)
		if err := e.start(exe, "agent-"+s.Name, logDir, e.commands[i+1].Args); err != nil {
			return err
		}
	}
	if err := e.writeState(); err != nil {
		return err
	}
	for _, s := range e.Spokes {
		err := poll(ctx, 60*time.Second, func() bool {
			var sp tugboatv1alpha1.Spoke
			if err := hc.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: s.Name}, &sp); err != nil {
				return false
			}
			return apimeta.IsStatusConditionTrue(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		})
		if err != nil {
			return fmt.Errorf("waiting for spoke %s to be Ready (agent log: %s): %w", s.Name, filepath.Join(logDir, "agent-"+s.Name+".log"), err)
		}
		fmt.Fprintf(opts.Progress, "spoke %s is Ready on the hub\n", s.Name)
	}
	return e.createSamplePipeline(ctx, opts)
}

// agentArgs are the arguments of the agent of spoke.
func (e *Env) agentArgs(spoke, keyFile string) []string {
	return []string{
		"agent", "--kubeconfig", e.KubeconfigFor(spoke), "--spoke", spoke,
		"--hub-url", e.HubURL, "--hub-insecure-http", "--hub-key-file", keyFile,
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--webhook-bind-address=127.0.0.1:0", "--webhook-url-host=127.0.0.1",
		"--hub-state-interval=10s",
		// The sample pipeline's helm strategy: this spoke's agent may
		// install and upgrade releases in the demo namespace from the
		// local chart repository, and nothing else.
		"--actions-allowed-namespaces=" + DemoNamespace,
		"--actions-allowed-chart-sources=" + e.ChartRepoURL,
		"--actions-install-missing",
	}
}

// prepareExternalControllers readies the environment for a hub and agents
// that someone else runs (`tugboat dev run`, the Tiltfile's no-Docker mode):
// it writes each Spoke's key Secret itself, since no hub runs yet to
// generate it, and the key files the agents read, then records the
// commands in the state file. It waits for nothing.
func (e *Env) prepareExternalControllers(ctx context.Context, opts Options) error {
	for _, s := range e.Spokes {
		key := &corev1.Secret{}
		err := e.Hub.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: s.Name + "-key"}, key)
		if apierrors.IsNotFound(err) {
			raw := make([]byte, 32)
			if _, err := rand.Read(raw); err != nil {
				return err
			}
			// The marks of a key the hub generates (labeled for the Spoke,
			// controlled by it): the agent bootstrap copies no other.
			sp := &tugboatv1alpha1.Spoke{}
			if err := e.Hub.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: s.Name}, sp); err != nil {
				return fmt.Errorf("reading spoke %s: %w", s.Name, err)
			}
			key = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: s.Name + "-key", Labels: map[string]string{tugboatv1alpha1.LabelSpoke: s.Name}},
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: []byte(hex.EncodeToString(raw))},
			}
			if err := controllerutil.SetControllerReference(sp, key, e.Hub.Client.Scheme()); err != nil {
				return err
			}
			err = e.Hub.Client.Create(ctx, key)
		}
		if err != nil {
			return fmt.Errorf("writing the key of spoke %s: %w", s.Name, err)
		}
		if err := os.WriteFile(filepath.Join(e.Dir, "keys", s.Name+".key"), key.Data[tugboatv1alpha1.SpokeKeySecretKey], 0o600); err != nil {
			return err
		}
	}
	if err := e.createSamplePipeline(ctx, opts); err != nil {
		return err
	}
	return e.writeState()
}

// DemoTestStep is the sample Pipeline's helmTest post step on its second
// environment: the sample chart's smoke test.
const DemoTestStep = "smoke"

// createSamplePipeline creates the Pipeline "demo" over the spokes in
// order, promoting the sample chart with the helm strategy (the agents
// upgrade their own releases); the second environment runs the chart's
// smoke test (a helmTest post step, DemoTestStep) after each upgrade; the last
// environment of three or more requires approval unless opts.NoApproval.
func (e *Env) createSamplePipeline(ctx context.Context, opts Options) error {
	if len(e.Spokes) < 2 {
		return nil
	}
	p := &tugboatv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: DemoChart},
		Spec: tugboatv1alpha1.PipelineSpec{
			Release: DemoChart,
			Promotion: tugboatv1alpha1.PromotionStrategy{
				Type: tugboatv1alpha1.StrategyHelm,
				Helm: &tugboatv1alpha1.HelmStrategy{Repository: e.ChartRepoURL, Chart: DemoChart},
			},
		},
	}
	if opts.PipelineTimeout > 0 {
		p.Spec.Timeout = &metav1.Duration{Duration: opts.PipelineTimeout}
	}
	for i, s := range e.Spokes {
		env := tugboatv1alpha1.Environment{Name: s.Name, Targets: []tugboatv1alpha1.Target{{Spoke: s.Name, Namespace: DemoNamespace}}}
		if i == 1 {
			// The second environment (staging) runs the chart's smoke test
			// after each upgrade: a version whose test fails (1.2.0) stops
			// there (docs/lifecycle.md).
			env.Steps = &tugboatv1alpha1.Steps{Post: []tugboatv1alpha1.Step{{Name: DemoTestStep, Type: tugboatv1alpha1.StepHelmTest}}}
		}
		if len(e.Spokes) >= 3 && i == len(e.Spokes)-1 && !opts.NoApproval {
			env.Gates.RequireApproval = true
			if e.slack != nil {
				env.Gates.Approvers = &tugboatv1alpha1.Approvers{SlackUsers: []string{DemoSlackApprover}}
			}
		}
		p.Spec.Environments = append(p.Spec.Environments, env)
	}
	if e.slack != nil {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: DemoChart + "-slack"},
			Data: map[string][]byte{
				"token":         []byte("xoxb-tugboat-dev-capture"),
				"signingSecret": []byte(DemoSlackSigningSecret),
			},
		}
		if err := e.Hub.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the sample Slack secret: %w", err)
		}
		p.Spec.Notify = []tugboatv1alpha1.Notifier{{
			Name: "slack", Type: tugboatv1alpha1.NotifierSlack,
			Slack: &tugboatv1alpha1.SlackNotifier{SecretRef: tugboatv1alpha1.LocalSecretReference{Name: secret.Name}, Channel: "#tugboat-demo"},
			Events: []tugboatv1alpha1.NotifyEvent{
				tugboatv1alpha1.EventPromotionCreated, tugboatv1alpha1.EventPromotionWaitingApproval, tugboatv1alpha1.EventPromotionRunning,
				tugboatv1alpha1.EventPromotionSucceeded, tugboatv1alpha1.EventPromotionFailed, tugboatv1alpha1.EventPromotionAborted,
				tugboatv1alpha1.EventHoldStarted, tugboatv1alpha1.EventHoldReleased,
				tugboatv1alpha1.EventDeploymentStarted, tugboatv1alpha1.EventDeploymentHealthy, tugboatv1alpha1.EventDeploymentFailed,
			},
		}}
	}
	if err := e.Hub.Client.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the sample pipeline: %w", err)
	}
	e.Pipeline = p.Name
	return nil
}

// The sample Pipeline's Slack app, as the Slack stand-in plays it: its
// signing secret and the Slack user ID allowed to approve into the last
// environment (sign an interaction with them to click Approve by hand).
const (
	DemoSlackSigningSecret = "tugboat-dev-signing-secret" //nolint:gosec // the local stand-in's value, published on purpose
	DemoSlackApprover      = "UDEVAPPROVER"
)

// DemoNamespace is where the sample release lives on every spoke.
const DemoNamespace = "demo"

// start runs one tugboat process of the environment.
func (e *Env) start(exe, name, logDir string, args []string) error {
	logPath := filepath.Join(logDir, name+".log")
	p, err := harness.StartProcess(name, exe, args, logPath)
	if err != nil {
		return err
	}
	e.procs = append(e.procs, p)
	e.procState = append(e.procState, ProcessState{Name: name, PID: p.PID(), Log: logPath})
	return e.writeState()
}

// poll calls check every 100ms until it is true or timeout passes.
func poll(ctx context.Context, timeout time.Duration, check func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !check() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
