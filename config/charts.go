// Package config embeds tugboat's Helm charts, config/charts/tugboat-hub and
// config/charts/tugboat-agent: the one source of install manifests. `make
// generate` writes their generated parts (CRDs, RBAC, the agent's webhook
// configurations) under files/ of each chart. `tugboat install` installs
// them through the Helm SDK; tests render them with Render.
//
// It is not a general Helm library: it knows these two charts, installs them
// into a namespace as one release each, and renders them as `helm template`
// would.
package config

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The charts' names (and the names of the releases `tugboat install` makes).
const (
	HubChart   = "tugboat-hub"
	AgentChart = "tugboat-agent"
)

// charts holds both charts, every file included (all: keeps _helpers.tpl).
//
//go:embed all:charts/tugboat-hub all:charts/tugboat-agent
var charts embed.FS

// Chart loads an embedded chart by name (HubChart or AgentChart).
func Chart(name string) (*chart.Chart, error) {
	if name != HubChart && name != AgentChart {
		return nil, fmt.Errorf("no chart %q: tugboat ships %s and %s", name, HubChart, AgentChart)
	}
	root := path.Join("charts", name)
	var files []*loader.BufferedFile
	err := fs.WalkDir(charts, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := charts.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(p, root+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded chart %s: %w", name, err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading the embedded chart %s: %w", name, err)
	}
	return c, nil
}

// CRDs returns the tugboat.dev CustomResourceDefinitions the hub chart
// installs, as YAML documents keyed by file name.
func CRDs() (map[string][]byte, error) {
	const dir = "charts/" + HubChart + "/files/crds"
	entries, err := charts.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range entries {
		data, err := charts.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = data
	}
	return out, nil
}

// renderKubeVersion is the Kubernetes version Render assumes: the minor of
// the k8s.io libraries in go.mod.
func renderKubeVersion() *chartutil.KubeVersion {
	return &chartutil.KubeVersion{Version: "v1.36.0", Major: "1", Minor: "36"}
}

// Render renders a chart as `helm template --namespace namespace` would,
// with values over the chart's defaults (checked by its values.schema.json),
// without a cluster. It returns the objects in Helm's install order.
func Render(name, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	c, err := Chart(name)
	if err != nil {
		return nil, err
	}
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	}
	install := action.NewInstall(cfg)
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = name, namespace
	install.DisableHooks = true
	// Without a cluster, render for the Kubernetes version of the client
	// libraries tugboat is built with (Helm's default is far older).
	install.KubeVersion = renderKubeVersion()
	rel, err := install.Run(c, values)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart %s: %w", name, err)
	}
	return Decode([]byte(rel.Manifest))
}

// Decode splits a YAML stream (a release's manifest) into objects, in
// order, skipping empty documents.
func Decode(manifest []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding the rendered manifest: %w", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
