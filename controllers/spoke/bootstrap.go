package spoke

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/config"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/promotion/strategy/spokeaccess"
	"tugboat.dev/tugboat/controllers/statuspatch"
)

// Where the hub installs a spoke's agent: the chart's namespace, and the
// Secrets its values name there.
const (
	bootstrapNamespace = "tugboat-system"
	bootstrapKeySecret = "tugboat-agent-hub-key"
	bootstrapCASecret  = "tugboat-hub-ca" //nolint:gosec // a Secret's name, not a credential
	// bootstrapRetry is how soon a failed or waiting bootstrap is tried again.
	bootstrapRetry = 15 * time.Second
)

// BootstrapOptions configure the agent installs of spec.agentBootstrap.
type BootstrapOptions struct {
	// Version is the hub's version: the agent's image tag it installs, and
	// upgrades to when it moves ("dev": the chart's default).
	Version string
	// Timeout bounds each request to the spoke and the chart's install.
	Timeout time.Duration
	// Egress is the policy the connections to the spoke obey: its
	// kubeconfig is written by whoever can write the Secret.
	Egress egress.Policy
	// AllowedValues are the agent chart values (dotted paths, see
	// DefaultAllowedValues) spec.agentBootstrap.values may set: the install
	// runs with the workload cluster's admin credential, so whoever may
	// write a Spoke or SpokeClass chooses only these. A Spoke setting
	// anything else is Stalled and nothing is installed. nil allows none.
	AllowedValues []string
}

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch

// bootstrapRefused is a bootstrap the hub will not carry out as the spec
// stands (terminal: Stalled, nothing written to the spoke).
type bootstrapRefused struct {
	reason tugboatv1alpha1.ConditionReason
	msg    string
}

func (e bootstrapRefused) Error() string { return e.msg }

// reconcileBootstrap installs, or upgrades, the agent's chart into the spoke
// when spec.agentBootstrap asks for it and what is installed is not the
// hub's version of this spec, and records it in status and the condition
// AgentInstalled. It returns when to look again (0: not before a change).
// Nothing is written to the spoke without spec.agentBootstrap, while
// spec.suspend is true, when the values set what the hub does not allow
// (BootstrapOptions.AllowedValues), or when the key Secret is not one the
// hub generated for this Spoke; the last two are Stalled.
func (r *Reconciler) reconcileBootstrap(ctx context.Context, sp *tugboatv1alpha1.Spoke) time.Duration {
	if sp.Spec.AgentBootstrap == nil {
		statuspatch.Delete(sp, tugboatv1alpha1.AgentInstalledCondition)
		return 0
	}
	refused := func(err bootstrapRefused) time.Duration {
		r.setCondition(sp, tugboatv1alpha1.StalledCondition, metav1.ConditionTrue, err.reason, err.msg)
		r.setCondition(sp, tugboatv1alpha1.AgentInstalledCondition, metav1.ConditionFalse, err.reason, err.msg)
		return 0
	}
	values, stop := r.bootstrapValues(sp.Spec.AgentBootstrap)
	if stop != nil {
		return refused(*stop)
	}
	if sp.Spec.Suspend {
		msg := "spec.suspend is true: the hub installs and upgrades no agent on a suspended spoke; it resumes when spec.suspend is false"
		if st := sp.Status.AgentBootstrap; st != nil {
			msg += fmt.Sprintf(" (installed: agent %s, release revision %d, left as it is)", displayVersion(st.Version), st.Revision)
		}
		r.setCondition(sp, tugboatv1alpha1.AgentInstalledCondition, metav1.ConditionFalse, tugboatv1alpha1.SuspendedReason, msg)
		return 0
	}
	version := r.Bootstrap.Version
	if st := sp.Status.AgentBootstrap; st != nil && st.Version == version && st.ObservedGeneration == sp.Generation &&
		apimeta.IsStatusConditionTrue(sp.Status.Conditions, tugboatv1alpha1.AgentInstalledCondition.String()) {
		return 0
	}
	waiting := func(reason tugboatv1alpha1.ConditionReason, msg string) time.Duration {
		r.setCondition(sp, tugboatv1alpha1.AgentInstalledCondition, metav1.ConditionFalse, reason, msg)
		return bootstrapRetry
	}
	if ref := sp.Spec.ClusterRef; ref != nil {
		ready, msg, err := r.controlPlaneInitialized(ctx, sp.Namespace, ref.Name)
		if err != nil {
			return waiting(tugboatv1alpha1.InstallFailedReason, err.Error())
		}
		if !ready {
			return waiting(tugboatv1alpha1.WaitingForControlPlaneReason, msg)
		}
	}
	rel, err := r.installAgent(ctx, sp, version, values)
	if stop := (bootstrapRefused{}); errors.As(err, &stop) {
		return refused(stop)
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "Installing the spoke's agent")
		return waiting(tugboatv1alpha1.InstallFailedReason, err.Error())
	}
	sp.Status.AgentBootstrap = &tugboatv1alpha1.AgentBootstrapStatus{
		Version: version, ChartVersion: rel.chartVersion, Revision: rel.revision,
		ObservedGeneration: sp.Generation, InstalledAt: &metav1.Time{Time: r.Now().UTC().Truncate(time.Second)},
	}
	r.setCondition(sp, tugboatv1alpha1.AgentInstalledCondition, metav1.ConditionTrue, tugboatv1alpha1.AgentInstalledReason,
		fmt.Sprintf("agent %s installed (chart tugboat-agent %s, release revision %d); it reports once its Pod is ready", displayVersion(version), rel.chartVersion, rel.revision))
	return 0
}

// controlPlaneInitialized reads the Cluster API Cluster name in namespace:
// whether its control plane accepts requests, and if not, what it waits for.
func (r *Reconciler) controlPlaneInitialized(ctx context.Context, namespace, name string) (bool, string, error) {
	cluster := &clusterv1.Cluster{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cluster)
	switch {
	case apimeta.IsNoMatchError(err):
		return false, "", fmt.Errorf("spec.clusterRef names Cluster %s, but the hub does not serve Cluster API's %s Clusters (is Cluster API installed?)", name, clusterv1.GroupVersion)
	case apierrors.IsNotFound(err):
		return false, fmt.Sprintf("waiting for Cluster %s/%s to exist", namespace, name), nil
	case err != nil:
		return false, "", fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, err)
	}
	if init := cluster.Status.Initialization.ControlPlaneInitialized; init == nil || !*init {
		msg := fmt.Sprintf("waiting for the control plane of Cluster %s/%s to be initialized", namespace, name)
		if c := apimeta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterAvailableCondition); c != nil && c.Message != "" {
			msg += " (Available: " + c.Message + ")"
		}
		return false, msg, nil
	}
	return true, "", nil
}

// installed is what an install did.
type installed struct {
	chartVersion string
	revision     int32
}

// bootstrapValues decodes spec.agentBootstrap.values, refusing what the hub
// does not allow (DecodeBootstrapValues).
func (r *Reconciler) bootstrapValues(boot *tugboatv1alpha1.AgentBootstrap) (map[string]any, *bootstrapRefused) {
	values, reason, msg := DecodeBootstrapValues(boot, "spec.agentBootstrap.values", r.Bootstrap.AllowedValues)
	if msg != "" {
		return nil, &bootstrapRefused{reason: reason, msg: msg}
	}
	return values, nil
}

// checkGeneratedKey returns a bootstrapRefused unless key is the key Secret
// the hub generated for sp (checkKeySecret): labeled
// tugboat.dev/spoke=<sp's name> and controlled by sp. The bootstrap copies
// the key to a cluster the Spoke's author may control, so it copies no
// other Secret of the namespace (another Spoke's key, a CI token).
func checkGeneratedKey(sp *tugboatv1alpha1.Spoke, key *corev1.Secret) error {
	owner := metav1.GetControllerOf(key)
	if key.Labels[tugboatv1alpha1.LabelSpoke] == sp.Name && owner != nil && owner.UID == sp.UID &&
		owner.Kind == "Spoke" && strings.HasPrefix(owner.APIVersion, tugboatv1alpha1.GroupVersion.Group+"/") {
		return nil
	}
	return bootstrapRefused{reason: tugboatv1alpha1.KeySecretNotGeneratedReason, msg: fmt.Sprintf(
		"secret %s (spec.keySecretRef) is not a key the hub generated for this Spoke (labeled %s=%s and controlled by the Spoke): "+
			"the bootstrap copies no other Secret to the spoke; delete it to have the hub generate one, or, if it was made for this Spoke, "+
			"label it and set the Spoke as its controller owner; nothing is installed",
		key.Name, tugboatv1alpha1.LabelSpoke, sp.Name)}
}

// installAgent writes the namespace, the spoke's key (and the hub's CA) to
// the spoke, then installs or upgrades the agent's chart there with values.
func (r *Reconciler) installAgent(ctx context.Context, sp *tugboatv1alpha1.Spoke, version string, values map[string]any) (installed, error) {
	boot := sp.Spec.AgentBootstrap
	cfg, err := spokeaccess.RESTConfig(ctx, r.APIReader, sp)
	if err != nil {
		return installed{}, err
	}
	cfg = spokeaccess.Guard(rest.CopyConfig(cfg), r.Bootstrap.Egress)
	cfg.Timeout = r.Bootstrap.Timeout
	key := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.KeySecretRef.Name}, key); err != nil {
		return installed{}, fmt.Errorf("reading the spoke's key Secret %s: %w", sp.Spec.KeySecretRef.Name, err)
	}
	if err := checkGeneratedKey(sp, key); err != nil {
		return installed{}, err
	}
	hubValues := map[string]any{"url": boot.HubURL, "keySecretName": bootstrapKeySecret}
	secrets := map[string]map[string][]byte{
		bootstrapKeySecret: {tugboatv1alpha1.SpokeKeySecretKey: key.Data[tugboatv1alpha1.SpokeKeySecretKey]},
	}
	if boot.CASecretRef != nil {
		ca := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: boot.CASecretRef.Name}, ca); err != nil {
			return installed{}, fmt.Errorf("reading the hub's CA Secret %s: %w", boot.CASecretRef.Name, err)
		}
		if len(ca.Data["ca.crt"]) == 0 {
			return installed{}, fmt.Errorf("the hub's CA Secret %s has no ca.crt", boot.CASecretRef.Name)
		}
		// Only certificates (public) are copied: a caSecretRef cannot carry
		// another Secret's private data to the spoke under "ca.crt".
		if err := onlyCertificates(ca.Data["ca.crt"]); err != nil {
			return installed{}, bootstrapRefused{reason: tugboatv1alpha1.InvalidSpecReason,
				msg: fmt.Sprintf("the hub's CA Secret %s (spec.agentBootstrap.caSecretRef): ca.crt %v; nothing is installed", boot.CASecretRef.Name, err)}
		}
		secrets[bootstrapCASecret] = map[string][]byte{"ca.crt": ca.Data["ca.crt"]}
		hubValues["caSecretName"] = bootstrapCASecret
	}
	values["spoke"], values["hub"] = sp.Name, hubValues
	if version != "" && version != "dev" {
		image, _ := values["image"].(map[string]any)
		if image == nil {
			image = map[string]any{}
		}
		if _, set := image["tag"]; !set {
			image["tag"] = version
		}
		values["image"] = image
	}

	spoke, err := client.New(cfg, client.Options{})
	if err != nil {
		return installed{}, fmt.Errorf("connecting to the spoke: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bootstrapNamespace}}
	if err := spoke.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return installed{}, fmt.Errorf("creating namespace %s on the spoke: %w", bootstrapNamespace, err)
	}
	for name, data := range secrets {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: bootstrapNamespace, Name: name,
				Labels: map[string]string{"app.kubernetes.io/part-of": "tugboat", "app.kubernetes.io/managed-by": "tugboat-hub"}},
			Type: corev1.SecretTypeOpaque, Data: data,
		}
		err := spoke.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			cur := &corev1.Secret{}
			if err = spoke.Get(ctx, client.ObjectKeyFromObject(s), cur); err == nil {
				cur.Data = data
				err = spoke.Update(ctx, cur)
			}
		}
		if err != nil {
			return installed{}, fmt.Errorf("writing Secret %s/%s on the spoke: %w", bootstrapNamespace, name, err)
		}
	}
	rel, err := config.Apply(ctx, config.Target{RESTConfig: cfg, Namespace: bootstrapNamespace}, config.AgentChart, values, r.Bootstrap.Timeout)
	if err != nil {
		return installed{}, err
	}
	if rel.Chart == nil || rel.Chart.Metadata == nil {
		return installed{}, errors.New("the agent's chart was installed, but Helm returned no chart")
	}
	return installed{chartVersion: rel.Chart.Metadata.Version, revision: int32(rel.Version)}, nil //nolint:gosec // a Helm revision is small
}

// onlyCertificates reports an error unless data is one or more PEM
// certificates and nothing else.
func onlyCertificates(data []byte) error {
	rest := bytes.TrimSpace(data)
	n := 0
	for len(rest) > 0 {
		block, after := pem.Decode(rest)
		if block == nil {
			return errors.New("holds something other than PEM blocks")
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("holds a PEM %s, not only certificates", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("holds an invalid certificate: %w", err)
		}
		n++
		rest = bytes.TrimSpace(after)
	}
	if n == 0 {
		return errors.New("holds no certificate")
	}
	return nil
}

// displayVersion names a version in messages.
func displayVersion(v string) string {
	if v == "" || v == "dev" {
		return "(the chart's default image)"
	}
	return v
}
