package spoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
}

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch

// reconcileBootstrap installs, or upgrades, the agent's chart into the spoke
// when spec.agentBootstrap asks for it and what is installed is not the
// hub's version of this spec, and records it in status and the condition
// AgentInstalled. It returns when to look again (0: not before a change).
// Nothing is written to the spoke without spec.agentBootstrap.
func (r *Reconciler) reconcileBootstrap(ctx context.Context, sp *tugboatv1alpha1.Spoke) time.Duration {
	if sp.Spec.AgentBootstrap == nil {
		apimeta.RemoveStatusCondition(&sp.Status.Conditions, tugboatv1alpha1.AgentInstalledCondition.String())
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
	rel, err := r.installAgent(ctx, sp, version)
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

// installAgent writes the namespace, the spoke's key (and the hub's CA) to
// the spoke, then installs or upgrades the agent's chart there.
func (r *Reconciler) installAgent(ctx context.Context, sp *tugboatv1alpha1.Spoke, version string) (installed, error) {
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
	values := map[string]any{}
	if boot.Values != nil && len(boot.Values.Raw) > 0 {
		if err := json.Unmarshal(boot.Values.Raw, &values); err != nil {
			return installed{}, fmt.Errorf("spec.agentBootstrap.values: %w", err)
		}
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

// displayVersion names a version in messages.
func displayVersion(v string) string {
	if v == "" || v == "dev" {
		return "(the chart's default image)"
	}
	return v
}
