//go:build !agentonly

package app

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/config"
)

const (
	// agentNamespace is where the agent's chart runs the agent on a spoke,
	// and the hub's chart the hub.
	agentNamespace = "tugboat-system"
	// agentKeySecret is the Secret the agent's chart mounts the hub key from
	// (its value hub.keySecretName).
	agentKeySecret = "tugboat-agent-hub-key"
	// imageRepository is the hub's image; the agent's is imageRepository-agent.
	imageRepository = "ghcr.io/tugboat-dev/tugboat"
)

func newInstallCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the hub, or a spoke's agent, from the Helm charts built into this binary",
		Long: `install installs the Helm charts of config/charts (built into the binary) with
the Helm SDK, as the release tugboat-hub or tugboat-agent in namespace
tugboat-system: "install hub" on the management cluster, "install agent" on a
spoke, after registering the spoke on the hub and copying its key. Running it
again upgrades the release in place (objects that did not change are left
alone); --dry-run prints the YAML instead (for GitOps). helm list, helm
history and helm rollback work on these releases.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newInstallHubCommand(), newInstallAgentCommand())
	return cmd
}

// installFlags are the flags both install verbs share.
type installFlags struct {
	out        outputFlag
	image      string
	dryRun     bool
	timeout    time.Duration
	valueFiles []string
	set        []string
}

func (f *installFlags) bind(cmd *cobra.Command, defaultImage string) {
	cmd.Flags().StringVar(&f.image, "image", defaultImage, "the image to run (repository:tag or repository@digest)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print the YAML that would be applied and change nothing")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long to wait for the API server (and, for an agent, for the hub to generate the spoke's key)")
	cmd.Flags().StringArrayVarP(&f.valueFiles, "values", "f", nil, "a values file for the chart, as helm install -f (repeatable; later files win)")
	cmd.Flags().StringArrayVar(&f.set, "set", nil, "a chart value, as helm install --set (key=value; repeatable)")
	f.out.bind(cmd)
}

func (f *installFlags) validate() error {
	if err := f.out.validate(); err != nil {
		return err
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive")
	}
	_, err := parseImage(f.image)
	return err
}

// values merges, over base (what the command's own flags set), the values
// files and then --set, as helm does.
func (f *installFlags) values(base map[string]any) (map[string]any, error) {
	out := base
	for _, file := range f.valueFiles {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--values: %w", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("--values %s: %w", file, err)
		}
		out = chartutil.CoalesceTables(m, out)
	}
	for _, kv := range f.set {
		if err := strvals.ParseInto(kv, out); err != nil {
			return nil, fmt.Errorf("--set %q: %w", kv, err)
		}
	}
	return out, nil
}

// defaultImage is the image of this binary's version (repository, plus
// "-agent" for the agent's); a development build takes :latest.
func defaultImage(repository string) string {
	v := version()
	if v == "dev" {
		return repository + ":latest"
	}
	return repository + ":" + v
}

// image is a parsed image reference, as the charts' image values take it.
type image struct{ repository, tag, digest string }

func (i image) values() map[string]any {
	return map[string]any{"repository": i.repository, "tag": i.tag, "digest": i.digest}
}

// parseImage splits repository:tag or repository@digest.
func parseImage(ref string) (image, error) {
	var img image
	bad := fmt.Errorf("--image %q is not an image reference (repository:tag or repository@sha256:...)", ref)
	if ref == "" || strings.ContainsAny(ref, " \t\r\n\"'") {
		return img, bad
	}
	name := ref
	if at := strings.Index(ref, "@"); at >= 0 {
		name, img.digest = ref[:at], ref[at+1:]
		if !strings.HasPrefix(img.digest, "sha256:") {
			return img, fmt.Errorf("--image %q: the digest must look like sha256:<hex>", ref)
		}
	} else if colon := strings.LastIndex(ref, ":"); colon > strings.LastIndex(ref, "/") {
		name, img.tag = ref[:colon], ref[colon+1:]
		if img.tag == "" {
			return img, bad
		}
	}
	if name == "" || strings.HasSuffix(name, "/") {
		return img, bad
	}
	img.repository = name
	return img, nil
}

// printYAML writes objs as one YAML stream, in the order they would be
// applied.
func printYAML(w io.Writer, objs []*unstructured.Unstructured) error {
	for i, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// installResult is what the install verbs print with -o json|yaml (their
// progress then goes to stderr).
type installResult struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	Chart     string `json:"chart"`
	Version   string `json:"version"`
	Revision  int    `json:"revision"`
	// Action is "installed" or "upgraded".
	Action string `json:"action"`
	// Objects are the chart's objects ("<Kind> <namespace>/<name>").
	Objects []string `json:"objects"`
	// Spoke is the Spoke registered on the hub (install agent).
	Spoke string `json:"spoke,omitempty"`
}

// progress is where an install verb says what it does: stdout, or stderr
// when stdout carries the -o json|yaml result.
func (f *installFlags) progress(cmd *cobra.Command) io.Writer {
	if f.out == "json" || f.out == "yaml" {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

// installChart renders the chart (to check, before anything changes, that
// the cluster serves every kind it holds), then installs or upgrades its
// release with the Helm SDK and says what it did.
func installChart(ctx context.Context, out io.Writer, c *cluster, kf kubeFlags, chartName string, values map[string]any, timeout time.Duration) (*installResult, error) {
	objs, err := config.Render(chartName, agentNamespace, values)
	if err != nil {
		return nil, err
	}
	if err := c.checkKinds(objs); err != nil {
		return nil, err
	}
	if err := adoptCRDs(ctx, out, c, objs, chartName, agentNamespace); err != nil {
		return nil, c.explain("installing the chart "+chartName+" into", err)
	}
	rel, err := config.Apply(ctx, config.Target{Kubeconfig: kf.kubeconfig, Context: kf.context, Namespace: agentNamespace}, chartName, values, timeout)
	if err != nil {
		return nil, c.explain("installing the chart "+chartName+" into", err)
	}
	verb, action := "installed", "installed"
	if rel.Version > 1 {
		verb, action = "upgraded in place", "upgraded"
	}
	fmt.Fprintf(out, "Release %s/%s %s (chart %s-%s, revision %d, %d objects):\n", agentNamespace, rel.Name, verb,
		rel.Chart.Metadata.Name, rel.Chart.Metadata.Version, rel.Version, len(objs))
	result := &installResult{Release: rel.Name, Namespace: agentNamespace, Chart: rel.Chart.Metadata.Name, Version: rel.Chart.Metadata.Version,
		Revision: rel.Version, Action: action, Objects: make([]string, 0, len(objs))}
	for _, o := range objs {
		fmt.Fprintf(out, "  %s\n", describe(o))
		result.Objects = append(result.Objects, describe(o))
	}
	return result, nil
}

func newInstallHubCommand() *cobra.Command {
	var (
		kf              kubeFlags
		f               installFlags
		spokeNamespaces []string
	)
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Install the hub: the tugboat.dev CRDs, its RBAC, Deployment and Service (the chart tugboat-hub)",
		Long: `install hub installs the chart tugboat-hub into namespace tugboat-system of the
management cluster: the tugboat.dev CRDs (kept on uninstall), the hub's
ServiceAccount, ClusterRoles and bindings, the approval policy, its Deployment
and Service, and a self-signed certificate for the receiver (see the chart's
values for cert-manager or your own). The hub reads Secrets only in
tugboat-system and the namespaces of --spoke-namespace: put Spokes and
Pipelines there.`,
		Example: `  tugboat install hub --context hub --spoke-namespace fleet
  tugboat install hub --context hub --image ghcr.io/tugboat-dev/tugboat:v0.1.0 --set replicas=3
  tugboat install hub --dry-run > hub.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			for _, ns := range spokeNamespaces {
				if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 && ns != "*" {
					return fmt.Errorf("--spoke-namespace %q is not a valid namespace: %s", ns, strings.Join(msgs, "; "))
				}
			}
			img, _ := parseImage(f.image)
			namespaces := make([]any, 0, len(spokeNamespaces))
			for _, ns := range spokeNamespaces {
				namespaces = append(namespaces, ns)
			}
			values, err := f.values(map[string]any{"image": img.values(), "spokeNamespaces": namespaces})
			if err != nil {
				return err
			}
			if f.dryRun {
				objs, err := config.Render(config.HubChart, agentNamespace, values)
				if err != nil {
					return err
				}
				return printYAML(cmd.OutOrStdout(), objs)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout+time.Minute)
			defer cancel()
			a, err := connectCluster(ctx, "hub cluster", kf)
			if err != nil {
				return err
			}
			out := f.progress(cmd)
			result, err := installChart(ctx, out, a, kf, config.HubChart, values, f.timeout)
			if err != nil {
				return err
			}
			if err := a.waitEstablished(ctx, hubCRDs(), f.timeout); err != nil {
				return err
			}
			fmt.Fprintf(out, "The hub is installed. Once it is ready, register spokes (tugboat spoke add, or tugboat install agent):\n"+
				"  kubectl -n %s rollout status deployment/tugboat-hub\n", agentNamespace)
			_, err = f.out.structured(cmd.OutOrStdout(), result)
			return err
		},
	}
	kf.bind(cmd)
	f.bind(cmd, defaultImage(imageRepository))
	cmd.Flags().StringArrayVar(&spokeNamespaces, "spoke-namespace", nil, `a namespace the hub serves (Spokes, Pipelines and their Secrets), besides tugboat-system; repeatable; "*" for every namespace`)
	return cmd
}

// hubCRDs are the names of the CRDs the hub's chart installs (install hub
// waits for them, uninstall hub --purge deletes them).
func hubCRDs() []string {
	files, err := config.CRDs()
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(files))
	for file := range files {
		// controller-gen names them <group>_<plural>.yaml.
		group, plural, ok := strings.Cut(strings.TrimSuffix(file, ".yaml"), "_")
		if ok {
			names = append(names, plural+"."+group)
		}
	}
	sort.Strings(names)
	return names
}

// agentInstall is what `tugboat install agent` was asked to do.
type agentInstall struct {
	installFlags
	hubKubeconfig   string
	hubContext      string
	hubNamespace    string
	spokeKubeconfig string
	spokeContext    string
	spoke           string
	hubURL          string
	certManager     bool
}

func newInstallAgentCommand() *cobra.Command {
	var o agentInstall
	cmd := &cobra.Command{
		Use:   "agent --spoke NAME --hub-url URL (--spoke-context CTX | --spoke-kubeconfig FILE)",
		Short: "Register a spoke on the hub and install its agent",
		Long: `install agent registers a spoke on the hub and installs its agent:

  1. on the hub, it creates the Spoke (unless it exists) in the namespace -n and
     waits (--timeout) until the hub has generated its key Secret <spoke>-key;
  2. on the spoke, it copies that key into Secret tugboat-system/tugboat-agent-hub-key
     (the key is never printed);
  3. it installs the chart tugboat-agent on the spoke (release tugboat-agent in
     tugboat-system), with the spoke's name and the hub's URL (and, with
     --cert-manager, cert-manager keeps the webhook's certificate instead of the
     agent). -f and --set pass further values, e.g. --set helmStrategy.enabled=true.

--dry-run prints the spoke's manifests (without the key Secret) and touches
neither cluster.`,
		Example: `  tugboat install agent --spoke staging-1 --hub-url https://tugboat-hub.example.com \
      --hub-context hub --spoke-context staging-1 -n fleet
  tugboat install agent --spoke staging-1 --hub-url https://tugboat-hub.example.com --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.spoke, "spoke", "", "the spoke's name: the Spoke on the hub, and the agent's --spoke (an RFC 1123 label)")
	fl.StringVar(&o.hubURL, "hub-url", "", "the hub's receiver URL as the agent reaches it (https://...)")
	fl.StringVar(&o.hubKubeconfig, "kubeconfig", "", "kubeconfig file of the hub (and of the spoke unless --spoke-kubeconfig; default: $KUBECONFIG, in-cluster, ~/.kube/config)")
	fl.StringVar(&o.hubContext, "hub-context", "", "kubeconfig context of the hub (default: the current context)")
	fl.StringVarP(&o.hubNamespace, "namespace", "n", "", "namespace of the Spoke on the hub (default: the hub context's namespace, else default)")
	fl.StringVar(&o.spokeContext, "spoke-context", "", "kubeconfig context of the spoke cluster")
	fl.StringVar(&o.spokeKubeconfig, "spoke-kubeconfig", "", "kubeconfig file of the spoke cluster (its current context unless --spoke-context)")
	fl.BoolVar(&o.certManager, "cert-manager", false, "let cert-manager keep the agent's webhook certificate (the chart's webhook.certificate=certManager; cert-manager must be installed on the spoke)")
	o.bind(cmd, defaultImage(imageRepository+"-agent"))
	_ = cmd.MarkFlagRequired("spoke")
	_ = cmd.MarkFlagRequired("hub-url")
	return cmd
}

func (o *agentInstall) validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(o.spoke); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--spoke %q is not a valid spoke name (an RFC 1123 label): %s", o.spoke, strings.Join(msgs, "; ")))
	}
	if u, err := url.Parse(o.hubURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--hub-url %q must be an absolute http(s) URL of the hub's receiver", o.hubURL))
	}
	if o.hubNamespace != "" {
		if msgs := validation.IsDNS1123Label(o.hubNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--namespace %q is not a valid namespace: %s", o.hubNamespace, strings.Join(msgs, "; ")))
		}
	}
	if !o.dryRun && o.spokeContext == "" && o.spokeKubeconfig == "" {
		errs = append(errs, errors.New("set --spoke-context or --spoke-kubeconfig: the cluster to install the agent into"))
	}
	errs = append(errs, o.installFlags.validate())
	return errors.Join(errs...)
}

// chartValues are the agent chart's values for this spoke.
func (o *agentInstall) chartValues() (map[string]any, error) {
	img, _ := parseImage(o.image)
	certificate := "agent"
	if o.certManager {
		certificate = "certManager"
	}
	return o.values(map[string]any{
		"spoke":   o.spoke,
		"hub":     map[string]any{"url": o.hubURL, "keySecretName": agentKeySecret},
		"image":   img.values(),
		"webhook": map[string]any{"certificate": certificate},
	})
}

func (o *agentInstall) run(cmd *cobra.Command) error {
	if err := o.validate(); err != nil {
		return err
	}
	values, err := o.chartValues()
	if err != nil {
		return err
	}
	objs, err := config.Render(config.AgentChart, agentNamespace, values)
	if err != nil {
		return err
	}
	hubFlags := hubFlags{kube: kubeFlags{kubeconfig: o.hubKubeconfig, context: o.hubContext}, namespace: o.hubNamespace}
	ns := hubFlags.fromKubeconfig()
	if o.hubNamespace != "" {
		ns = o.hubNamespace
	}
	out := o.progress(cmd)
	if o.dryRun {
		fmt.Fprintf(cmd.ErrOrStderr(), "# Dry run: nothing was changed. On the hub, install would create Spoke %s/%s (keySecretRef %s-key) unless it exists and wait for the hub to generate its key;\n"+
			"# on the spoke, Secret %s/%s with that key (not printed here), then these objects:\n", ns, o.spoke, o.spoke, agentNamespace, agentKeySecret)
		return printYAML(cmd.OutOrStdout(), objs)
	}

	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout+2*time.Minute)
	defer cancel()
	hub, err := connectCluster(ctx, "hub cluster", hubFlags.kube)
	if err != nil {
		return err
	}
	spokeKube := kubeFlags{kubeconfig: o.spokeKubeconfig, context: o.spokeContext}
	if spokeKube.kubeconfig == "" {
		spokeKube.kubeconfig = o.hubKubeconfig
	}
	spoke, err := connectCluster(ctx, "spoke cluster", spokeKube)
	if err != nil {
		return err
	}

	if err := spoke.checkKinds(objs); err != nil {
		return err
	}

	secretName, err := o.ensureSpoke(ctx, out, hub, ns)
	if err != nil {
		return err
	}
	key, err := o.waitForKey(ctx, out, hub, ns, secretName)
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "Installing the agent into the %s:\n", spoke.where)
	keySecret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{
			"name": agentKeySecret, "namespace": agentNamespace,
			"labels": map[string]any{"app.kubernetes.io/part-of": "tugboat", "app.kubernetes.io/managed-by": installFieldManager},
		},
		"type": string(corev1.SecretTypeOpaque),
		// The key goes into the request only; it is never printed.
		"data": map[string]any{tugboatv1alpha1.SpokeKeySecretKey: key},
	}}
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": agentNamespace}}}
	if err := spoke.apply(ctx, out, nsObj, ""); err != nil {
		return err
	}
	if err := spoke.apply(ctx, out, keySecret, fmt.Sprintf(" (the key of Secret %s/%s on the hub)", ns, secretName)); err != nil {
		return err
	}
	result, err := installChart(ctx, out, spoke, spokeKube, config.AgentChart, values, o.timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "The agent reports to %s as spoke %s. Once its Pod is Ready, Spoke %s/%s on the hub turns Ready:\n"+
		"  kubectl -n %s get spoke %s\n", o.hubURL, o.spoke, ns, o.spoke, ns, o.spoke)
	result.Spoke = ns + "/" + o.spoke
	_, err = o.out.structured(cmd.OutOrStdout(), result)
	return err
}

// ensureSpoke creates the Spoke on the hub unless it exists (and its
// namespace unless that exists), and returns the name of its key Secret.
func (o *agentInstall) ensureSpoke(ctx context.Context, out io.Writer, hub *cluster, ns string) (string, error) {
	c := hub.client
	var others tugboatv1alpha1.SpokeList
	switch err := c.List(ctx, &others); {
	case apimeta.IsNoMatchError(err):
		return "", fmt.Errorf("the %s has no Spoke CRD (%s): install the hub first (tugboat install hub)", hub.where, tugboatv1alpha1.GroupVersion)
	case err == nil:
		// The agent protocol names spokes by name alone: the hub refuses a
		// second Spoke of the same name in another namespace.
		for _, s := range others.Items {
			if s.Name == o.spoke && s.Namespace != ns {
				return "", fmt.Errorf("spoke name %q is already used by Spoke %s/%s on the hub: spoke names are unique across the hub (use -n %s, or another name)",
					o.spoke, s.Namespace, s.Name, s.Namespace)
			}
		}
	case !apierrors.IsForbidden(err):
		// Listing every namespace may be forbidden; the hub then reports a
		// duplicate name on the Spoke itself.
		return "", hub.explain("listing Spokes on", err)
	}

	sp := &tugboatv1alpha1.Spoke{}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: o.spoke}, sp)
	if err == nil {
		fmt.Fprintf(out, "Spoke %s/%s exists on the %s.\n", ns, o.spoke, hub.where)
		return sp.Spec.KeySecretRef.Name, nil
	}
	if !apierrors.IsNotFound(err) {
		return "", hub.explain(fmt.Sprintf("reading Spoke %s/%s on", ns, o.spoke), err)
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := c.Create(ctx, nsObj); err == nil {
		fmt.Fprintf(out, "Namespace %s created on the %s.\n", ns, hub.where)
	} else if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		// Forbidden: perhaps it exists and the user may only use it;
		// creating the Spoke says so if not.
		return "", hub.explain(fmt.Sprintf("creating namespace %s on", ns), err)
	}
	sp = &tugboatv1alpha1.Spoke{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: o.spoke},
		Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: o.spoke + "-key"}},
	}
	if err := c.Create(ctx, sp, client.FieldOwner(installFieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", hub.explain(fmt.Sprintf("creating Spoke %s/%s on", ns, o.spoke), err)
	}
	fmt.Fprintf(out, "Spoke %s/%s created on the %s.\n", ns, o.spoke, hub.where)
	return sp.Spec.KeySecretRef.Name, nil
}

// waitForKey waits until the hub's Spoke controller has generated the key
// Secret, and returns the key, base64-encoded as in the Secret's data.
func (o *agentInstall) waitForKey(ctx context.Context, out io.Writer, hub *cluster, ns, name string) (string, error) {
	key := types.NamespacedName{Namespace: ns, Name: name}
	var secret corev1.Secret
	fmt.Fprintf(out, "Waiting up to %s for the hub to generate Secret %s/%s...\n", o.timeout, ns, name)
	err := poll(ctx, 200*time.Millisecond, o.timeout, func(ctx context.Context) (bool, error) {
		err := hub.client.Get(ctx, key, &secret)
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, hub.explain(fmt.Sprintf("reading Secret %s/%s on", ns, name), err)
		}
		return true, nil
	})
	if err != nil {
		if !errors.Is(err, errTimedOut) {
			return "", err
		}
		msg := fmt.Sprintf("the hub did not generate the key Secret %s/%s of Spoke %s/%s within %s: is the hub running on the %s (kubectl -n %s get deployment tugboat-hub)?",
			ns, name, ns, o.spoke, o.timeout, hub.where, agentNamespace)
		sp := &tugboatv1alpha1.Spoke{}
		if hub.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: o.spoke}, sp) == nil {
			if c := apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.StalledCondition.String()); c != nil && c.Status == metav1.ConditionTrue {
				msg += fmt.Sprintf(" The Spoke is Stalled: %s", c.Message)
			}
		}
		return "", errors.New(msg)
	}
	raw := secret.Data[tugboatv1alpha1.SpokeKeySecretKey]
	if len(strings.TrimSpace(string(raw))) < wire.MinSpokeKeySize {
		return "", fmt.Errorf("the key Secret %s/%s on the hub has no key of at least %d bytes under %q (see the Spoke's conditions)", ns, name, wire.MinSpokeKeySize, tugboatv1alpha1.SpokeKeySecretKey)
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}
