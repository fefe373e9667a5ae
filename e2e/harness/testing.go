package harness

import (
	"context"
	"fmt"
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// StartT starts a cluster for a test and stops it at cleanup, which also runs
// after a failure or a panic. When the test failed, the logs are kept and
// their directory is printed.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster %s: logs kept in %s", c.Name, c.LogDir)
			if err := c.StopKeepLogs(); err != nil {
				t.Errorf("stopping cluster %s: %v", c.Name, err)
			}
			return
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping cluster %s: %v", c.Name, err)
		}
	})
	return c
}

func listFor(crd *apiextensionsv1.CustomResourceDefinition) *unstructured.UnstructuredList {
	version := crd.Spec.Versions[0].Name
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			version = v.Name
		}
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind})
	return list
}

// Main is the body of a test package's TestMain that shares one cluster:
// it starts the cluster, calls fn (which usually stores the cluster and
// returns m.Run()), then stops the cluster, keeping its logs and printing
// where they are when fn returned non-zero. It returns fn's exit code.
func Main(opts Options, fn func(c *Cluster) int) int {
	c, err := Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := fn(c)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "cluster %s logs: %s\n", c.Name, c.LogDir)
		_ = c.StopKeepLogs()
		return code
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}
