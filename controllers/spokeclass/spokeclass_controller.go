// Package spokeclass turns Cluster API Clusters into Spokes: a SpokeClass
// selects Clusters of its namespace by label, and for each the reconciler
// keeps a Spoke of the Cluster's name, owned by the Cluster, carrying its
// labels, with a key and (when the class asks) the agent bootstrap that the
// Spoke reconciler carries out. It deletes the Spokes of Clusters that are
// gone or no longer selected.
//
// It is not the Cluster API's controllers: it only reads Clusters, and runs
// only when the hub's API server serves them (Available).
package spokeclass

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/spoke"
	"tugboat.dev/tugboat/controllers/statuspatch"
)

// KeySecretSuffix names a class Spoke's key Secret: <cluster>-tugboat-key
// (Cluster API's own Secrets of a Cluster end in -kubeconfig, -ca, -etcd,
// -proxy and -sa).
const KeySecretSuffix = "-tugboat-key"

// Reasons of a SpokeClass's Ready condition.
const (
	// SpokesReadyReason: every selected Cluster has its Spoke.
	SpokesReadyReason tugboatv1alpha1.ConditionReason = "SpokesReconciled"
	// NameTakenReason: a selected Cluster's name is already a Spoke the class
	// does not own.
	NameTakenReason tugboatv1alpha1.ConditionReason = "SpokeNameTaken"
	// ReconcileFailedReason: the class could not be reconciled (a List or a
	// Spoke write failed); the message names it, and it is tried again.
	ReconcileFailedReason tugboatv1alpha1.ConditionReason = "ReconcileFailed"
)

// Reconciler reconciles SpokeClasses.
type Reconciler struct {
	Client client.Client
	// AllowedValues are the agent chart values spec.agent.values may set
	// (the hub's --bootstrap-allowed-values, as the Spoke reconciler
	// applies them): a class setting others is not Ready, and each of its
	// Spokes is Stalled with no install.
	AllowedValues []string
}

// +kubebuilder:rbac:groups=tugboat.dev,resources=spokeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=tugboat.dev,resources=spokeclasses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=tugboat.dev,resources=spokes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch

// Available reports whether the API server of cfg serves Cluster API's
// core Clusters: the reconciler is set up only then (it watches them).
func Available(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	res, err := dc.ServerResourcesForGroupVersion(clusterv1.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discovering %s: %w", clusterv1.GroupVersion, err)
	}
	return slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Kind == "Cluster" }), nil
}

// SetupWithManager registers the reconciler: SpokeClasses, and the
// Clusters and Spokes of their namespaces.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&tugboatv1alpha1.SpokeClass{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.classesOfNamespace)).
		Watches(&tugboatv1alpha1.Spoke{}, handler.EnqueueRequestsFromMapFunc(r.classesOfNamespace)).
		Named("spokeclass").
		Complete(r)
}

// classesOfNamespace maps a Cluster or Spoke to the SpokeClasses of its
// namespace: any of them may select it, or own it.
func (r *Reconciler) classesOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var list tugboatv1alpha1.SpokeClassList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "Listing SpokeClasses", "namespace", o.GetNamespace())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
	}
	return reqs
}

// Reconcile keeps the Spokes of one SpokeClass. Its status is patched once,
// in a deferred patch, whatever the way out: a failure (a List the API
// server refuses, a Spoke that cannot be written) leaves Ready=False naming
// it, and the error makes the workqueue try again.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	class := &tugboatv1alpha1.SpokeClass{}
	if err := r.Client.Get(ctx, req.NamespacedName, class); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !class.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	patcher := statuspatch.New(class, r.Client)
	defer func() {
		if retErr != nil {
			r.setReady(class, metav1.ConditionFalse, ReconcileFailedReason, retErr.Error())
		}
		retErr = patcher.Patch(ctx, class, retErr == nil, retErr)
	}()
	selector, err := metav1.LabelSelectorAsSelector(&class.Spec.ClusterSelector)
	if err != nil {
		// The API server validates selectors; this is a stale object.
		r.setReady(class, metav1.ConditionFalse, tugboatv1alpha1.InvalidSpecReason, "spec.clusterSelector: "+err.Error())
		return ctrl.Result{}, nil
	}
	var clusters clusterv1.ClusterList
	if err := r.Client.List(ctx, &clusters, client.InNamespace(class.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing Clusters: %w", err)
	}
	var spokes tugboatv1alpha1.SpokeList
	if err := r.Client.List(ctx, &spokes, client.InNamespace(class.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing Spokes: %w", err)
	}
	existing := map[string]*tugboatv1alpha1.Spoke{}
	for i := range spokes.Items {
		existing[spokes.Items[i].Name] = &spokes.Items[i]
	}

	selected := map[string]bool{}
	var taken []string
	for i := range clusters.Items {
		cluster := &clusters.Items[i]
		if !cluster.DeletionTimestamp.IsZero() {
			continue
		}
		sp := existing[cluster.Name]
		if sp != nil && !ownedBy(sp, class, cluster) {
			taken = append(taken, cluster.Name)
			continue
		}
		selected[cluster.Name] = true
		if err := r.ensureSpoke(ctx, class, cluster, sp); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Spokes of the class whose Cluster is gone or no longer selected go.
	for name, sp := range existing {
		if sp.Labels[tugboatv1alpha1.LabelSpokeClass] != class.Name || selected[name] {
			continue
		}
		if err := r.Client.Delete(ctx, sp); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting Spoke %s: %w", name, err)
		}
		log.FromContext(ctx).Info("Deleted the Spoke of a Cluster no longer selected", "spoke", name)
	}

	class.Status.Spokes = slices.Sorted(maps.Keys(selected))
	var refused string
	if class.Spec.Agent != nil {
		_, _, refused = spoke.DecodeBootstrapValues(class.Spec.Agent, "spec.agent.values", r.AllowedValues)
	}
	switch {
	case refused != "":
		// The Spokes are kept (they carry the values too, and refuse them
		// with the same message); nothing is installed.
		r.setReady(class, metav1.ConditionFalse, tugboatv1alpha1.ValuesNotAllowedReason, refused)
	case len(taken) > 0:
		sort.Strings(taken)
		r.setReady(class, metav1.ConditionFalse, NameTakenReason, fmt.Sprintf(
			"Clusters %s are selected, but a Spoke of the same name exists that the class does not own: rename or delete it (Spoke names are unique across the hub)",
			strings.Join(taken, ", ")))
	default:
		r.setReady(class, metav1.ConditionTrue, SpokesReadyReason, fmt.Sprintf("%d Clusters selected, each with its Spoke", len(selected)))
	}
	return ctrl.Result{}, nil
}

// ensureSpoke creates or updates the Spoke of cluster (sp when it exists):
// the Cluster's name, labels and owner reference, the class's label, key
// Secret name, and agent bootstrap.
func (r *Reconciler) ensureSpoke(ctx context.Context, class *tugboatv1alpha1.SpokeClass, cluster *clusterv1.Cluster, sp *tugboatv1alpha1.Spoke) error {
	create := sp == nil
	if create {
		sp = &tugboatv1alpha1.Spoke{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name}}
	}
	before := sp.DeepCopy()
	want := map[string]string{}
	maps.Copy(want, class.Spec.SpokeLabels)
	maps.Copy(want, cluster.Labels)
	want[tugboatv1alpha1.LabelSpokeClass] = class.Name
	if sp.Labels == nil {
		sp.Labels = map[string]string{}
	}
	// Labels the class set before and no longer sets go; others' stay.
	for k := range before.Labels {
		if _, ok := want[k]; !ok && wasClassLabel(before, k) {
			delete(sp.Labels, k)
		}
	}
	maps.Copy(sp.Labels, want)
	setClassLabels(sp, want)
	if err := controllerutil.SetControllerReference(cluster, sp, r.Client.Scheme()); err != nil {
		return err
	}
	sp.Spec.ClusterRef = &tugboatv1alpha1.ObjectReference{Name: cluster.Name}
	sp.Spec.KubeConfigSecretRef = nil
	if sp.Spec.KeySecretRef.Name == "" {
		sp.Spec.KeySecretRef.Name = cluster.Name + KeySecretSuffix
	}
	sp.Spec.AgentBootstrap = class.Spec.Agent.DeepCopy()
	if create {
		if err := r.Client.Create(ctx, sp); err != nil {
			return fmt.Errorf("creating Spoke %s for Cluster %s: %w", sp.Name, cluster.Name, err)
		}
		log.FromContext(ctx).Info("Created a Spoke for a Cluster", "spoke", sp.Name)
		return nil
	}
	if equalSpoke(before, sp) {
		return nil
	}
	if err := r.Client.Update(ctx, sp); err != nil {
		return fmt.Errorf("updating Spoke %s for Cluster %s: %w", sp.Name, cluster.Name, err)
	}
	return nil
}

// classLabelsAnnotation lists the label keys the class set on a Spoke, so
// that a label removed from the Cluster is removed from the Spoke too.
const classLabelsAnnotation = "tugboat.dev/class-labels"

func wasClassLabel(sp *tugboatv1alpha1.Spoke, key string) bool {
	return slices.Contains(strings.Split(sp.Annotations[classLabelsAnnotation], ","), key)
}

func setClassLabels(sp *tugboatv1alpha1.Spoke, labelsSet map[string]string) {
	if sp.Annotations == nil {
		sp.Annotations = map[string]string{}
	}
	sp.Annotations[classLabelsAnnotation] = strings.Join(slices.Sorted(maps.Keys(labelsSet)), ",")
}

func equalSpoke(a, b *tugboatv1alpha1.Spoke) bool {
	return labels.Equals(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		slices.EqualFunc(a.OwnerReferences, b.OwnerReferences, func(x, y metav1.OwnerReference) bool { return x.UID == y.UID && x.Name == y.Name }) &&
		equality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// ownedBy reports whether sp is the class's Spoke of cluster (or of a
// Cluster of that name the class selected before).
func ownedBy(sp *tugboatv1alpha1.Spoke, class *tugboatv1alpha1.SpokeClass, cluster *clusterv1.Cluster) bool {
	if sp.Labels[tugboatv1alpha1.LabelSpokeClass] == class.Name {
		return true
	}
	ref := metav1.GetControllerOf(sp)
	return ref != nil && ref.UID == cluster.UID
}

func (r *Reconciler) setReady(class *tugboatv1alpha1.SpokeClass, status metav1.ConditionStatus, reason tugboatv1alpha1.ConditionReason, msg string) {
	statuspatch.Set(class, tugboatv1alpha1.ReadyCondition, status, reason, msg)
}
