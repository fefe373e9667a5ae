package heartbeat

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var digestsIgnoredTotal = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "tugboat_heartbeat_digests_ignored_total",
	Help: "Versions of heartbeat digest ConfigMaps the Spoke controller ignored as corrupt or foreign (the log says why).",
})

func init() { metrics.Registry.MustRegister(digestsIgnoredTotal) }

// MaxSkew is how far ahead of the reader's clock a digest may be written
// (replicas' clocks differ a little); a digest further ahead is ignored,
// so a forged or broken one cannot keep spokes Ready.
const MaxSkew = time.Minute

// CacheByObject restricts the hub's cache of ConfigMaps to the digests in
// namespace: the hub watches no other ConfigMap, and needs RBAC on
// ConfigMaps in its own namespace only.
func CacheByObject(namespace string) map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {
			Namespaces: map[string]cache.Config{namespace: {}},
			Label:      labelsSelector(),
		},
	}
}

// Index answers when any replica last heard a spoke, from the digests in
// the cache. It decodes each digest once per version.
type Index struct {
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
	// Log receives why a digest was ignored.
	Log logr.Logger

	reader    client.Reader
	namespace string

	mu      sync.Mutex
	decoded map[string]decoded // by ConfigMap name
}

// decoded is one version of a digest ConfigMap, decoded (heard is nil for
// one ignored).
type decoded struct {
	rv    string
	heard map[types.NamespacedName]time.Time
}

// NewIndex returns an Index over the digests in namespace that reader (the
// manager's cache) holds.
func NewIndex(reader client.Reader, namespace string) *Index {
	return &Index{reader: reader, namespace: namespace, decoded: map[string]decoded{}, Now: time.Now, Log: logr.Discard()}
}

// LastHeard returns the newest time any replica's digest heard spoke, or
// the zero time.
func (x *Index) LastHeard(ctx context.Context, spoke types.NamespacedName) (time.Time, error) {
	var list corev1.ConfigMapList
	// The digests are only read here, never changed: no copy of them.
	if err := x.reader.List(ctx, &list, client.InNamespace(x.namespace), client.MatchingLabels{LabelDigest: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return time.Time{}, fmt.Errorf("listing heartbeat digests: %w", err)
	}
	var newest time.Time
	names := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		names[list.Items[i].Name] = true
		if t, ok := x.heardIn(&list.Items[i])[spoke]; ok && t.After(newest) {
			newest = t
		}
	}
	x.mu.Lock()
	for n := range x.decoded {
		if !names[n] {
			delete(x.decoded, n)
		}
	}
	x.mu.Unlock()
	return newest, nil
}

// Object returns the kind of the digests, for a watch.
func (x *Index) Object() client.Object { return &corev1.ConfigMap{} }

// HeardIn returns the spokes a digest object heard and when (nil for an
// object that is not a valid digest of this namespace).
func (x *Index) HeardIn(o client.Object) map[types.NamespacedName]time.Time {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return nil
	}
	return x.heardIn(cm)
}

func (x *Index) heardIn(cm *corev1.ConfigMap) map[types.NamespacedName]time.Time {
	if cm.Namespace != x.namespace || cm.Labels[LabelDigest] != "true" {
		return nil
	}
	x.mu.Lock()
	d, ok := x.decoded[cm.Name]
	x.mu.Unlock()
	if ok && d.rv == cm.ResourceVersion {
		return d.heard
	}
	heard, err := x.decode(cm)
	if err != nil {
		digestsIgnoredTotal.Inc()
		x.Log.Info("ignoring a heartbeat digest: "+err.Error(), "configMap", cm.Namespace+"/"+cm.Name, "resourceVersion", cm.ResourceVersion)
	}
	x.mu.Lock()
	x.decoded[cm.Name] = decoded{rv: cm.ResourceVersion, heard: heard}
	x.mu.Unlock()
	return heard
}

// decode checks and decodes one digest ConfigMap: its name and replica
// label must be those of the digest it holds, and it must not be written
// ahead of this clock by more than MaxSkew. A spoke heard later than now
// counts as heard now.
func (x *Index) decode(cm *corev1.ConfigMap) (map[types.NamespacedName]time.Time, error) {
	raw, ok := cm.Data[DataKey]
	if !ok {
		return nil, fmt.Errorf("no data key %s", DataKey)
	}
	d, err := Decode([]byte(raw))
	if err != nil {
		return nil, err
	}
	if want := Name(d.Replica, d.Shard); cm.Name != want || cm.Labels[LabelReplica] != d.Replica {
		return nil, fmt.Errorf("the digest of replica %q, shard %d, belongs in ConfigMap %s labeled %s=%s (a foreign object)", d.Replica, d.Shard, want, LabelReplica, d.Replica)
	}
	now := x.Now()
	if d.Time().After(now.Add(MaxSkew)) {
		return nil, fmt.Errorf("written at %s, more than %s ahead of this replica's clock (%s)", d.Time().UTC().Format(time.RFC3339), MaxSkew, now.UTC().Format(time.RFC3339))
	}
	heard := d.Heard()
	for k, t := range heard {
		if t.After(now) {
			heard[k] = now
		}
	}
	return heard, nil
}

// labelsSelector selects the digests.
func labelsSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelDigest: "true"})
}
