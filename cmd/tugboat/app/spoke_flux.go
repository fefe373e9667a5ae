//go:build !agentonly

package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/promotion/strategy/spokeaccess"
	spokectl "tugboat.dev/tugboat/controllers/spoke"
)

// Names of what `spoke add --flux` writes to the spoke cluster.
const (
	fluxSecretName   = "tugboat-flux-key" //nolint:gosec // G101: a Secret's name, not a credential
	fluxProviderName = "tugboat"
	fluxAlertName    = "tugboat-helmreleases"
)

// fluxSetup is the --flux part of `tugboat spoke add`: an agentless spoke
// whose Flux notification-controller reports HelmRelease events to the hub.
type fluxSetup struct {
	enabled    bool
	cluster    string
	spokeKube  kubeFlags
	namespace  string
	namespaces []string
	output     string
}

func (f *fluxSetup) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.enabled, "flux", false, "agentless spoke: give it a Flux key and set up Flux notification-controller (a generic-hmac Provider and an Alert on HelmReleases) on the spoke cluster to report to the hub")
	fl.StringVar(&f.spokeKube.kubeconfig, "spoke-kubeconfig", "", "with --flux: kubeconfig file of the spoke cluster (default: $KUBECONFIG, ~/.kube/config)")
	fl.StringVar(&f.spokeKube.context, "spoke-context", "", "with --flux: kubeconfig context of the spoke cluster (default: the current context)")
	fl.StringVar(&f.cluster, "cluster", "", "with --flux: reach the spoke through the kubeconfig of this Cluster API Cluster (Secret <cluster>-kubeconfig in the Spoke's namespace on the hub) instead of --spoke-kubeconfig/--spoke-context")
	fl.StringVar(&f.namespace, "flux-namespace", "flux-system", "with --flux: the namespace on the spoke of the Provider, the Alert and the key Secret")
	fl.StringSliceVar(&f.namespaces, "helmrelease-namespaces", nil, "with --flux: the namespaces whose HelmReleases are reported (default: --flux-namespace)")
	fl.StringVarP(&f.output, "output", "o", "", "table, wide, json or yaml: json and yaml print the result (the install command) on stdout and the progress on stderr; with --flux, yaml prints the spoke's objects (for a GitOps commit) instead of applying them")
}

func (f *fluxSetup) printOnly() bool { return f.output == "yaml" }

func (f *fluxSetup) validate(hubURL string) error {
	if !f.enabled {
		if f.spokeKube.kubeconfig != "" || f.spokeKube.context != "" || len(f.namespaces) > 0 || f.cluster != "" {
			return errors.New("--cluster, --spoke-kubeconfig, --spoke-context and --helmrelease-namespaces go with --flux")
		}
		return outputFlag(f.output).validate()
	}
	var errs []error
	if hubURL == "" {
		errs = append(errs, errors.New("--flux needs --hub-url: the Provider posts to <hub-url>/v1/flux/<spoke>"))
	}
	if f.output != "" && f.output != "yaml" {
		errs = append(errs, fmt.Errorf("unknown output format %q for --flux: use yaml (or nothing, to apply)", f.output))
	}
	if f.printOnly() && (f.spokeKube.kubeconfig != "" || f.spokeKube.context != "" || f.cluster != "") {
		errs = append(errs, errors.New("-o yaml prints the objects and applies nothing: drop --cluster/--spoke-kubeconfig/--spoke-context"))
	}
	if f.cluster != "" {
		if f.spokeKube.kubeconfig != "" || f.spokeKube.context != "" {
			errs = append(errs, errors.New("--cluster reaches the spoke through Cluster API's kubeconfig: drop --spoke-kubeconfig/--spoke-context"))
		}
		if msgs := validation.IsDNS1123Subdomain(f.cluster); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--cluster %q is not a valid Cluster name: %s", f.cluster, strings.Join(msgs, "; ")))
		}
	}
	for _, ns := range append([]string{f.namespace}, f.namespaces...) {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%q is not a valid namespace: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// run registers the spoke on the hub with a Flux key, then applies (or
// prints) the spoke's objects.
func (f *fluxSetup) run(cmd *cobra.Command, s *hubSession, name, hubURL string, timeout time.Duration) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	progress := out
	if f.printOnly() {
		progress = cmd.ErrOrStderr() // stdout is the YAML stream
	}
	sp, err := ensureSpoke(ctx, progress, s, name)
	if err != nil {
		return err
	}
	secret, err := waitForKeySecret(ctx, progress, s, sp, timeout)
	if err != nil {
		return err
	}
	key, err := ensureFluxKey(ctx, progress, s, sp, secret)
	if err != nil {
		return err
	}
	if err := markFluxSetup(ctx, s, sp); err != nil {
		return err
	}
	objs, err := f.objects(name, hubURL, key)
	if err != nil {
		return err
	}
	if f.printOnly() {
		fmt.Fprintf(progress, "# The Secret holds the spoke's Flux key in clear: encrypt it (SOPS, Sealed Secrets) before committing it.\n")
		return printYAML(out, objs)
	}
	cfg, err := f.spokeConfig(ctx, s, sp)
	if err != nil {
		return err
	}
	spoke, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("connecting to the spoke cluster: %w", err)
	}
	fmt.Fprintf(out, "Setting up Flux notification-controller on the spoke cluster (%s):\n", cfg.Host)
	for _, o := range objs {
		err := spoke.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(cliFieldManager), client.ForceOwnership)
		if apimeta.IsNoMatchError(err) {
			return fmt.Errorf("the spoke cluster does not serve %s %s: install Flux (notification-controller) there first", o.GetAPIVersion(), o.GetKind())
		}
		if err != nil {
			return fmt.Errorf("applying %s %s/%s to the spoke cluster: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		fmt.Fprintf(out, "  %s %s/%s applied\n", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	fmt.Fprintf(out, "Flux reports HelmRelease events of %s to %s. Spoke %s/%s turns Ready with the first one.\n",
		strings.Join(f.sourceNamespaces(), ", "), fluxAddress(hubURL, name), sp.Namespace, name)
	return nil
}

// ensureFluxKey returns the Flux key of the Spoke's key Secret on the hub,
// writing a new random one when it has none that the hub would accept
// (at least wire.MinSpokeKeySize bytes, neither of the agent's keys).
func ensureFluxKey(ctx context.Context, out io.Writer, s *hubSession, sp *tugboatv1alpha1.Spoke, secret *corev1.Secret) ([]byte, error) {
	key := bytes.TrimSpace(secret.Data[tugboatv1alpha1.SpokeFluxKeySecretKey])
	agentKey := func(k string) bool { a := bytes.TrimSpace(secret.Data[k]); return len(a) > 0 && bytes.Equal(key, a) }
	if len(key) >= wire.MinSpokeKeySize && !agentKey(tugboatv1alpha1.SpokeKeySecretKey) && !agentKey(tugboatv1alpha1.SpokePreviousKeySecretKey) {
		fmt.Fprintf(out, "Secret %s/%s holds the spoke's Flux key already: keeping it.\n", secret.Namespace, secret.Name)
		return key, nil
	}
	key, err := generateKey()
	if err != nil {
		return nil, err
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[tugboatv1alpha1.SpokeFluxKeySecretKey] = key
	if err := s.client.Update(ctx, secret, client.FieldOwner(cliFieldManager)); err != nil {
		return nil, fmt.Errorf("writing the Flux key to secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	// The hub re-reads the keys at once (it would also on the first Flux
	// request, which fails to verify with the keys it holds).
	if err := spokectl.MarkKeysUpdated(ctx, s.client, sp, time.Now(), client.FieldOwner(cliFieldManager)); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "The hub holds a new Flux key for the spoke (Secret %s/%s, %q), separate from the agent's.\n",
		secret.Namespace, secret.Name, tugboatv1alpha1.SpokeFluxKeySecretKey)
	return key, nil
}

// markFluxSetup records on the Spoke when its Flux setup was made (once):
// until its first Flux event, the hub says Ready=Unknown, NoEventSinceSetup,
// since then.
func markFluxSetup(ctx context.Context, s *hubSession, sp *tugboatv1alpha1.Spoke) error {
	if _, ok := sp.Annotations[tugboatv1alpha1.FluxSetupAnnotation]; ok {
		return nil
	}
	orig := sp.DeepCopy()
	metav1.SetMetaDataAnnotation(&sp.ObjectMeta, tugboatv1alpha1.FluxSetupAnnotation, time.Now().UTC().Format(time.RFC3339))
	if err := s.client.Patch(ctx, sp, client.MergeFrom(orig), client.FieldOwner(cliFieldManager)); err != nil {
		return fmt.Errorf("annotating spoke %s/%s: %w", sp.Namespace, sp.Name, err)
	}
	return nil
}

func (f *fluxSetup) sourceNamespaces() []string {
	if len(f.namespaces) == 0 {
		return []string{f.namespace}
	}
	return f.namespaces
}

// fluxAddress is the hub's Flux endpoint for spoke name.
func fluxAddress(hubURL, name string) string {
	return strings.TrimSuffix(hubURL, "/") + "/v1/flux/" + name
}

// objects returns the Secret, Provider and Alert of an agentless spoke,
// in the order to apply them.
func (f *fluxSetup) objects(name, hubURL string, key []byte) ([]*unstructured.Unstructured, error) {
	labels := map[string]string{"app.kubernetes.io/managed-by": cliFieldManager, "app.kubernetes.io/part-of": "tugboat", tugboatv1alpha1.LabelSpoke: name}
	objectMeta := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: f.namespace, Name: n, Labels: labels}
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: objectMeta(fluxSecretName),
		Type:       corev1.SecretTypeOpaque,
		// generic-hmac signs with "token" (X-Signature: sha256=<hex>).
		StringData: map[string]string{"token": string(key)},
	}
	gv := notificationv1beta3.GroupVersion.String()
	provider := &notificationv1beta3.Provider{
		TypeMeta:   metav1.TypeMeta{APIVersion: gv, Kind: notificationv1beta3.ProviderKind},
		ObjectMeta: objectMeta(fluxProviderName),
		Spec: notificationv1beta3.ProviderSpec{
			Type:      notificationv1beta3.GenericHMACProvider,
			Address:   fluxAddress(hubURL, name),
			SecretRef: &meta.LocalObjectReference{Name: fluxSecretName},
		},
	}
	alert := &notificationv1beta3.Alert{
		TypeMeta:   metav1.TypeMeta{APIVersion: gv, Kind: notificationv1beta3.AlertKind},
		ObjectMeta: objectMeta(fluxAlertName),
		Spec: notificationv1beta3.AlertSpec{
			ProviderRef: meta.LocalObjectReference{Name: fluxProviderName},
			// info includes error: the hub records successes and failures.
			EventSeverity: "info",
			// The hub reads the spoke from the URL; "cluster" names it in
			// the event too, for anyone else reading it.
			EventMetadata: map[string]string{"cluster": name},
		},
	}
	for _, ns := range f.sourceNamespaces() {
		alert.Spec.EventSources = append(alert.Spec.EventSources, notificationv1.CrossNamespaceObjectReference{Kind: "HelmRelease", Name: "*", Namespace: ns})
	}
	var objs []*unstructured.Unstructured
	for _, o := range []runtime.Object{secret, provider, alert} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		unstructured.RemoveNestedField(m, "status")
		unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}

// spokeConfig is how the CLI reaches the spoke cluster: through the
// kubeconfig Cluster API keeps for --cluster on the hub (Secret
// <cluster>-kubeconfig, key value, in the Spoke's namespace, read with the
// user's own rights there), else --spoke-kubeconfig/--spoke-context.
func (f *fluxSetup) spokeConfig(ctx context.Context, s *hubSession, sp *tugboatv1alpha1.Spoke) (*rest.Config, error) {
	if f.cluster == "" {
		cfg, err := f.spokeKube.restConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the spoke's kubeconfig: %w", err)
		}
		return cfg, nil
	}
	via := sp.DeepCopy()
	via.Spec.ClusterRef = &tugboatv1alpha1.ObjectReference{Name: f.cluster}
	via.Spec.KubeConfigSecretRef = nil
	cfg, err := spokeaccess.RESTConfig(ctx, s.client, via)
	if err != nil {
		return nil, fmt.Errorf("reaching Cluster %s/%s: %w", sp.Namespace, f.cluster, err)
	}
	// The kubeconfig is whatever the Cluster's Secret holds: never a
	// metadata or link-local address, never through a proxy. Loopback
	// stays allowed: a local management cluster's workload clusters (kind,
	// Docker) listen there.
	return spokeaccess.Guard(cfg, egress.Policy{AllowLoopback: true}), nil
}
