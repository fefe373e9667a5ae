//go:build !agentonly

package app

import (
	"context"
	"encoding/base64"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/webhook/receiver"
)

const (
	// agentNamespace is where config/agent runs the agent on a spoke.
	agentNamespace = "tugboat-system"
	// agentKeySecret is the Secret config/agent mounts the hub key from.
	agentKeySecret = "tugboat-agent-hub-key"
	// imageRepository is the image the bases name.
	imageRepository = "ghcr.io/tugboat-dev/tugboat"
)

func newInstallCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the hub, or a spoke's agent, from the manifests built into this binary",
		Long: `install applies the kustomize bases of config/ (built into the binary) with
server-side apply: "install hub" on the management cluster, "install agent" on a
spoke, after registering the spoke on the hub and copying its key. Running it
again changes nothing; --dry-run prints the YAML instead (for GitOps).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newInstallHubCommand(), newInstallAgentCommand())
	return cmd
}

// installFlags are the flags both install verbs share.
type installFlags struct {
	image   string
	dryRun  bool
	timeout time.Duration
}

func (f *installFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.image, "image", defaultImage(), "the tugboat image to run (repository:tag or repository@digest)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print the YAML that would be applied and change nothing")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long to wait for CRDs to be Established (and, for an agent, for the hub to generate the spoke's key)")
}

func (f *installFlags) validate() error {
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive")
	}
	_, err := imageOverride(f.image)
	return err
}

// defaultImage is the image of this binary's version; a development build
// keeps the bases' own (:latest).
func defaultImage() string {
	v := version()
	if v == "dev" {
		return imageRepository + ":latest"
	}
	return imageRepository + ":" + v
}

// imageOverride turns an image reference into kustomize's images entry for
// the bases' image.
func imageOverride(ref string) (kustomizetypes.Image, error) {
	img := kustomizetypes.Image{Name: imageRepository}
	if ref == "" || strings.ContainsAny(ref, " \t\r\n\"'") {
		return img, fmt.Errorf("--image %q is not an image reference (repository:tag or repository@sha256:...)", ref)
	}
	name := ref
	if at := strings.Index(ref, "@"); at >= 0 {
		name, img.Digest = ref[:at], ref[at+1:]
		if !strings.Contains(img.Digest, ":") {
			return img, fmt.Errorf("--image %q: the digest must look like sha256:<hex>", ref)
		}
	} else if colon := strings.LastIndex(ref, ":"); colon > strings.LastIndex(ref, "/") {
		name, img.NewTag = ref[:colon], ref[colon+1:]
	}
	if name == "" || strings.HasSuffix(name, "/") || img.NewTag == "" && img.Digest == "" && strings.HasSuffix(ref, ":") {
		return img, fmt.Errorf("--image %q is not an image reference (repository:tag or repository@sha256:...)", ref)
	}
	img.NewName = name
	return img, nil
}

// build builds the overlay k over the embedded bases.
func build(k kustomizetypes.Kustomization) ([]*unstructured.Unstructured, error) {
	k.APIVersion, k.Kind = kustomizetypes.KustomizationVersion, kustomizetypes.KustomizationKind
	data, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	maps, err := config.Build(data)
	if err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(maps))
	for _, m := range maps {
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
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

func newInstallHubCommand() *cobra.Command {
	var (
		kf kubeFlags
		f  installFlags
	)
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Install the hub: the tugboat.dev CRDs, its RBAC, Deployment and Service",
		Long: `install hub applies config/hub to the management cluster: the tugboat.dev
CRDs (and waits until they are Established), the namespace tugboat-system, the
hub's ServiceAccount, ClusterRole and bindings, its Deployment and Service.
The hub's receiver serves TLS from Secret tugboat-system/tugboat-hub-receiver-tls
(tls.crt, tls.key), which you provide (for example with cert-manager).`,
		Example: `  tugboat install hub --context hub
  tugboat install hub --context hub --image ghcr.io/tugboat-dev/tugboat:v0.1.0
  tugboat install hub --dry-run > hub.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			img, _ := imageOverride(f.image)
			objs, err := build(kustomizetypes.Kustomization{Resources: []string{"../hub"}, Images: []kustomizetypes.Image{img}})
			if err != nil {
				return err
			}
			objs = applyOrder(objs)
			if f.dryRun {
				return printYAML(cmd.OutOrStdout(), objs)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout+time.Minute)
			defer cancel()
			a, err := connectCluster(ctx, "hub cluster", kf)
			if err != nil {
				return err
			}
			if err := a.checkKinds(objs); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Installing the hub into the %s:\n", a.where)
			if err := a.applyAll(ctx, out, objs, f.timeout, nil); err != nil {
				return err
			}
			fmt.Fprintf(out, "The hub is installed. It serves once Secret %s/tugboat-hub-receiver-tls holds its TLS certificate:\n"+
				"  kubectl -n %s rollout status deployment/tugboat-hub\n", agentNamespace, agentNamespace)
			return nil
		},
	}
	kf.bind(cmd)
	f.bind(cmd)
	return cmd
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
  3. it applies config/agent to the spoke, with the spoke's name and the hub's URL
     (and, with --cert-manager, the certmanager component: cert-manager keeps the
     webhook's certificate instead of the agent).

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
	fl.BoolVar(&o.certManager, "cert-manager", false, "let cert-manager keep the agent's webhook certificate (the certmanager component; cert-manager must be installed on the spoke)")
	o.bind(cmd)
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

// manifests builds config/agent for this spoke.
func (o *agentInstall) manifests() ([]*unstructured.Unstructured, error) {
	img, _ := imageOverride(o.image)
	k := kustomizetypes.Kustomization{
		Resources: []string{"../agent"},
		ConfigMapGenerator: []kustomizetypes.ConfigMapArgs{{GeneratorArgs: kustomizetypes.GeneratorArgs{
			Name: "tugboat-agent", Namespace: agentNamespace, Behavior: "merge",
			KvPairSources: kustomizetypes.KvPairSources{LiteralSources: []string{"spoke=" + o.spoke, "hubURL=" + o.hubURL}},
		}}},
		Images: []kustomizetypes.Image{img},
	}
	if o.certManager {
		// The component also sets webhookCertRotation=false.
		k.Components = []string{"../agent/certmanager"}
	}
	objs, err := build(k)
	if err != nil {
		return nil, err
	}
	return applyOrder(objs), nil
}

func (o *agentInstall) run(cmd *cobra.Command) error {
	if err := o.validate(); err != nil {
		return err
	}
	objs, err := o.manifests()
	if err != nil {
		return err
	}
	hubFlags := hubFlags{kube: kubeFlags{kubeconfig: o.hubKubeconfig, context: o.hubContext}, namespace: o.hubNamespace}
	ns := hubFlags.fromKubeconfig()
	if o.hubNamespace != "" {
		ns = o.hubNamespace
	}
	out := cmd.OutOrStdout()
	if o.dryRun {
		fmt.Fprintf(cmd.ErrOrStderr(), "# Dry run: nothing was changed. On the hub, install would create Spoke %s/%s (keySecretRef %s-key) unless it exists and wait for the hub to generate its key;\n"+
			"# on the spoke, Secret %s/%s with that key (not printed here), then these objects:\n", ns, o.spoke, o.spoke, agentNamespace, agentKeySecret)
		return printYAML(out, objs)
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
	afterNamespaces := func(ctx context.Context) error {
		return spoke.apply(ctx, out, keySecret, fmt.Sprintf(" (the key of Secret %s/%s on the hub)", ns, secretName))
	}
	if err := spoke.applyAll(ctx, out, objs, o.timeout, afterNamespaces); err != nil {
		return err
	}
	fmt.Fprintf(out, "The agent reports to %s as spoke %s. Once its Pod is Ready, Spoke %s/%s on the hub turns Ready:\n"+
		"  kubectl -n %s get spoke %s\n", o.hubURL, o.spoke, ns, o.spoke, ns, o.spoke)
	return nil
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
	if len(strings.TrimSpace(string(raw))) < receiver.MinKeySize {
		return "", fmt.Errorf("the key Secret %s/%s on the hub has no key of at least %d bytes under %q (see the Spoke's conditions)", ns, name, receiver.MinKeySize, tugboatv1alpha1.SpokeKeySecretKey)
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}
