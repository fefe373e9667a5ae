//go:build !agentonly

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// spokeAdd is what `tugboat spoke add` was asked to do.
type spokeAdd struct {
	hf      hubFlags
	hubURL  string
	timeout time.Duration
	flux    fluxSetup
}

func newSpokeAddCommand() *cobra.Command {
	var o spokeAdd
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Register a spoke on the hub and print the command that installs its agent",
		Long: `add creates the Spoke NAME in the namespace on the hub (and the namespace, if
it is missing), waits (--timeout) until the hub has generated its key Secret
NAME-key, and prints the command that installs the agent on the spoke cluster.
The key is never printed: the install command copies it.

Adding a Spoke that exists changes nothing and prints the command again. A
spoke name is unique across the hub: a Spoke of that name in another namespace
is refused.

With --flux the spoke is agentless: add also gives it a Flux key of its own
(key "fluxKey" of NAME-key, at least 32 bytes, never the agent's) and writes
to the spoke cluster (--spoke-context/--spoke-kubeconfig, default the current
context), in --flux-namespace, what Flux notification-controller needs to
report HelmRelease events to the hub: Secret tugboat-flux-key (its "token" is
the Flux key), a Provider "tugboat" of type generic-hmac posting to
<hub-url>/v1/flux/NAME, and an Alert "tugboat-helmreleases" on the
HelmReleases of --helmrelease-namespaces. -o yaml prints them instead (for a
GitOps commit; the Secret holds the key in clear).`,
		Example: `  tugboat spoke add staging-1 -n fleet --hub-url https://tugboat-hub.example.com
  tugboat spoke add edge-1 -n fleet --flux --hub-url https://tugboat-hub.example.com --spoke-context edge-1
  tugboat spoke add edge-1 -n fleet --flux --hub-url https://tugboat-hub.example.com -o yaml > flux/tugboat.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, args[0])
		},
	}
	o.hf.bind(cmd)
	cmd.Flags().StringVar(&o.hubURL, "hub-url", "", "the hub receiver's URL as the spoke reaches it (https://...), for the printed install command (and, with --flux, the Provider's address)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for the hub to generate the spoke's key Secret")
	o.flux.bind(cmd)
	return cmd
}

func (o *spokeAdd) validate(name string) error {
	errs := []error{validateSpokeName(name)}
	if o.hubURL != "" {
		if u, err := url.Parse(o.hubURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--hub-url %q must be an absolute http(s) URL of the hub's receiver", o.hubURL))
		}
	}
	if o.timeout <= 0 {
		errs = append(errs, errors.New("--timeout must be positive"))
	}
	errs = append(errs, o.flux.validate(o.hubURL))
	return errors.Join(errs...)
}

func (o *spokeAdd) run(cmd *cobra.Command, name string) error {
	if err := o.validate(name); err != nil {
		return usageErrorf("%w", err)
	}
	s, err := o.hf.connect()
	if err != nil {
		return err
	}
	if o.flux.enabled {
		return o.flux.run(cmd, s, name, o.hubURL, o.timeout)
	}
	output := outputFlag(o.flux.output)
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	if output == "json" || output == "yaml" {
		out = cmd.ErrOrStderr() // progress; the result goes to stdout
	}
	sp, err := ensureSpoke(ctx, out, s, name)
	if err != nil {
		return err
	}
	if _, err := waitForKeySecret(ctx, out, s, sp, o.timeout); err != nil {
		return err
	}
	install := agentInstallCommand(agentInstallArgs{spoke: name, namespace: s.namespace, hubURL: o.hubURL, hub: o.hf.kube})
	if done, err := output.structured(cmd.OutOrStdout(), spokeAdded{Namespace: sp.Namespace, Name: name, KeySecret: sp.Spec.KeySecretRef.Name, InstallCommand: install}); done {
		return err
	}
	fmt.Fprintf(out, "\nInstall its agent on the spoke cluster (set --spoke-context to the spoke's context):\n  %s\n", install)
	return nil
}

// spokeAdded is what `tugboat spoke add` prints with -o json|yaml (without
// --flux).
type spokeAdded struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	KeySecret string `json:"keySecret"`
	// InstallCommand installs the agent on the spoke cluster (its
	// --spoke-context to fill in).
	InstallCommand string `json:"installCommand"`
}

// agentInstallArgs is what the printed install command needs.
type agentInstallArgs struct {
	spoke, namespace, hubURL string
	// hub is how this command reached the hub: the install command reaches
	// it the same way.
	hub kubeFlags
}

// agentInstallCommand is the one place that knows how to install an agent
// from the command line: `spoke add` prints it.
func agentInstallCommand(a agentInstallArgs) string {
	hubURL := "<hub-url>" // a placeholder to replace
	if a.hubURL != "" {
		hubURL = shellQuote(a.hubURL)
	}
	args := []string{"tugboat", "install", "agent", "--spoke", a.spoke, "-n", a.namespace, "--hub-url", hubURL}
	if a.hub.kubeconfig != "" {
		args = append(args, "--kubeconfig", shellQuote(a.hub.kubeconfig))
	}
	if a.hub.context != "" {
		args = append(args, "--hub-context", shellQuote(a.hub.context))
	}
	args = append(args, "--spoke-context", "<spoke-context>")
	return strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain
// characters.
func shellQuote(s string) string {
	plain := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r)
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !plain(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ensureSpoke creates Spoke name in the session's namespace unless it
// exists (and the namespace unless it exists), refusing a name another
// namespace uses.
func ensureSpoke(ctx context.Context, out io.Writer, s *hubSession, name string) (*tugboatv1alpha1.Spoke, error) {
	var others tugboatv1alpha1.SpokeList
	switch err := s.client.List(ctx, &others); {
	case apimeta.IsNoMatchError(err):
		return nil, errors.New("the hub cluster has no Spoke CRD (tugboat.dev/v1alpha1): install the hub first (tugboat install hub)")
	case err == nil:
		for _, o := range others.Items {
			if o.Name == name && o.Namespace != s.namespace {
				return nil, fmt.Errorf("spoke name %q is already used by Spoke %s/%s: spoke names are unique across the hub (use -n %s, or another name)",
					name, o.Namespace, o.Name, o.Namespace)
			}
		}
	case !apierrors.IsForbidden(err):
		return nil, fmt.Errorf("listing spokes: %w", err)
	}
	sp := &tugboatv1alpha1.Spoke{}
	err := s.client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: name}, sp)
	if err == nil {
		fmt.Fprintf(out, "Spoke %s/%s already exists.\n", s.namespace, name)
		return sp, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading spoke %s/%s: %w", s.namespace, name, err)
	}
	if err := s.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}}); err == nil {
		fmt.Fprintf(out, "Namespace %s created.\n", s.namespace)
	} else if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", s.namespace, err)
	}
	sp = &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: name},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
	}
	if err := s.client.Create(ctx, sp, client.FieldOwner(cliFieldManager)); err != nil {
		return nil, fmt.Errorf("creating spoke %s/%s: %w", s.namespace, name, err)
	}
	fmt.Fprintf(out, "Spoke %s/%s created.\n", s.namespace, name)
	return sp, nil
}

// waitForKeySecret waits until the hub's Spoke controller has generated
// the Spoke's key Secret (or finds the one that exists) and returns it.
func waitForKeySecret(ctx context.Context, out io.Writer, s *hubSession, sp *tugboatv1alpha1.Spoke, timeout time.Duration) (*corev1.Secret, error) {
	key := types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.KeySecretRef.Name}
	secret := &corev1.Secret{}
	announced := false
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		err := s.client.Get(ctx, key, secret)
		switch {
		case apierrors.IsNotFound(err):
			if !announced {
				fmt.Fprintf(out, "Waiting up to %s for the hub to generate Secret %s...\n", timeout, key)
				announced = true
			}
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reading secret %s: %w", key, err)
		}
		return true, nil
	})
	if err != nil {
		if !wait.Interrupted(err) {
			return nil, err
		}
		msg := fmt.Sprintf("the hub did not generate the key Secret %s of Spoke %s/%s within %s: is the hub running (kubectl -n tugboat-system get deployment tugboat-hub)?",
			key, sp.Namespace, sp.Name, timeout)
		if cur, err := getSpoke(ctx, s, sp.Name); err == nil {
			if c := apimeta.FindStatusCondition(cur.Status.Conditions, tugboatv1alpha1.StalledCondition.String()); c != nil && c.Status == metav1.ConditionTrue {
				msg += " The Spoke is Stalled: " + c.Message
			}
		}
		return nil, errors.New(msg)
	}
	if n := len(strings.TrimSpace(string(secret.Data[tugboatv1alpha1.SpokeKeySecretKey]))); n < wire.MinSpokeKeySize {
		return nil, fmt.Errorf("secret %s has no key of at least %d bytes under %q (see the Spoke's conditions: kubectl -n %s describe spoke %s)",
			key, wire.MinSpokeKeySize, tugboatv1alpha1.SpokeKeySecretKey, sp.Namespace, sp.Name)
	}
	fmt.Fprintf(out, "The hub holds the spoke's key in Secret %s.\n", key)
	return secret, nil
}
