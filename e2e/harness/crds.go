package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadCRDs reads every CustomResourceDefinition from the given YAML files or
// directories (non-recursive; *.yaml and *.yml).
func ReadCRDs(paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		found, err := decodeCRDs(f, data)
		if err != nil {
			return nil, err
		}
		crds = append(crds, found...)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition found in %s", strings.Join(paths, ", "))
	}
	return crds, nil
}

// ReadCRDFiles decodes the CustomResourceDefinitions of YAML files keyed by
// name (config.CRDs), in the order of their names.
func ReadCRDFiles(files map[string][]byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		found, err := decodeCRDs(name, files[name])
		if err != nil {
			return nil, err
		}
		crds = append(crds, found...)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition found")
	}
	return crds, nil
}

func decodeCRDs(name string, data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				return crds, nil
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if crd.Kind == "CustomResourceDefinition" {
			crds = append(crds, crd)
		}
	}
}

// InstallCRDs creates (or updates) the CRDs found in paths and waits until
// every one is Established and served.
func InstallCRDs(ctx context.Context, c client.Client, paths ...string) error {
	crds, err := ReadCRDs(paths...)
	if err != nil {
		return err
	}
	return Install(ctx, c, crds)
}

// Install creates (or updates) crds and waits until every one is Established
// and served.
func Install(ctx context.Context, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range crds {
		err := c.Create(ctx, crd)
		if apierrors.IsAlreadyExists(err) {
			existing := &apiextensionsv1.CustomResourceDefinition{}
			if err = c.Get(ctx, client.ObjectKeyFromObject(crd), existing); err == nil {
				crd.ResourceVersion = existing.ResourceVersion
				err = c.Update(ctx, crd)
			}
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitFor(ctx, "CRD "+crd.Name+" Established", 50*time.Millisecond, nil, func(ctx context.Context) bool {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true
				}
			}
			return false
		}); err != nil {
			return err
		}
	}
	// Established can precede the REST mapping by a moment: wait until a
	// list of each kind succeeds.
	for _, crd := range crds {
		gvk := crd.Spec.Group + "/" + crd.Spec.Versions[0].Name + ", Kind=" + crd.Spec.Names.ListKind
		if err := waitFor(ctx, "CRD "+crd.Name+" served", 50*time.Millisecond, nil, func(ctx context.Context) bool {
			list := listFor(crd)
			return c.List(ctx, list) == nil
		}); err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
	}
	return nil
}
