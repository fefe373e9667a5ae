package spoke

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	"tugboat.dev/tugboat/controllers/releasehistory"
	"tugboat.dev/tugboat/controllers/statuspatch"
)

// Options configure the Spoke reconciler.
type Options struct {
	// HeartbeatTimeout is how long after the last heartbeat a Spoke stays
	// Ready; after it, Ready becomes Unknown.
	HeartbeatTimeout time.Duration
	// KeySecretRecheck is how long a key Secret found fine is trusted
	// without reading it again, as long as the Spoke's generation and keys
	// annotation (tugboatv1alpha1.KeysUpdatedAtAnnotation) stay the same: the
	// bound within which a deleted Secret is regenerated and a broken one
	// reported. 0 reads it on every reconcile. The hub sets it to
	// --spoke-key-cache-ttl.
	KeySecretRecheck time.Duration
}

// NewOptions returns the defaults: three missed 30 s heartbeats, and the
// key Secret checked again every 5 minutes.
func NewOptions() Options {
	return Options{HeartbeatTimeout: 90 * time.Second, KeySecretRecheck: 5 * time.Minute}
}

// BindFlags binds the options to flags.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.HeartbeatTimeout, "spoke-heartbeat-timeout", o.HeartbeatTimeout, "time after the last agent heartbeat before a Spoke's Ready turns Unknown")
}

// Validate reports an invalid option.
func (o *Options) Validate() error {
	if o.HeartbeatTimeout <= 0 {
		return fmt.Errorf("--spoke-heartbeat-timeout must be positive")
	}
	if o.KeySecretRecheck < 0 {
		return fmt.Errorf("the key Secret recheck interval (--spoke-key-cache-ttl) must not be negative")
	}
	return nil
}

// Reconciler reconciles Spokes.
type Reconciler struct {
	// Client reads Spokes from the cache and writes.
	Client client.Client
	// APIReader reads Secrets without caching them (the hub does not watch
	// Secrets).
	APIReader client.Reader
	Options   Options
	// Bootstrap configures the agent installs of spec.agentBootstrap.
	Bootstrap BootstrapOptions
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
	// Recorder emits the Events of a spoke lost or ready; nil emits none.
	Recorder events.EventRecorder
	// Heartbeats, when set, are the hub replicas' heartbeat digests:
	// readiness follows the newest of status.lastSeen and them. Nil:
	// status.lastSeen alone.
	Heartbeats Heartbeats

	// notHeard remembers the Spokes found without a heartbeat (see
	// heardAgain).
	notHeard notHeard

	// keyChecks remembers, per Spoke, the last key Secret check that found
	// it fine (see reconcileKeySecret).
	keyChecks keyChecks
}

// +kubebuilder:rbac:groups=tugboat.dev,resources=spokes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=tugboat.dev,resources=spokes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create

// SetupWithManager registers the reconciler. The Spoke name index must be
// registered on mgr (releasehistory.IndexSpokeNames).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&tugboatv1alpha1.Spoke{}).
		// A Spoke created or deleted elsewhere with the same name changes
		// whether this one's name is unique.
		Watches(&tugboatv1alpha1.Spoke{}, handler.EnqueueRequestsFromMapFunc(r.sameName))
	if r.Heartbeats != nil {
		// A digest that hears a Spoke found lost brings it back at once.
		b = b.Watches(r.Heartbeats.Object(), handler.EnqueueRequestsFromMapFunc(r.heardAgain))
	}
	return b.Named("spoke").Complete(r)
}

// sameName maps a Spoke to the other Spokes of the same name.
func (r *Reconciler) sameName(ctx context.Context, o client.Object) []reconcile.Request {
	var list tugboatv1alpha1.SpokeList
	if err := r.Client.List(ctx, &list, client.MatchingFields{releasehistory.SpokeNameIndex: o.GetName()}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, s := range list.Items {
		if s.UID != o.GetUID() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
		}
	}
	return reqs
}

// Reconcile brings one Spoke's status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	sp := &tugboatv1alpha1.Spoke{}
	if err := r.Client.Get(ctx, req.NamespacedName, sp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// Every status write on the Spoke (a change of readiness, a refresh of
	// lastSeen) brings it here; most reconciles change nothing, and the
	// patcher then sends no request.
	patcher := statuspatch.New(sp, r.Client)
	before := slices.Clone(sp.Status.Conditions)
	defer func() {
		observed := apimeta.IsStatusConditionTrue(sp.Status.Conditions, tugboatv1alpha1.StalledCondition.String()) ||
			!apimeta.IsStatusConditionTrue(sp.Status.Conditions, tugboatv1alpha1.ReconcilingCondition.String())
		if err := patcher.Patch(ctx, sp, observed, nil); err != nil {
			if retErr == nil {
				retErr = err
			}
			return
		}
		recordReadiness(r.Recorder, sp, before)
	}()

	agentless, err := r.reconcileKeySecret(ctx, sp)
	if err != nil {
		if stalled := (stalledError{}); errors.As(err, &stalled) {
			r.setStalled(sp, stalled.reason, stalled.Error())
			return ctrl.Result{}, nil
		}
		r.setCondition(sp, tugboatv1alpha1.ReconcilingCondition, metav1.ConditionTrue, tugboatv1alpha1.ProgressingReason, err.Error())
		return ctrl.Result{}, err
	}
	if err := r.reconcileUniqueName(ctx, sp); err != nil {
		if stalled := (stalledError{}); errors.As(err, &stalled) {
			r.setStalled(sp, stalled.reason, stalled.Error())
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	statuspatch.Delete(sp, tugboatv1alpha1.StalledCondition)
	statuspatch.Delete(sp, tugboatv1alpha1.ReconcilingCondition)
	requeue := time.Duration(0)
	if agentless && sp.Status.LastSeen == nil {
		r.reconcileFluxReady(sp)
	} else {
		requeue = r.reconcileReady(ctx, sp)
	}
	if again := r.reconcileBootstrap(ctx, sp); again > 0 && (requeue == 0 || again < requeue) {
		requeue = again
	}
	// Check the key Secret again within the bound even when nothing
	// brings the Spoke here (a quiet, agentless spoke).
	if again := r.Options.KeySecretRecheck; again > 0 && (requeue == 0 || again < requeue) {
		requeue = again
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

type stalledError struct {
	reason tugboatv1alpha1.ConditionReason
	msg    string
}

func (e stalledError) Error() string { return e.msg }

// reconcileKeySecret makes sure the key Secret exists: a missing one is
// generated (32 random bytes, hex), owned by the Spoke, and the Spoke's
// keys annotation set. A Secret without a key is a configuration error. It
// reports whether the Secret holds a Flux key (the spoke may be agentless).
//
// The Spoke is reconciled on every status write (each heartbeat), so the
// Secret is read only when something that matters changed since it was
// last found fine: the Spoke's generation (spec.keySecretRef), its keys
// annotation, or KeySecretRecheck elapsed (see keyChecks).
func (r *Reconciler) reconcileKeySecret(ctx context.Context, sp *tugboatv1alpha1.Spoke) (bool, error) {
	now := r.Now()
	if agentless, ok := r.keyChecks.fresh(sp, now, r.Options.KeySecretRecheck); ok {
		return agentless, nil
	}
	agentless, err := r.checkKeySecret(ctx, sp)
	if err != nil {
		r.keyChecks.forget(sp.UID)
		return false, err
	}
	r.keyChecks.found(sp, now, agentless)
	return agentless, nil
}

// checkKeySecret reads the key Secret and generates it when missing (see
// reconcileKeySecret).
func (r *Reconciler) checkKeySecret(ctx context.Context, sp *tugboatv1alpha1.Spoke) (bool, error) {
	name := sp.Spec.KeySecretRef.Name
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return false, err
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: sp.Namespace, Name: name,
				Labels: map[string]string{tugboatv1alpha1.LabelSpoke: sp.Name},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{tugboatv1alpha1.SpokeKeySecretKey: []byte(hex.EncodeToString(raw))},
		}
		if err := controllerutil.SetControllerReference(sp, secret, r.Client.Scheme()); err != nil {
			return false, err
		}
		if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating key secret %s: %w", name, err)
		}
		log.FromContext(ctx).Info("generated a key secret for the spoke", "secret", name)
		// Tell every hub replica (and this controller's next reconcile)
		// that the keys changed; a cached "no Secret" is dropped at once.
		if err := MarkKeysUpdated(ctx, r.Client, sp, r.Now()); err != nil {
			return false, err
		}
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading key secret %s: %w", name, err)
	}
	if msg := checkKeys(secret); msg != "" {
		return false, stalledError{reason: tugboatv1alpha1.InvalidSpecReason, msg: fmt.Sprintf("secret %s: %s", name, msg)}
	}
	return len(bytes.TrimSpace(secret.Data[tugboatv1alpha1.SpokeFluxKeySecretKey])) > 0, nil
}

// checkKeys returns what is wrong with the keys of a Spoke's key Secret,
// or "": the agent's key is required, every key present is at least
// wire.MinSpokeKeySize bytes (as the receiver uses them: surrounding
// whitespace trimmed), and no Flux key is an agent key.
func checkKeys(secret *corev1.Secret) string {
	key := func(k string) []byte { return bytes.TrimSpace(secret.Data[k]) }
	for _, k := range []string{
		tugboatv1alpha1.SpokeKeySecretKey, tugboatv1alpha1.SpokePreviousKeySecretKey,
		tugboatv1alpha1.SpokeFluxKeySecretKey, tugboatv1alpha1.SpokePreviousFluxKeySecretKey,
	} {
		v, present := secret.Data[k]
		if !present && k != tugboatv1alpha1.SpokeKeySecretKey {
			continue
		}
		if n := len(bytes.TrimSpace(v)); n < wire.MinSpokeKeySize {
			return fmt.Sprintf("key %q holds %d bytes; the hub needs at least %d (for example: openssl rand -hex 32)", k, n, wire.MinSpokeKeySize)
		}
	}
	for _, f := range []string{tugboatv1alpha1.SpokeFluxKeySecretKey, tugboatv1alpha1.SpokePreviousFluxKeySecretKey} {
		for _, a := range []string{tugboatv1alpha1.SpokeKeySecretKey, tugboatv1alpha1.SpokePreviousKeySecretKey} {
			if flux := key(f); len(flux) > 0 && bytes.Equal(flux, key(a)) {
				return fmt.Sprintf("key %q must differ from %q: whoever can read the Flux Provider's Secret on the spoke could act as its agent, so the hub refuses a Flux key equal to an agent key", f, a)
			}
		}
	}
	return ""
}

// DuplicateNameReason is the Stalled reason of a Spoke whose name an older
// Spoke in another namespace already has.
const DuplicateNameReason tugboatv1alpha1.ConditionReason = "DuplicateName"

// reconcileUniqueName fails when sp does not own its name: another live
// Spoke of the same name, in another namespace, is older (ownsName).
//
// Only the newer Spoke is stalled, so a Spoke created later with a name
// already in use (a squatter) cannot halt the older one's bootstrap, and
// its message names no other namespace (it would tell one tenant where
// another's Spoke lives). The receiver needs no such rule: it serves each
// Spoke by the key that verifies a request, whatever this says.
func (r *Reconciler) reconcileUniqueName(ctx context.Context, sp *tugboatv1alpha1.Spoke) error {
	var list tugboatv1alpha1.SpokeList
	if err := r.Client.List(ctx, &list, client.MatchingFields{releasehistory.SpokeNameIndex: sp.Name}); err != nil {
		return err
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID != sp.UID && other.DeletionTimestamp.IsZero() && !ownsName(sp, other) {
			return stalledError{reason: DuplicateNameReason,
				msg: fmt.Sprintf("spoke name %q is already used by an older Spoke in another namespace; spoke names must be unique across the hub: "+
					"rename this Spoke (the hub does not install its agent while the name is taken)", sp.Name)}
		}
	}
	return nil
}

// ownsName reports whether sp, rather than other (a live Spoke of the same
// name in another namespace), owns the name: the older one by
// creationTimestamp, which the API server sets and no tenant can choose;
// between two created in the same second, the smaller UID (random, also
// not chosen), so that both Spokes' reconciles agree.
//
// Age, not "the Spoke whose agent reports": an agent authenticates with its
// own Spoke's key, so a squatter could run one with its key and take the
// name from a real Spoke still waiting for its bootstrap.
func ownsName(sp, other *tugboatv1alpha1.Spoke) bool {
	a, b := sp.CreationTimestamp.Time, other.CreationTimestamp.Time
	if !a.Equal(b) {
		return a.Before(b)
	}
	return sp.UID < other.UID
}

// reconcileReady sets Ready from the newest heartbeat (status.lastSeen or a
// hub replica's digest, see Heartbeats) and returns when to look again. A
// change of readiness also writes that time as status.lastSeen.
func (r *Reconciler) reconcileReady(ctx context.Context, sp *tugboatv1alpha1.Spoke) time.Duration {
	timeout := r.Options.HeartbeatTimeout
	key := client.ObjectKeyFromObject(sp)
	seen := r.lastHeard(ctx, sp)
	if seen.IsZero() {
		r.notHeard.set(key, true)
		r.setCondition(sp, tugboatv1alpha1.ReadyCondition, metav1.ConditionUnknown, tugboatv1alpha1.AgentNotSeenReason,
			"waiting for the agent's first heartbeat")
		return 0
	}
	if sp.Status.LastSeen != nil {
		if v := int(sp.Status.AgentProtocolVersion); v < wire.ProtocolVersion {
			r.setCondition(sp, tugboatv1alpha1.AgentOutdatedCondition, metav1.ConditionTrue, tugboatv1alpha1.OlderProtocolReason,
				fmt.Sprintf("agent %s speaks protocol v%d, the hub v%d: it still reports, but upgrade it (helm upgrade tugboat-agent, or tugboat install agent)",
					sp.Status.AgentVersion, v, wire.ProtocolVersion))
		} else {
			statuspatch.Delete(sp, tugboatv1alpha1.AgentOutdatedCondition)
		}
	}
	wasReady := apimeta.IsStatusConditionTrue(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
	age := r.Now().Sub(seen)
	if age <= timeout {
		if !wasReady {
			recordLastSeen(sp, seen)
		}
		r.notHeard.set(key, false)
		msg := "the agent is sending heartbeats"
		if sp.Status.AgentVersion != "" {
			msg = fmt.Sprintf("agent %s is sending heartbeats", sp.Status.AgentVersion)
		}
		r.setCondition(sp, tugboatv1alpha1.ReadyCondition, metav1.ConditionTrue, tugboatv1alpha1.AgentConnectedReason, msg)
		return timeout - age + 100*time.Millisecond
	}
	if wasReady {
		recordLastSeen(sp, seen)
	}
	r.notHeard.set(key, true)
	r.setCondition(sp, tugboatv1alpha1.ReadyCondition, metav1.ConditionUnknown, tugboatv1alpha1.AgentNotSeenReason,
		fmt.Sprintf("no heartbeat since %s (timeout %s)", seen.UTC().Format(time.RFC3339), timeout))
	return 0
}

// reconcileFluxReady sets Ready of an agentless spoke (a Flux key, no agent
// heartbeat ever): True once a Flux event arrived, Unknown
// (NoEventSinceSetup) before. Flux sends events only when something
// happens, so no timeout applies: a quiet spoke stays Ready.
func (r *Reconciler) reconcileFluxReady(sp *tugboatv1alpha1.Spoke) {
	if ev := sp.Status.LastFluxEvent; ev != nil {
		msg := "last Flux event received at " + ev.ReceivedAt.UTC().Format(time.RFC3339)
		if ev.Reason != "" {
			msg += ": " + ev.Reason
			if ev.Object != "" {
				msg += " of " + ev.Object
			}
		}
		r.setCondition(sp, tugboatv1alpha1.ReadyCondition, metav1.ConditionTrue, tugboatv1alpha1.FluxEventReceivedReason, msg)
		return
	}
	since := "it was set up"
	if at := sp.Annotations[tugboatv1alpha1.FluxSetupAnnotation]; at != "" {
		since = "setup at " + at
	}
	r.setCondition(sp, tugboatv1alpha1.ReadyCondition, metav1.ConditionUnknown, tugboatv1alpha1.NoEventSinceSetupReason,
		fmt.Sprintf("no Flux event received since %s: check the spoke's notification-controller Provider and Alert (kubectl -n flux-system get providers,alerts) and that it reaches the hub's /v1/flux/%s", since, sp.Name))
}

func (r *Reconciler) setStalled(sp *tugboatv1alpha1.Spoke, reason tugboatv1alpha1.ConditionReason, msg string) {
	r.setCondition(sp, tugboatv1alpha1.StalledCondition, metav1.ConditionTrue, reason, msg)
	r.setCondition(sp, tugboatv1alpha1.ReadyCondition, metav1.ConditionFalse, reason, msg)
	statuspatch.Delete(sp, tugboatv1alpha1.ReconcilingCondition)
}

func (r *Reconciler) setCondition(sp *tugboatv1alpha1.Spoke, t tugboatv1alpha1.ConditionType, s metav1.ConditionStatus, reason tugboatv1alpha1.ConditionReason, msg string) {
	statuspatch.Set(sp, t, s, reason, msg)
}
