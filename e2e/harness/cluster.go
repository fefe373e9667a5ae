package harness

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/e2e/bins"
)

// Options configure one cluster.
type Options struct {
	// Name identifies the cluster in logs, directories and kubeconfig
	// contexts. Defaults to "cluster".
	Name string
	// ControlPlaneOnly starts etcd and kube-apiserver only: enough for API
	// validation tests, and about twice as fast to start.
	ControlPlaneOnly bool
	// CRDPaths are files or directories of CRD YAML to install; Start waits
	// until each is Established.
	CRDPaths []string
	// TugboatCRDs installs tugboat's own CRDs (the hub chart's
	// files/crds, found from the repository root), before CRDPaths: what a
	// hub cluster needs, without a path relative to the test's package.
	TugboatCRDs bool
	// BinDir holds the binaries. Defaults to bins.Dir of the repository.
	BinDir string
	// Dir is the parent of the cluster's working directory. Defaults to the
	// system temporary directory.
	Dir string
	// Scheme for Cluster.Client. Defaults to client-go's scheme plus
	// apiextensions/v1 and tugboat.dev/v1alpha1.
	Scheme *runtime.Scheme
	// StartTimeout bounds Start. Defaults to 90s.
	StartTimeout time.Duration
}

// Cluster is a running local cluster.
type Cluster struct {
	// Name is Options.Name.
	Name string
	// RESTConfig reaches the API server as a cluster administrator
	// (group system:masters).
	RESTConfig *rest.Config
	// KubeconfigPath is a self-contained kubeconfig file for the same user.
	KubeconfigPath string
	// Client is a controller-runtime client for RESTConfig.
	Client client.Client
	// Dir is the cluster's working directory; LogDir holds one log per process.
	Dir, LogDir string
	// APIServerURL is the https URL of the API server.
	APIServerURL string
	// NodeName is the kwok node, empty with ControlPlaneOnly.
	NodeName string

	mu    sync.Mutex
	procs []*process
}

// DefaultScheme returns client-go's scheme with apiextensions/v1 and
// tugboat.dev/v1alpha1 added.
func DefaultScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = tugboatv1alpha1.AddToScheme(s)
	return s
}

// Start starts a cluster and waits until it serves requests (and, unless
// ControlPlaneOnly, until its fake node is Ready). On error nothing of it
// is left running. A port lost to another process between allocation and
// bind is retried with fresh ports.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Name == "" {
		opts.Name = "cluster"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	if opts.Scheme == nil {
		opts.Scheme = DefaultScheme()
	}
	if opts.BinDir == "" {
		wd, _ := os.Getwd()
		root, err := bins.FindRepoRoot(wd)
		if err != nil && os.Getenv(bins.EnvDir) == "" {
			return nil, err
		}
		opts.BinDir = bins.Dir(root)
	}
	if missing := bins.Missing(opts.BinDir); len(missing) > 0 {
		return nil, fmt.Errorf("control-plane binaries missing from %s: %s (run `make k8s-bins`)", opts.BinDir, strings.Join(missing, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c, err := start(ctx, opts)
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	parent := opts.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "tugboat-"+opts.Name+"-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: opts.Name, Dir: dir, LogDir: filepath.Join(dir, "logs")}
	defer func() {
		if err != nil {
			_ = c.stop(false)
			err = fmt.Errorf("cluster %s (logs in %s): %w", opts.Name, c.LogDir, err)
		}
	}()
	if err := os.MkdirAll(c.LogDir, 0o750); err != nil {
		return nil, err
	}
	certs, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	bin := func(name string) string { return bins.Path(opts.BinDir, name) }

	// etcd
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	if err := c.run(ProcessEtcd, bin(bins.Etcd), []string{
		"--name=default",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}); err != nil {
		return nil, err
	}

	// kube-apiserver
	c.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if err := c.run(ProcessKubeAPIServer, bin(bins.KubeAPIServer), []string{
		"--etcd-servers=" + clientURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(dir, "pki"),
		"--tls-cert-file=" + certs.ServingCert, "--tls-private-key-file=" + certs.ServingKey,
		"--client-ca-file=" + certs.CACert,
		"--service-account-key-file=" + certs.SAPub,
		"--service-account-signing-key-file=" + certs.SAKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		// Without a token controller, the ServiceAccount plugin would hold
		// every pod until a default ServiceAccount exists.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=0",
	}); err != nil {
		return nil, err
	}
	c.RESTConfig = &rest.Config{
		Host: c.APIServerURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: certs.caPEM, CertData: certs.adminCertPEM, KeyData: certs.adminKeyPEM,
		},
		QPS: 200, Burst: 400,
	}
	c.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, opts.Name, c.RESTConfig); err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	c.Client, err = client.New(c.RESTConfig, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, err
	}

	if !opts.ControlPlaneOnly {
		if err := c.startNodeComponents(ctx, bin, certs); err != nil {
			return nil, err
		}
	}
	paths := opts.CRDPaths
	if opts.TugboatCRDs {
		root, err := bins.FindRepoRoot(".")
		if err != nil {
			return nil, fmt.Errorf("finding tugboat's CRDs: %w", err)
		}
		paths = append([]string{filepath.Join(root, "config", "charts", "tugboat-hub", "files", "crds")}, paths...)
	}
	if len(paths) > 0 {
		if err := InstallCRDs(ctx, c.Client, paths...); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// kwokStages are the Pod stages kwok runs: its own defaults, and Helm test
// Pods that succeed, or fail when annotated tugboat.dev/test-result: fail.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// KwokPodLog is what every Pod's log says on a harness cluster (kubectl
// logs, pods/log): kwok serves this file as the log of every container,
// since no container runs on its node.
const KwokPodLog = "kwok: no container ran on this node; this stands in for the container's log\n"

// kwokClusterLogs is kwok's ClusterLogs configuration that serves file as
// the log of every Pod's containers.
func kwokClusterLogs(file string) string {
	return fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: tugboat-pod-logs
spec:
  logs:
  - logsFile: %q
`, file)
}

// startNodeComponents runs the controller manager, the scheduler and kwok,
// and registers one fake node that kwok keeps Ready.
func (c *Cluster) startNodeComponents(ctx context.Context, bin func(string) string, certs *pki) error {
	kubeconfig := "--kubeconfig=" + c.KubeconfigPath
	if err := c.run(ProcessKubeControllerManager, bin(bins.KubeControllerManager), []string{
		kubeconfig,
		"--controllers=deployment-controller,replicaset-controller,garbage-collector-controller," +
			"node-lifecycle-controller,namespace-controller,job-controller,statefulset-controller,daemonset-controller",
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
		"--v=0",
	}); err != nil {
		return err
	}
	if err := c.run(ProcessKubeScheduler, bin(bins.KubeScheduler), []string{
		kubeconfig, "--leader-elect=false", "--secure-port=0", "--v=0",
	}); err != nil {
		return err
	}
	kwokPort, err := freePorts(1)
	if err != nil {
		return err
	}
	stages := filepath.Join(c.Dir, "kwok-stages.yaml")
	podLog := filepath.Join(c.Dir, "kwok-pod.log")
	logs := fmt.Sprintf("---\n%s\n", kwokClusterLogs(podLog))
	if err := os.WriteFile(stages, append(append([]byte{}, kwokStages...), logs...), 0o600); err != nil {
		return fmt.Errorf("writing kwok's stages: %w", err)
	}
	// In the CRI log format, which kwok reads as a kubelet does.
	cri := "2026-01-01T00:00:00.000000000Z stdout F " + KwokPodLog
	if err := os.WriteFile(podLog, []byte(cri), 0o600); err != nil {
		return fmt.Errorf("writing kwok's pod log: %w", err)
	}
	if err := c.run(ProcessKwok, bin(bins.Kwok), []string{
		kubeconfig,
		// kwok's default Pod stages, and Helm test Pods that finish
		// (kwok-stages.yaml).
		"--config=" + stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom",
		"--cidr=10.0.0.1/24",
		// The node's kubelet endpoint is kwok's own server, so the API
		// server reaches it for a Pod's log (pods/log: kwokClusterLogs).
		"--node-ip=127.0.0.1",
		fmt.Sprintf("--node-port=%d", kwokPort[0]),
		"--tls-cert-file=" + certs.ServingCert, "--tls-private-key-file=" + certs.ServingKey,
		"--node-lease-duration-seconds=40",
		fmt.Sprintf("--server-address=127.0.0.1:%d", kwokPort[0]),
	}); err != nil {
		return err
	}
	c.NodeName = "kwok-node-0"
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.NodeName,
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl": "0",
				"kwok.x-k8s.io/node":           "fake",
			},
			Labels: map[string]string{
				"kubernetes.io/hostname": c.NodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
				corev1.ResourcePods: resource.MustParse("110"),
			},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
				corev1.ResourcePods: resource.MustParse("110"),
			},
		},
	}
	if err := c.Client.Create(ctx, node); err != nil {
		return fmt.Errorf("creating node: %w", err)
	}
	return waitFor(ctx, "node "+c.NodeName+" Ready", 100*time.Millisecond, c.procs, func(ctx context.Context) bool {
		var n corev1.Node
		if err := c.Client.Get(ctx, client.ObjectKey{Name: c.NodeName}, &n); err != nil {
			return false
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// run starts one process of the cluster, logging to LogDir/<name>.log.
func (c *Cluster) run(name, binary string, args []string) error {
	p, err := startProcess(name, binary, args, filepath.Join(c.LogDir, name+".log"), nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return nil
}

// PIDs returns the process ids of the cluster's processes (each is also the
// id of its process group).
func (c *Cluster) PIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := make([]int, 0, len(c.procs))
	for _, p := range c.procs {
		pids = append(pids, p.pid())
	}
	return pids
}

// Stop stops every process of the cluster (SIGTERM, then SIGKILL after a few
// seconds), waits for them, and removes the working directory. It is safe to
// call more than once.
func (c *Cluster) Stop() error { return c.stop(true) }

// StopKeepLogs stops the cluster like Stop but keeps the working directory
// with its logs.
func (c *Cluster) StopKeepLogs() error { return c.stop(false) }

func (c *Cluster) stop(removeDir bool) error {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	// Reverse order: clients of the API server first, etcd last.
	var wg sync.WaitGroup
	for i := len(procs) - 1; i >= 1; i-- {
		wg.Add(1)
		go func(p *process) { defer wg.Done(); p.stop(5 * time.Second) }(procs[i])
	}
	wg.Wait()
	if len(procs) > 0 {
		procs[0].stop(5 * time.Second)
	}
	var errs []error
	for _, p := range procs {
		if ProcessAlive(p.pid()) {
			errs = append(errs, fmt.Errorf("%s (pid %d) is still running", p.name, p.pid()))
		}
	}
	if removeDir && c.Dir != "" && len(errs) == 0 {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func writeKubeconfig(path, name string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name+"-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name + "-admin", Namespace: "default"}
	kc.CurrentContext = name
	return clientcmd.WriteToFile(*kc, path)
}
