package actions

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/e2e/harness"
)

// The package's tests share one real API server (etcd and kube-apiserver:
// upgrades do not wait for Pods) with the Flux HelmRelease CRD, and one Helm
// chart repository holding the web chart at 1.0.0, 1.1.0 and 1.2.0 (and
// the other chart at 1.1.0), served
// anonymously under /charts and with basic authentication under /private.
var (
	cluster *harness.Cluster
	// chartsURL is the anonymous repository; privateURL the authenticated
	// one (repoUser/repoPassword).
	chartsURL, privateURL string
	// chartsHost is host:port of both.
	chartsHost string
	// credentialsSeen counts the requests to the repository that carried
	// an Authorization header.
	credentialsSeen atomic.Int64
)

const (
	repoUser     = "spoke-user"
	repoPassword = "spoke-secret-password"
	webChartDir  = "../testdata/charts/web"
	hrCRD        = "../../e2e/testdata/crds/flux/helm.toolkit.fluxcd.io_helmreleases.yaml"
	// otherChart is a second chart in the repository, at 1.1.0.
	otherChart = "other"
)

// chartVersions are the packaged versions; from 1.1.0 on the chart has a
// new default value, tier, which tells reuse from reset-then-reuse.
var chartVersions = []string{"1.0.0", "1.1.0", "1.2.0"}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "tugboat-actions-charts-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := packageCharts(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := httptest.NewServer(chartRepository(dir))
	defer srv.Close()
	chartsURL, privateURL = srv.URL+"/charts", srv.URL+"/private"
	chartsHost = strings.TrimPrefix(srv.URL, "http://")

	cluster, err = harness.Start(context.Background(), harness.Options{
		Name: "spoke", ControlPlaneOnly: true, CRDPaths: []string{hrCRD},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "cluster logs: %s\n", cluster.LogDir)
		_ = cluster.StopKeepLogs()
		return code
	}
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

// packageCharts packages the web chart at every version into dir and
// writes its index.yaml, with chart URLs relative to the repository.
func packageCharts(dir string) error {
	for _, v := range chartVersions {
		ch, err := loader.Load(webChartDir)
		if err != nil {
			return err
		}
		ch.Metadata.Version, ch.Metadata.AppVersion = v, v
		if v != "1.0.0" {
			addTier(ch)
		}
		if _, err := chartutil.Save(ch, dir); err != nil {
			return err
		}
	}
	// Another application's chart in the same repository: an action must
	// not swap a release's chart for it.
	other, err := loader.Load(webChartDir)
	if err != nil {
		return err
	}
	other.Metadata.Name, other.Metadata.Version = otherChart, "1.1.0"
	if _, err := chartutil.Save(other, dir); err != nil {
		return err
	}
	if err := packagePreviewCharts(dir); err != nil {
		return err
	}
	index, err := repo.IndexDirectory(dir, "")
	if err != nil {
		return err
	}
	return index.WriteFile(filepath.Join(dir, "index.yaml"), 0o644)
}

// addTier gives the chart a new default value, tier: frontend (in the raw
// values.yaml too, which is what a packaged chart holds).
func addTier(ch *chart.Chart) {
	ch.Values["tier"] = "frontend"
	for _, f := range ch.Raw {
		if f.Name == chartutil.ValuesfileName {
			f.Data = append(f.Data, []byte("\ntier: frontend\n")...)
		}
	}
}

// chartRepository serves dir under /charts/, and under /private/ to
// repoUser only.
func chartRepository(dir string) http.Handler {
	files := http.FileServer(http.Dir(dir))
	mux := http.NewServeMux()
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			credentialsSeen.Add(1)
		}
		mux.ServeHTTP(w, r)
	})
	mux.Handle("/charts/", http.StripPrefix("/charts", files))
	mux.Handle("/private/", http.StripPrefix("/private", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != repoUser || p != repoPassword {
			w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	})))
	return counted
}
