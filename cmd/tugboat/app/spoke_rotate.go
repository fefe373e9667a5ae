//go:build !agentonly

package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
	spokectl "tugboat.dev/tugboat/controllers/spoke"
)

// Where the agent reads its key on the spoke by default (what `tugboat
// install agent` writes).
const (
	defaultAgentKeyNamespace = "tugboat-system"
	defaultAgentKeySecret    = "tugboat-agent-hub-key"
)

// rotatedKey is what differs between rotating the agent's key and the
// Flux key.
type rotatedKey struct {
	// who signs with it, for messages.
	who string
	// current and previous are the keys of the Spoke's Secret on the hub.
	current, previous string
	// dataKey is the key of the Secret on the spoke that holds it.
	dataKey string
	// namespace and secret locate that Secret by default.
	namespace, secret string
	// evidence names what proves the new key is used, for messages.
	evidence string
	// signedWith returns the wire.KeyID of the key that signed the last
	// evidence the hub recorded.
	signedWith func(*tugboatv1alpha1.Spoke) string
}

var (
	agentKeyRotation = rotatedKey{
		who: "agent", current: tugboatv1alpha1.SpokeKeySecretKey, previous: tugboatv1alpha1.SpokePreviousKeySecretKey,
		dataKey: tugboatv1alpha1.SpokeKeySecretKey, namespace: defaultAgentKeyNamespace, secret: defaultAgentKeySecret,
		evidence:   "heartbeat",
		signedWith: func(sp *tugboatv1alpha1.Spoke) string { return sp.Status.SigningKeyID },
	}
	fluxKeyRotation = rotatedKey{
		who: "Flux notification-controller", current: tugboatv1alpha1.SpokeFluxKeySecretKey, previous: tugboatv1alpha1.SpokePreviousFluxKeySecretKey,
		dataKey: "token", namespace: "flux-system", secret: fluxSecretName,
		evidence: "Flux event",
		signedWith: func(sp *tugboatv1alpha1.Spoke) string {
			if ev := sp.Status.LastFluxEvent; ev != nil {
				return ev.KeyID
			}
			return ""
		},
	}
)

// spokeRotate is what `tugboat spoke rotate-key` was asked to do.
type spokeRotate struct {
	hf              hubFlags
	spokeKube       kubeFlags
	flux            bool
	keyNamespace    string
	keySecret       string
	timeout         time.Duration
	hubKeyCacheTTL  time.Duration
	newKey          func() ([]byte, error)
	pollingInterval time.Duration
	out             outputFlag
	// result is what run rotated, once it finished.
	result *keyRotation
}

// keyRotation is what `tugboat spoke rotate-key` prints with -o json|yaml
// (its progress then goes to stderr).
type keyRotation struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// KeySecret is the Spoke's key Secret on the hub, Key the key rotated
	// in it ("key", or "fluxKey" with --flux).
	KeySecret string `json:"keySecret"`
	Key       string `json:"key"`
	// KeyID identifies the new key (never the key itself), as the Spoke's
	// status.signingKeyID does.
	KeyID string `json:"keyID"`
	// Delivered reports whether the command wrote the new key to the spoke
	// (--spoke-context/--spoke-kubeconfig).
	Delivered bool `json:"delivered"`
}

func newSpokeRotateKeyCommand() *cobra.Command {
	o := spokeRotate{newKey: generateKey, pollingInterval: 500 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "rotate-key NAME",
		Short: "Replace a spoke agent's (or its Flux) key without refusing a single request",
		Long: `rotate-key replaces the key the agent of spoke NAME signs with (with --flux:
the key of its Flux notification-controller Provider), in the documented
two-key rotation:

  1. on the hub, the current key moves to "previousKey" ("previousFluxKey") of
     the Spoke's key Secret and a new random key (32 bytes, hex) becomes "key"
     ("fluxKey"), and the Spoke is annotated tugboat.dev/keys-updated-at: the
     hub accepts either from then on (it also re-reads the keys when a request
     fails to verify with the ones it holds, so the new key works at once);
  2. with --spoke-context or --spoke-kubeconfig, the new key is written to the
     Secret on the spoke that holds it (--key-namespace/--key-secret: by default
     tugboat-system/tugboat-agent-hub-key, key "key", where "tugboat install
     agent" put it; with --flux flux-system/tugboat-flux-key, key "token", where
     "tugboat spoke add --flux" put it); the agent re-reads its mounted key file
     (notification-controller its Provider's Secret) and signs with the new key
     from its next request. Without them, copy the key there yourself (the
     command says how; the key is never printed);
  3. it waits (--timeout) until the hub reports a heartbeat (a Flux event)
     signed with the new key (Spoke status.signingKeyID, or
     status.lastFluxEvent.keyID), then deletes the previous key and annotates
     the Spoke again: every hub replica re-reads the keys as soon as it sees
     the annotation change, and refuses the old key from then on. Flux posts only when a HelmRelease changes: give
     --flux a --timeout long enough for one, or run it again later.

If it stops before the end (timeout, Ctrl-C), both keys stay valid: running it
again resumes the rotation under way rather than starting another.`,
		Example: `  tugboat spoke rotate-key staging-1 -n fleet --spoke-context staging-1
  tugboat spoke rotate-key staging-1 -n fleet --timeout 10m
  tugboat spoke rotate-key edge-1 -n fleet --flux --spoke-context edge-1 --timeout 1h`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeSpokeNames(&o.hf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.out.validate(); err != nil {
				return err
			}
			progress := cmd.OutOrStdout()
			if o.out == "json" || o.out == "yaml" {
				progress = cmd.ErrOrStderr()
			}
			if err := o.run(cmd.Context(), progress, args[0]); err != nil {
				return err
			}
			_, err := o.out.structured(cmd.OutOrStdout(), o.result)
			return err
		},
	}
	o.hf.bind(cmd)
	o.out.bind(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&o.flux, "flux", false, "rotate the spoke's Flux key (fluxKey; the Provider's token) instead of its agent's")
	fl.StringVar(&o.spokeKube.kubeconfig, "spoke-kubeconfig", "", "kubeconfig file of the spoke cluster, to deliver the new key there (its current context unless --spoke-context)")
	fl.StringVar(&o.spokeKube.context, "spoke-context", "", "kubeconfig context of the spoke cluster, to deliver the new key there")
	fl.StringVar(&o.keyNamespace, "key-namespace", "", "namespace of the Secret on the spoke that holds the key (default tugboat-system; with --flux flux-system)")
	fl.StringVar(&o.keySecret, "key-secret", "", "name of that Secret (default tugboat-agent-hub-key; with --flux tugboat-flux-key)")
	fl.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for a heartbeat (a Flux event) signed with the new key")
	fl.DurationVar(&o.hubKeyCacheTTL, "hub-key-cache-ttl", 0, "only for a hub older than this command, which neither re-reads keys on a failed verification nor watches tugboat.dev/keys-updated-at: its --spoke-key-cache-ttl (10s then), waited out before the new key reaches the spoke. A current hub knows a new key at once: leave it 0")
	return cmd
}

func generateKey() ([]byte, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	return []byte(hex.EncodeToString(raw)), nil
}

func (o *spokeRotate) kind() rotatedKey {
	k := agentKeyRotation
	if o.flux {
		k = fluxKeyRotation
	}
	if o.keyNamespace != "" {
		k.namespace = o.keyNamespace
	}
	if o.keySecret != "" {
		k.secret = o.keySecret
	}
	return k
}

func (o *spokeRotate) validate(name string) error {
	errs := []error{validateSpokeName(name)}
	if o.timeout <= 0 {
		errs = append(errs, errors.New("--timeout must be positive"))
	}
	if o.hubKeyCacheTTL < 0 {
		errs = append(errs, errors.New("--hub-key-cache-ttl must not be negative"))
	}
	if o.keyNamespace != "" {
		if msgs := validation.IsDNS1123Label(o.keyNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--key-namespace %q is not a valid namespace: %s", o.keyNamespace, strings.Join(msgs, "; ")))
		}
	}
	if o.keySecret != "" {
		if msgs := validation.IsDNS1123Subdomain(o.keySecret); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--key-secret %q is not a valid Secret name: %s", o.keySecret, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

func (o *spokeRotate) run(ctx context.Context, out io.Writer, name string) error {
	if err := o.validate(name); err != nil {
		return usageErrorf("%w", err)
	}
	k := o.kind()
	s, err := o.hf.connect()
	if err != nil {
		return err
	}
	var spoke client.Client
	if o.spokeKube.kubeconfig != "" || o.spokeKube.context != "" {
		cfg, err := o.spokeKube.restConfig()
		if err != nil {
			return fmt.Errorf("loading the spoke's kubeconfig: %w", err)
		}
		if spoke, err = client.New(cfg, client.Options{}); err != nil {
			return fmt.Errorf("connecting to the spoke cluster: %w", err)
		}
	}
	sp, err := getSpoke(ctx, s, name)
	if err != nil {
		return err
	}
	secretKey := types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.KeySecretRef.Name}
	secret := &corev1.Secret{}
	if err := s.client.Get(ctx, secretKey, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("spoke %s/%s has no key Secret %s yet: the hub generates it (is the hub running?)", sp.Namespace, name, secretKey)
		}
		return fmt.Errorf("reading secret %s: %w", secretKey, err)
	}
	current := bytes.TrimSpace(secret.Data[k.current])
	if len(current) == 0 {
		if o.flux {
			return fmt.Errorf("secret %s has no Flux key (%q): spoke %s/%s is not set up for Flux (tugboat spoke add %s --flux)", secretKey, k.current, sp.Namespace, name, name)
		}
		return fmt.Errorf("secret %s has no key under %q: nothing to rotate", secretKey, k.current)
	}

	// 1. Two keys on the hub.
	if len(bytes.TrimSpace(secret.Data[k.previous])) > 0 {
		fmt.Fprintf(out, "A rotation of spoke %s/%s is under way (Secret %s holds %q): continuing it.\n", sp.Namespace, name, secretKey, k.previous)
	} else {
		key, err := o.newKey()
		if err != nil {
			return err
		}
		secret.Data[k.previous] = secret.Data[k.current]
		secret.Data[k.current] = key
		// Update, not patch: a concurrent change of the Secret (another
		// rotation) fails on its resourceVersion instead of being lost.
		if err := s.client.Update(ctx, secret, client.FieldOwner(cliFieldManager)); err != nil {
			return fmt.Errorf("writing the new key to secret %s: %w", secretKey, err)
		}
		current = key
		if err := spokectl.MarkKeysUpdated(ctx, s.client, sp, time.Now(), client.FieldOwner(cliFieldManager)); err != nil {
			return err
		}
		fmt.Fprintf(out, "1/3 The hub accepts the current and a new %s key of spoke %s/%s (Secret %s, %q and %q).\n",
			k.who, sp.Namespace, name, secretKey, k.current, k.previous)
		// A current hub re-reads the keys when a request fails to verify:
		// it knows the new key from the spoke's first request signed with
		// it. An older one only when its key cache expires.
		if o.hubKeyCacheTTL > 0 {
			fmt.Fprintf(out, "    Waiting %s for the hub's key cache to expire...\n", o.hubKeyCacheTTL)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(o.hubKeyCacheTTL + time.Second):
			}
		}
	}
	newID := wire.KeyID(current)

	// 2. The new key to the spoke.
	if spoke != nil {
		if err := deliverKey(ctx, spoke, k, current); err != nil {
			return err
		}
		fmt.Fprintf(out, "2/3 The new key is in Secret %s/%s on the spoke; the %s signs with it from its next request.\n", k.namespace, k.secret, k.who)
	} else {
		fmt.Fprintf(out, "2/3 Copy the new key to Secret %[3]s/%[4]s (key %[5]q) on the spoke, for example:\n"+
			"      kubectl -n %[1]s get secret %[2]s -o jsonpath='{.data.%[6]s}' --context <hub-context> | base64 -d > %[5]s &&\n"+
			"      kubectl -n %[3]s create secret generic %[4]s --from-file=%[5]s --dry-run=client -o yaml --context <spoke-context> | kubectl apply -f - --context <spoke-context> && rm %[5]s\n"+
			"    (or run this command with --spoke-context, which does it).\n",
			secretKey.Namespace, secretKey.Name, k.namespace, k.secret, k.dataKey, k.current)
	}

	// 3. Wait for the spoke to sign with it, then drop the previous key.
	fmt.Fprintf(out, "    Waiting up to %s for a %s signed with the new key (key id %s)...\n", o.timeout, k.evidence, newID)
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, o.pollingInterval, o.timeout, true, func(pctx context.Context) (bool, error) {
		cur := &tugboatv1alpha1.Spoke{}
		switch err := s.client.Get(pctx, types.NamespacedName{Namespace: sp.Namespace, Name: name}, cur); {
		case apierrors.IsNotFound(err):
			return false, fmt.Errorf("spoke %s/%s was deleted during the rotation", sp.Namespace, name)
		case err != nil:
			// Transient (the API server, the client's rate limiter near
			// the deadline): keep waiting; the timeout says what was seen.
			lastErr = err
			return false, nil
		}
		return k.signedWith(cur) == newID, nil
	})
	if err != nil {
		if wait.Interrupted(err) {
			msg := fmt.Sprintf("the hub saw no %s of spoke %s/%s signed with the new key within %s: both keys stay valid; once the %s has the new key, run this command again to finish",
				k.evidence, sp.Namespace, name, o.timeout, k.who)
			if lastErr != nil {
				msg += fmt.Sprintf(" (last error reading the Spoke: %v)", lastErr)
			}
			return errors.New(msg)
		}
		return err
	}
	if err := s.client.Get(ctx, secretKey, secret); err != nil {
		return fmt.Errorf("reading secret %s: %w", secretKey, err)
	}
	if !bytes.Equal(bytes.TrimSpace(secret.Data[k.current]), current) {
		return fmt.Errorf("secret %s changed during the rotation (its %q is no longer the new key): left as it is", secretKey, k.current)
	}
	delete(secret.Data, k.previous)
	if err := s.client.Update(ctx, secret, client.FieldOwner(cliFieldManager)); err != nil {
		return fmt.Errorf("removing the previous key from secret %s: %w", secretKey, err)
	}
	if err := spokectl.MarkKeysUpdated(ctx, s.client, sp, time.Now(), client.FieldOwner(cliFieldManager)); err != nil {
		return fmt.Errorf("the previous key is removed from secret %s, but %w", secretKey, err)
	}
	fmt.Fprintf(out, "3/3 The %s signs with the new key; the previous key is removed and the hub refuses it from now on.\n", k.who)
	o.result = &keyRotation{Namespace: sp.Namespace, Name: name, KeySecret: secretKey.String(), Key: k.current, KeyID: newID, Delivered: spoke != nil}
	return nil
}

// deliverKey writes key into the Secret on the spoke that holds it.
func deliverKey(ctx context.Context, spoke client.Client, k rotatedKey, key []byte) error {
	ref := types.NamespacedName{Namespace: k.namespace, Name: k.secret}
	secret := &corev1.Secret{}
	if err := spoke.Get(ctx, ref, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the spoke cluster has no Secret %s, where the %s reads its key: is it set up there, or is the Secret elsewhere (--key-namespace, --key-secret)?", ref, k.who)
		}
		return fmt.Errorf("reading Secret %s on the spoke: %w", ref, err)
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[k.dataKey] = key
	if err := spoke.Update(ctx, secret, client.FieldOwner(cliFieldManager)); err != nil {
		return fmt.Errorf("writing the new key to Secret %s on the spoke: %w", ref, err)
	}
	return nil
}
