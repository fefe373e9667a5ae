package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch;delete

var (
	digestWritesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tugboat_heartbeat_digest_writes_total",
		Help: "Writes of this replica's heartbeat digest shards, by result (ok, error).",
	}, []string{"result"})
	digestSpokes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tugboat_heartbeat_digest_spokes",
		Help: "Spokes in this replica's heartbeat digest (heard from within the digest expiry).",
	})
)

func init() {
	metrics.Registry.MustRegister(digestWritesTotal, digestSpokes)
}

// Writer collects the spokes this hub replica hears from and writes them,
// every Options.Interval when something changed, as the replica's digest.
// It runs on every replica (a manager runnable outside leader election).
type Writer struct {
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
	// Log receives what the writer could not do.
	Log logr.Logger

	client client.Client // writes direct, lists digests from the cache
	opts   Options

	// failing is set while the last flush could not write the digest.
	failing atomic.Bool

	mu     sync.Mutex
	heard  map[string]int64 // "<namespace>/<name>" → Unix seconds
	dirty  bool
	shards int // shards written by the last flush
	swept  time.Time
}

// NewWriter returns a writer of opts.Replica's digest in opts.Namespace
// (both must be set).
func NewWriter(c client.Client, opts Options) *Writer {
	return &Writer{client: c, opts: opts, heard: map[string]int64{}, Now: time.Now, Log: logr.Discard()}
}

// Replica returns the name of this replica's digests.
func (w *Writer) Replica() string { return w.opts.Replica }

// Heard records that the agent of Spoke namespace/name was heard from at
// at. It only touches memory; the next flush writes it. It reports whether
// the digest is being written (false while the last flush failed: the
// caller should then record the heartbeat on the Spoke itself).
func (w *Writer) Heard(namespace, name string, at time.Time) bool {
	k := key(types.NamespacedName{Namespace: namespace, Name: name})
	s := at.Unix()
	w.mu.Lock()
	defer w.mu.Unlock()
	if s > w.heard[k] {
		w.heard[k] = s
		w.dirty = true
	}
	return !w.failing.Load()
}

// NeedLeaderElection is false: every replica writes its digest.
func (w *Writer) NeedLeaderElection() bool { return false }

// Start flushes every Interval until ctx ends, then once more (bounded),
// so a replica that stops hands over what it heard last.
func (w *Writer) Start(ctx context.Context) error {
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := w.Flush(fctx); err != nil {
				w.Log.Error(err, "writing the heartbeat digest on stop")
			}
			return nil
		case <-t.C:
			if err := w.Flush(ctx); err != nil && ctx.Err() == nil {
				w.Log.Error(err, "writing the heartbeat digest (retried at the next interval)")
			}
		}
	}
}

// Name returns the name of shard i of replica's digest.
func Name(replica string, i int) string { return NamePrefix + replica + "-" + strconv.Itoa(i) }

// Flush writes the digest when a spoke was heard from since the last
// flush, deletes the shards it no longer needs, and, every Expiry / 4,
// the digests of other replicas not written for Expiry.
func (w *Writer) Flush(ctx context.Context) error {
	now := w.Now()
	w.mu.Lock()
	for k, s := range w.heard {
		if now.Sub(time.Unix(s, 0)) > w.opts.Expiry {
			delete(w.heard, k)
		}
	}
	dirty := w.dirty
	heard := make(map[string]int64, len(w.heard))
	for k, s := range w.heard {
		heard[k] = s
	}
	before := w.shards
	w.dirty = false
	sweep := now.Sub(w.swept) >= w.opts.Expiry/4
	if sweep {
		w.swept = now
	}
	w.mu.Unlock()
	digestSpokes.Set(float64(len(heard)))

	var errs []error
	if dirty {
		digests := Shard(w.opts.Replica, now.Unix(), heard)
		written := true
		for _, d := range digests {
			if err := w.write(ctx, d); err != nil {
				digestWritesTotal.WithLabelValues("error").Inc()
				errs = append(errs, err)
				written = false
				continue
			}
			digestWritesTotal.WithLabelValues("ok").Inc()
		}
		// Shards no longer needed go once the new ones are written (a
		// reader sees each spoke at least once meanwhile).
		for i := len(digests); written && i < before; i++ {
			if err := w.client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.opts.Namespace, Name: Name(w.opts.Replica, i)}}); client.IgnoreNotFound(err) != nil {
				errs = append(errs, err)
			}
		}
		w.failing.Store(!written)
		w.mu.Lock()
		if written {
			w.shards = len(digests)
		} else {
			w.dirty = true
			w.shards = max(w.shards, len(digests))
		}
		w.mu.Unlock()
	}
	if sweep {
		errs = append(errs, w.sweep(ctx, now))
	}
	return errors.Join(errs...)
}

// write creates or replaces one shard.
func (w *Writer) write(ctx context.Context, d *Digest) error {
	raw, err := d.Encode()
	if err != nil {
		return err
	}
	name := Name(d.Replica, d.Shard)
	labels := map[string]string{LabelDigest: "true", LabelReplica: d.Replica}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": labels},
		"data":     map[string]string{DataKey: string(raw)},
	})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.opts.Namespace, Name: name}}
	err = w.client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.opts.Namespace, Name: name, Labels: labels},
			Data: map[string]string{DataKey: string(raw)}}
		err = w.client.Create(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("writing heartbeat digest %s/%s: %w", w.opts.Namespace, name, err)
	}
	return nil
}

// sweep deletes the digests of other replicas not written for Expiry: a
// replica that is gone (a Pod replaced, a process killed). A digest that
// does not decode is left alone (readers ignore it and log why).
func (w *Writer) sweep(ctx context.Context, now time.Time) error {
	var list corev1.ConfigMapList
	if err := w.client.List(ctx, &list, client.InNamespace(w.opts.Namespace), client.MatchingLabels{LabelDigest: "true"}); err != nil {
		return fmt.Errorf("listing heartbeat digests: %w", err)
	}
	var errs []error
	for i := range list.Items {
		cm := &list.Items[i]
		if cm.Labels[LabelReplica] == w.opts.Replica {
			continue
		}
		d, err := Decode([]byte(cm.Data[DataKey]))
		if err != nil || now.Sub(d.Time()) <= w.opts.Expiry {
			continue
		}
		w.Log.Info("deleting the heartbeat digest of a replica gone", "digest", cm.Name, "replica", d.Replica, "written", d.Time().UTC())
		rv := cm.ResourceVersion
		if err := w.client.Delete(ctx, cm, client.Preconditions{ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
