// Package config embeds the kustomize bases of config/ (agent, hub and crd)
// so the tugboat binary can build and apply them without a checkout
// (`tugboat install`).
package config

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	"k8s.io/apimachinery/pkg/util/json"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// bases are the kustomize directories, as they are in the repository.
//
//go:embed agent hub crd/kustomization.yaml crd/bases
var bases embed.FS

// root is where the bases are laid out in the in-memory file system:
// /config/agent, /config/hub, /config/crd.
const root = "/config"

// Build runs kustomize, in memory, on an overlay whose kustomization.yaml is
// kustomization. The overlay is a directory next to the bases: it names them
// ../agent, ../hub or ../crd, and the component ../agent/certmanager
// (kustomize wants relative paths). It returns the resources in kustomize's
// order, each as the object's fields decoded from JSON.
func Build(kustomization []byte) ([]map[string]any, error) {
	fsys := filesys.MakeFsInMemory()
	err := fs.WalkDir(bases, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return fsys.MkdirAll(path.Join(root, p))
		}
		data, err := bases.ReadFile(p)
		if err != nil {
			return err
		}
		return fsys.WriteFile(path.Join(root, p), data)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded kustomize bases: %w", err)
	}
	overlay := path.Join(root, "install")
	if err := fsys.MkdirAll(overlay); err != nil {
		return nil, err
	}
	if err := fsys.WriteFile(path.Join(overlay, "kustomization.yaml"), kustomization); err != nil {
		return nil, err
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, overlay)
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	out := make([]map[string]any, 0, res.Size())
	for _, r := range res.Resources() {
		// Through JSON, so the values have the types of decoded JSON
		// (int64, float64, string, ...) that Kubernetes clients expect.
		data, err := r.MarshalJSON()
		var m map[string]any
		if err == nil {
			err = json.Unmarshal(data, &m)
		}
		if err != nil {
			return nil, fmt.Errorf("kustomize build: %s %s: %w", r.GetKind(), r.GetName(), err)
		}
		out = append(out, m)
	}
	return out, nil
}
