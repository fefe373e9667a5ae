// Command k8s-bins builds the pinned control-plane binaries into bin/k8s,
// the helm CLI into bin/helm-<version> and the Prometheus server into
// bin/prometheus/prometheus-<version> (`make k8s-bins`). It is a no-op when
// they are already there.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"tugboat.dev/tugboat/e2e/bins"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root, err := bins.FindRepoRoot(".")
	if err == nil {
		var dir string
		dir, err = bins.Ensure(ctx, root, os.Stdout)
		if err == nil {
			var helm string
			if helm, err = bins.EnsureHelm(ctx, root, os.Stdout); err == nil {
				var prom string
				if prom, err = bins.EnsurePrometheus(ctx, root, os.Stdout); err == nil {
					fmt.Printf("control-plane binaries ready in %s; helm at %s; prometheus at %s\n", dir, helm, prom)
					return
				}
			}
		}
	}
	fmt.Fprintln(os.Stderr, "k8s-bins:", err)
	os.Exit(1)
}
