package harness

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// Names of a cluster's processes, for Restart, Pause and Resume.
const (
	ProcessEtcd                  = "etcd"
	ProcessKubeAPIServer         = "kube-apiserver"
	ProcessKubeControllerManager = "kube-controller-manager"
	ProcessKubeScheduler         = "kube-scheduler"
	ProcessKwok                  = "kwok"
)

// find returns the running process named name.
func (c *Cluster) find(name string) (*process, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.procs {
		if p.name == name {
			return p, i, nil
		}
	}
	return nil, 0, fmt.Errorf("cluster %s has no process %q", c.Name, name)
}

// Restart stops one process of the cluster and starts it again with the
// same command line, ports and data: grace 0 kills it at once (SIGKILL, a
// crash, e.g. in the middle of a write), a positive grace sends SIGTERM
// first. When the process is etcd or the kube-apiserver, Restart then
// waits, within ctx, until the API server is ready again.
func (c *Cluster) Restart(ctx context.Context, name string, grace time.Duration) error {
	p, i, err := c.find(name)
	if err != nil {
		return err
	}
	if grace == 0 {
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	} else {
		p.stop(grace)
	}
	np, err := p.restart()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs[i] = np
	c.mu.Unlock()
	if name == ProcessEtcd || name == ProcessKubeAPIServer {
		return c.WaitReady(ctx)
	}
	return nil
}

// Pause stops one process of the cluster (SIGSTOP to its process group)
// until Resume: it holds its sockets open and answers nothing, as a hung
// process does.
func (c *Cluster) Pause(name string) error {
	p, _, err := c.find(name)
	if err != nil {
		return err
	}
	return syscall.Kill(-p.pid(), syscall.SIGSTOP)
}

// Resume continues a process Pause stopped (SIGCONT).
func (c *Cluster) Resume(name string) error {
	p, _, err := c.find(name)
	if err != nil {
		return err
	}
	return syscall.Kill(-p.pid(), syscall.SIGCONT)
}

// WaitReady waits, within ctx, until the API server answers /readyz with
// 200 (which includes its etcd check), or one of the cluster's processes
// exits.
func (c *Cluster) WaitReady(ctx context.Context) error {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Timeout = 5 * time.Second
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	return waitFor(ctx, "kube-apiserver /readyz", 100*time.Millisecond, procs, func(ctx context.Context) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.APIServerURL+"/readyz", nil)
		resp, err := httpClient.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
