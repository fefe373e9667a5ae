package devenv

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
)

//go:embed charts/demo charts/demo/templates/*
var demoChart embed.FS

// DemoChart is the name of the sample chart the dev environment serves.
const DemoChart = "demo"

// DemoVersions are the versions of the sample chart the repository holds.
var DemoVersions = []string{"1.0.0", "1.1.0", "1.2.0"}

// ChartRepo is a local Helm chart repository (index.yaml and packaged
// charts) served over HTTP on loopback.
type ChartRepo struct {
	URL string
	srv *http.Server
	ln  net.Listener
}

// StartChartRepo packages the embedded sample chart at every DemoVersion
// (or at versions, when given) into dir, indexes it and serves it.
func StartChartRepo(dir string, versions ...string) (*ChartRepo, error) {
	if len(versions) == 0 {
		versions = DemoVersions
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String()
	var files []*loader.BufferedFile
	err = fs.WalkDir(demoChart, "charts/demo", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := demoChart.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("charts/demo", path)
		files = append(files, &loader.BufferedFile{Name: filepath.ToSlash(rel), Data: data})
		return nil
	})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	for _, v := range versions {
		ch, err := loader.LoadFiles(files)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("loading the sample chart: %w", err)
		}
		ch.Metadata.Version, ch.Metadata.AppVersion = v, v
		if _, err := chartutil.Save(ch, dir); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("packaging the sample chart %s: %w", v, err)
		}
	}
	idx, err := repo.IndexDirectory(dir, url)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	idx.SortEntries()
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		_ = ln.Close()
		return nil, err
	}
	r := &ChartRepo{URL: url, ln: ln, srv: &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "chart repository:", err)
		}
	}()
	return r, nil
}

// ChartURL returns the URL of the packaged sample chart at version.
func (r *ChartRepo) ChartURL(version string) string {
	return fmt.Sprintf("%s/%s-%s.tgz", r.URL, DemoChart, version)
}

// Stop stops serving.
func (r *ChartRepo) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}
