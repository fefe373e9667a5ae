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
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// Where the agent reads its key on the spoke by default (what `tugboat
// install agent` writes).
const (
	defaultAgentKeyNamespace = "tugboat-system"
	defaultAgentKeySecret    = "tugboat-agent-hub-key"
)

// spokeRotate is what `tugboat spoke rotate-key` was asked to do.
type spokeRotate struct {
	hf              hubFlags
	spokeKube       kubeFlags
	agentNamespace  string
	agentSecret     string
	timeout         time.Duration
	hubKeyCacheTTL  time.Duration
	spokeKubeIsSet  bool
	newKey          func() ([]byte, error)
	pollingInterval time.Duration
}

func newSpokeRotateKeyCommand() *cobra.Command {
	o := spokeRotate{newKey: generateKey, pollingInterval: 500 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "rotate-key NAME",
		Short: "Replace a spoke agent's key without refusing a single request",
		Long: `rotate-key replaces the key the agent of spoke NAME signs with, in the
documented two-key rotation:

  1. on the hub, the current key moves to "previousKey" of the Spoke's key
     Secret and a new random key (32 bytes, hex) becomes "key": the hub accepts
     either from now on (once its key cache, --hub-key-cache-ttl, expired);
  2. with --spoke-context or --spoke-kubeconfig, the new key is written to the
     agent's Secret on the spoke (--agent-namespace/--agent-secret, where
     "tugboat install agent" put it); the agent re-reads its mounted key file
     and signs with the new key from its next request. Without them, copy the
     key there yourself (the command says how; the key is never printed);
  3. it waits (--timeout) until the hub reports a heartbeat signed with the new
     key (Spoke status.signingKeyID), then deletes "previousKey": the old key
     is refused from then on.

If it stops before the end (timeout, Ctrl-C), both keys stay valid: running it
again resumes the rotation under way rather than starting another.`,
		Example: `  tugboat spoke rotate-key staging-1 -n fleet --spoke-context staging-1
  tugboat spoke rotate-key staging-1 -n fleet --timeout 10m`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeSpokeNames(&o.hf),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.spokeKubeIsSet = o.spokeKube.kubeconfig != "" || o.spokeKube.context != ""
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	o.hf.bind(cmd)
	fl := cmd.Flags()
	fl.StringVar(&o.spokeKube.kubeconfig, "spoke-kubeconfig", "", "kubeconfig file of the spoke cluster, to deliver the new key to the agent (its current context unless --spoke-context)")
	fl.StringVar(&o.spokeKube.context, "spoke-context", "", "kubeconfig context of the spoke cluster, to deliver the new key to the agent")
	fl.StringVar(&o.agentNamespace, "agent-namespace", defaultAgentKeyNamespace, "namespace of the agent's key Secret on the spoke")
	fl.StringVar(&o.agentSecret, "agent-secret", defaultAgentKeySecret, "name of the agent's key Secret on the spoke (key \"key\")")
	fl.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the agent to sign with the new key")
	fl.DurationVar(&o.hubKeyCacheTTL, "hub-key-cache-ttl", 10*time.Second, "the hub's --spoke-key-cache-ttl: how long after writing the new key the hub may still not know it (the key reaches the agent only after it)")
	return cmd
}

func generateKey() ([]byte, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	return []byte(hex.EncodeToString(raw)), nil
}

func (o *spokeRotate) validate(name string) error {
	errs := []error{validateSpokeName(name)}
	if o.timeout <= 0 {
		errs = append(errs, errors.New("--timeout must be positive"))
	}
	if o.hubKeyCacheTTL < 0 {
		errs = append(errs, errors.New("--hub-key-cache-ttl must not be negative"))
	}
	if o.agentNamespace == "" || o.agentSecret == "" {
		errs = append(errs, errors.New("--agent-namespace and --agent-secret must not be empty"))
	}
	return errors.Join(errs...)
}

func (o *spokeRotate) run(ctx context.Context, out io.Writer, name string) error {
	if err := o.validate(name); err != nil {
		return err
	}
	s, err := o.hf.connect()
	if err != nil {
		return err
	}
	var spoke client.Client
	if o.spokeKubeIsSet {
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
	current := bytes.TrimSpace(secret.Data[tugboatv1alpha1.SpokeKeySecretKey])
	if len(current) == 0 {
		return fmt.Errorf("secret %s has no key under %q: nothing to rotate", secretKey, tugboatv1alpha1.SpokeKeySecretKey)
	}

	// 1. Two keys on the hub.
	if len(bytes.TrimSpace(secret.Data[tugboatv1alpha1.SpokePreviousKeySecretKey])) > 0 {
		fmt.Fprintf(out, "A rotation of spoke %s/%s is under way (Secret %s holds %q): continuing it.\n", sp.Namespace, name, secretKey, tugboatv1alpha1.SpokePreviousKeySecretKey)
	} else {
		key, err := o.newKey()
		if err != nil {
			return err
		}
		secret.Data[tugboatv1alpha1.SpokePreviousKeySecretKey] = secret.Data[tugboatv1alpha1.SpokeKeySecretKey]
		secret.Data[tugboatv1alpha1.SpokeKeySecretKey] = key
		// Update, not patch: a concurrent change of the Secret (another
		// rotation) fails on its resourceVersion instead of being lost.
		if err := s.client.Update(ctx, secret, client.FieldOwner(cliFieldManager)); err != nil {
			return fmt.Errorf("writing the new key to secret %s: %w", secretKey, err)
		}
		current = key
		fmt.Fprintf(out, "1/3 The hub accepts the current and a new key of spoke %s/%s (Secret %s, %q and %q).\n",
			sp.Namespace, name, secretKey, tugboatv1alpha1.SpokeKeySecretKey, tugboatv1alpha1.SpokePreviousKeySecretKey)
		// The hub reads keys through a cache: the agent must not sign with
		// the new key before the hub knows it.
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

	// 2. The new key to the agent.
	if spoke != nil {
		if err := o.deliver(ctx, spoke, current); err != nil {
			return err
		}
		fmt.Fprintf(out, "2/3 The new key is in Secret %s/%s on the spoke; the agent signs with it once it re-reads its key file.\n", o.agentNamespace, o.agentSecret)
	} else {
		fmt.Fprintf(out, "2/3 Copy the new key to the agent's Secret on the spoke, for example:\n"+
			"      kubectl -n %s get secret %s -o jsonpath='{.data.key}' --context <hub-context> | base64 -d > key &&\n"+
			"      kubectl -n %s create secret generic %s --from-file=key --dry-run=client -o yaml --context <spoke-context> | kubectl apply -f - --context <spoke-context> && rm key\n"+
			"    (or run this command with --spoke-context, which does it).\n",
			secretKey.Namespace, secretKey.Name, o.agentNamespace, o.agentSecret)
	}

	// 3. Wait for the agent, then drop the previous key.
	fmt.Fprintf(out, "    Waiting up to %s for a heartbeat signed with the new key (key id %s)...\n", o.timeout, newID)
	err = wait.PollUntilContextTimeout(ctx, o.pollingInterval, o.timeout, true, func(ctx context.Context) (bool, error) {
		cur, err := getSpoke(ctx, s, name)
		if err != nil {
			return false, err
		}
		return cur.Status.SigningKeyID == newID, nil
	})
	if err != nil {
		if wait.Interrupted(err) {
			return fmt.Errorf("the hub saw no heartbeat of spoke %s/%s signed with the new key within %s: both keys stay valid; once the agent has the new key, run this command again to finish",
				sp.Namespace, name, o.timeout)
		}
		return err
	}
	if err := s.client.Get(ctx, secretKey, secret); err != nil {
		return fmt.Errorf("reading secret %s: %w", secretKey, err)
	}
	if !bytes.Equal(bytes.TrimSpace(secret.Data[tugboatv1alpha1.SpokeKeySecretKey]), current) {
		return fmt.Errorf("secret %s changed during the rotation (its key is no longer the new one): left as it is", secretKey)
	}
	delete(secret.Data, tugboatv1alpha1.SpokePreviousKeySecretKey)
	if err := s.client.Update(ctx, secret, client.FieldOwner(cliFieldManager)); err != nil {
		return fmt.Errorf("removing the previous key from secret %s: %w", secretKey, err)
	}
	fmt.Fprintf(out, "3/3 The agent signs with the new key; the previous key is removed and the hub refuses it (within its key cache TTL).\n")
	return nil
}

// deliver writes key into the agent's key Secret on the spoke.
func (o *spokeRotate) deliver(ctx context.Context, spoke client.Client, key []byte) error {
	ref := types.NamespacedName{Namespace: o.agentNamespace, Name: o.agentSecret}
	secret := &corev1.Secret{}
	if err := spoke.Get(ctx, ref, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the spoke cluster has no Secret %s, where the agent reads its key: is the agent installed there (tugboat install agent), or is it elsewhere (--agent-namespace, --agent-secret)?", ref)
		}
		return fmt.Errorf("reading the agent's Secret %s on the spoke: %w", ref, err)
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[tugboatv1alpha1.SpokeKeySecretKey] = key
	if err := spoke.Update(ctx, secret, client.FieldOwner(cliFieldManager)); err != nil {
		return fmt.Errorf("writing the new key to Secret %s on the spoke: %w", ref, err)
	}
	return nil
}
