package spokeaccess

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	capisecret "sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/egress"
	"tugboat.dev/tugboat/controllers/promotion/strategy"
)

// Settings of the rest.Config built from a kubeconfig.
const (
	// Timeout bounds each request to a spoke's API server.
	Timeout = 30 * time.Second
	// UserAgent identifies the hub in the spoke's audit log.
	UserAgent = "tugboat-hub"
)

// SecretKey locates a kubeconfig: one key of one Secret on the hub.
type SecretKey struct {
	// Namespace and Name of the Secret.
	Namespace, Name string
	// Key in the Secret's data.
	Key string
}

// String is "namespace/name key <key>", for messages.
func (s SecretKey) String() string {
	return fmt.Sprintf("Secret %s/%s key %q", s.Namespace, s.Name, s.Key)
}

// Source says where spoke's kubeconfig is: spec.kubeConfigSecretRef or
// spec.clusterRef. It returns a terminal error when the Spoke has neither.
func Source(spoke *tugboatv1alpha1.Spoke) (SecretKey, error) {
	if spoke == nil {
		return SecretKey{}, strategy.Terminal(errors.New("no Spoke given"))
	}
	switch {
	case spoke.Spec.KubeConfigSecretRef != nil:
		ref := spoke.Spec.KubeConfigSecretRef
		key := ref.Key
		if key == "" {
			key = tugboatv1alpha1.DefaultKubeConfigSecretKey
		}
		return SecretKey{Namespace: spoke.Namespace, Name: ref.Name, Key: key}, nil
	case spoke.Spec.ClusterRef != nil:
		ref := spoke.Spec.ClusterRef
		if ref.Namespace != "" && ref.Namespace != spoke.Namespace {
			// The API server refuses this (CEL); a Spoke written before
			// the rule, or a hub on an older CRD, is refused here too:
			// reading another namespace's kubeconfig would reach another
			// tenant's cluster.
			return SecretKey{}, strategy.Terminal(fmt.Errorf(
				"spoke %s/%s: spec.clusterRef names a Cluster in namespace %q; a Spoke only reaches clusters in its own namespace",
				spoke.Namespace, spoke.Name, ref.Namespace))
		}
		return SecretKey{Namespace: spoke.Namespace, Name: capisecret.Name(ref.Name, capisecret.Kubeconfig), Key: capisecret.KubeconfigDataName}, nil
	default:
		return SecretKey{}, strategy.Terminal(fmt.Errorf(
			"spoke %s/%s has no kubeconfig for the hub: set spec.kubeConfigSecretRef or spec.clusterRef, or use the helm strategy which needs no hub credentials",
			spoke.Namespace, spoke.Name))
	}
}

// RESTConfig returns a config for spoke's API server, from the kubeconfig
// Source names, read through hub. A missing Secret is a retryable error (it
// may yet be created, as Cluster API does once the cluster is up); a missing
// key, an empty or invalid kubeconfig and one that is not self-contained are
// terminal.
func RESTConfig(ctx context.Context, hub client.Reader, spoke *tugboatv1alpha1.Spoke) (*rest.Config, error) {
	secret, src, err := readSecret(ctx, hub, spoke)
	if err != nil {
		return nil, err
	}
	return configFrom(spoke, secret, src)
}

// readSecret reads the Secret that holds spoke's kubeconfig.
func readSecret(ctx context.Context, hub client.Reader, spoke *tugboatv1alpha1.Spoke) (*corev1.Secret, SecretKey, error) {
	src, err := Source(spoke)
	if err != nil {
		return nil, src, err
	}
	secret := &corev1.Secret{}
	if err := hub.Get(ctx, types.NamespacedName{Namespace: src.Namespace, Name: src.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, src, fmt.Errorf("kubeconfig of spoke %s/%s: Secret %s/%s not found", spoke.Namespace, spoke.Name, src.Namespace, src.Name)
		}
		return nil, src, fmt.Errorf("kubeconfig of spoke %s/%s: reading Secret %s/%s: %w", spoke.Namespace, spoke.Name, src.Namespace, src.Name, err)
	}
	return secret, src, nil
}

// configFrom builds the config from the kubeconfig at src in secret.
func configFrom(spoke *tugboatv1alpha1.Spoke, secret *corev1.Secret, src SecretKey) (*rest.Config, error) {
	data, ok := secret.Data[src.Key]
	if !ok {
		return nil, strategy.Terminal(fmt.Errorf("kubeconfig of spoke %s/%s: %s is missing", spoke.Namespace, spoke.Name, src))
	}
	cfg, err := fromKubeconfig(data)
	if err != nil {
		return nil, strategy.Terminal(fmt.Errorf("kubeconfig of spoke %s/%s in %s: %w", spoke.Namespace, spoke.Name, src, err))
	}
	return cfg, nil
}

// fromKubeconfig builds a rest.Config from kubeconfig bytes, using the
// current context, after checking the kubeconfig is self-contained. Errors
// never quote the kubeconfig.
func fromKubeconfig(data []byte) (*rest.Config, error) {
	if len(data) == 0 {
		return nil, errors.New("the kubeconfig is empty")
	}
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, errors.New("the kubeconfig cannot be parsed")
	}
	if err := selfContained(raw); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig is invalid: %w", err)
	}
	cfg.Timeout = Timeout
	cfg.UserAgent = UserAgent
	return cfg, nil
}

// selfContained refuses what would make the hub run a command or read a file
// of its own: exec plugins, auth providers and file references, in the
// current context's cluster and user.
func selfContained(raw *clientcmdapi.Config) error {
	kctx, ok := raw.Contexts[raw.CurrentContext]
	if raw.CurrentContext == "" || !ok {
		return errors.New("the kubeconfig has no current context")
	}
	cluster, ok := raw.Clusters[kctx.Cluster]
	if !ok {
		return fmt.Errorf("the kubeconfig's current context names cluster %q, which it does not define", kctx.Cluster)
	}
	if cluster.CertificateAuthority != "" {
		return errors.New("the kubeconfig refers to a CA file; embed certificate-authority-data instead")
	}
	if cluster.ProxyURL != "" {
		// A proxy would dial on the hub's behalf, past its egress policy.
		return errors.New("the kubeconfig sets proxy-url, which the hub does not follow: it connects to the spoke's API server directly")
	}
	user, ok := raw.AuthInfos[kctx.AuthInfo]
	if !ok {
		if kctx.AuthInfo == "" {
			return nil
		}
		return fmt.Errorf("the kubeconfig's current context names user %q, which it does not define", kctx.AuthInfo)
	}
	switch {
	case user.Exec != nil:
		return errors.New("the kubeconfig uses an exec credential plugin, which the hub does not run; embed a token or client certificate")
	case user.AuthProvider != nil:
		return errors.New("the kubeconfig uses an auth provider, which the hub does not support; embed a token or client certificate")
	case user.ClientCertificate != "" || user.ClientKey != "":
		return errors.New("the kubeconfig refers to client certificate or key files; embed client-certificate-data and client-key-data instead")
	case user.TokenFile != "":
		return errors.New("the kubeconfig refers to a token file; embed the token instead")
	}
	return nil
}

// Guard makes cfg's connections obey the egress policy p: every dial is
// checked on the address actually dialed (a kubeconfig's server: is
// written by whoever can write the Secret, a tenant), and no proxy is used,
// the environment's included (a proxy would dial past the check). It
// returns cfg.
func Guard(cfg *rest.Config, p egress.Policy) *rest.Config {
	cfg.Dial = p.Dialer(0).DialContext
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	return cfg
}

// secretVersion identifies one version of a kubeconfig Secret.
type secretVersion struct {
	src             SecretKey
	uid             types.UID
	resourceVersion string
}

// NewClientFunc builds a client for a spoke from its config.
type NewClientFunc func(cfg *rest.Config) (client.Client, error)

// DefaultMaxClients is how many spoke clients a Cache keeps by default.
const DefaultMaxClients = 64

// Cache hands out clients for spokes and reuses one while the spoke's
// kubeconfig Secret keeps its resourceVersion, so the client's discovery and
// connections are shared between promotions. It holds at most one client per
// Spoke and at most MaxClients in all, dropping the least recently used
// beyond that (a deleted Spoke's client goes that way too). It is safe for
// concurrent use.
type Cache struct {
	newClient NewClientFunc
	max       int
	egress    egress.Policy

	mu      sync.Mutex
	clients map[types.NamespacedName]*cached
	clock   uint64 // counts uses, for least-recently-used eviction
}

type cached struct {
	version secretVersion
	client  client.Client
	used    uint64
}

// NewCache returns a Cache that builds clients with newClient; nil means
// client.New with client-go's scheme (enough for unstructured objects). It
// keeps DefaultMaxClients clients at most, and its clients' connections
// obey the default egress policy (no loopback, link-local or metadata
// address) until WithEgress says otherwise.
func NewCache(newClient NewClientFunc) *Cache {
	if newClient == nil {
		newClient = func(cfg *rest.Config) (client.Client, error) { return client.New(cfg, client.Options{}) }
	}
	return &Cache{newClient: newClient, max: DefaultMaxClients, clients: map[types.NamespacedName]*cached{}}
}

// WithEgress sets the egress policy c's clients' connections obey and
// returns c. Clients already built keep theirs.
func (c *Cache) WithEgress(p egress.Policy) *Cache {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.egress = p
	return c
}

// WithMaxClients sets how many clients c keeps (at least 1) and returns c.
func (c *Cache) WithMaxClients(n int) *Cache {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max = max(n, 1)
	c.evictLocked()
	return c
}

// Len is how many clients c holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.clients)
}

// Client returns a client for spoke's API server. It reads the kubeconfig
// Secret through hub on every call (to notice a rotated kubeconfig) and
// builds a new client only when the Secret changed. Errors are those of
// RESTConfig.
func (c *Cache) Client(ctx context.Context, hub client.Reader, spoke *tugboatv1alpha1.Spoke) (client.Client, error) {
	key := types.NamespacedName{Namespace: spoke.Namespace, Name: spoke.Name}
	secret, src, err := readSecret(ctx, hub, spoke)
	if err != nil {
		c.Forget(key) // nothing to reuse for a Spoke that has no usable kubeconfig
		return nil, err
	}
	version := secretVersion{src: src, uid: secret.UID, resourceVersion: secret.ResourceVersion}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	if e, ok := c.clients[key]; ok && e.version == version {
		e.used = c.clock
		return e.client, nil
	}
	cfg, err := configFrom(spoke, secret, src)
	if err != nil {
		delete(c.clients, key)
		return nil, err
	}
	cl, err := c.newClient(Guard(cfg, c.egress))
	if err != nil {
		return nil, fmt.Errorf("client for spoke %s/%s: %w", spoke.Namespace, spoke.Name, err)
	}
	c.clients[key] = &cached{version: version, client: cl, used: c.clock}
	c.evictLocked()
	return cl, nil
}

// evictLocked drops the least recently used clients beyond max.
func (c *Cache) evictLocked() {
	for len(c.clients) > c.max {
		var oldest types.NamespacedName
		var used uint64
		first := true
		for k, e := range c.clients {
			if first || e.used < used {
				oldest, used, first = k, e.used, false
			}
		}
		delete(c.clients, oldest)
	}
}

// Forget drops the cached client of a Spoke (e.g. when it is deleted).
func (c *Cache) Forget(spoke types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.clients, spoke)
}
