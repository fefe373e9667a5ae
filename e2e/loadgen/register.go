package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// registerParallel is how many Spokes Register creates at once.
const registerParallel = 16

// Spoke is a spoke registered on the hub: its name and the key it signs
// with.
type Spoke struct {
	Name string
	Key  []byte
}

// SpokeName is the name of the i-th spoke of Register.
func SpokeName(prefix string, i int) string { return fmt.Sprintf("%s-%03d", prefix, i) }

// Register creates n Spokes named SpokeName(prefix, 0..n-1) in namespace
// (which must exist) through c, each with key Secret "<name>-key", and
// waits until the hub has generated every key, or ctx ends. It returns the
// spokes with their keys, in order. Spokes that already exist are reused.
func Register(ctx context.Context, c client.Client, namespace, prefix string, n int) ([]Spoke, error) {
	return RegisterLabeled(ctx, c, namespace, prefix, n, nil)
}

// RegisterLabeled is Register with labels on the Spokes it creates (a
// Pipeline's spokeSelector selects them); Spokes that already exist are
// reused as they are.
func RegisterLabeled(ctx context.Context, c client.Client, namespace, prefix string, n int, labels map[string]string) ([]Spoke, error) {
	// Created by registerParallel workers: thousands of spokes one by one
	// take minutes on a busy API server.
	next := make(chan int)
	errs := make(chan error, registerParallel)
	var wg sync.WaitGroup
	for range registerParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := SpokeName(prefix, i)
				sp := &tugboatv1alpha1.Spoke{
					ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
					Spec:       tugboatv1alpha1.SpokeSpec{KeySecretRef: tugboatv1alpha1.LocalSecretReference{Name: name + "-key"}},
				}
				if err := c.Create(ctx, sp); err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- fmt.Errorf("creating spoke %s: %w", name, err)
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	spokes := make([]Spoke, n)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		var secrets corev1.SecretList
		if err := c.List(ctx, &secrets, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("listing key secrets: %w", err)
		}
		keys := make(map[string][]byte, len(secrets.Items))
		for _, s := range secrets.Items {
			keys[s.Name] = s.Data[tugboatv1alpha1.SpokeKeySecretKey]
		}
		missing := 0
		for i := range spokes {
			name := SpokeName(prefix, i)
			if k := keys[name+"-key"]; len(k) > 0 {
				spokes[i] = Spoke{Name: name, Key: k}
			} else {
				missing++
			}
		}
		if missing == 0 {
			return spokes, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the hub to generate the keys of %d of %d spokes: %w", missing, n, ctx.Err())
		case <-tick.C:
		}
	}
}
