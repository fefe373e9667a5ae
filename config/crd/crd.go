// Package crd embeds the generated CustomResourceDefinitions of
// tugboat.dev/v1alpha1 (config/crd/bases, written by `make generate`), so the
// tugboat binary can install them without a checkout.
package crd

import (
	"embed"
	"io/fs"
)

//go:embed bases/*.yaml
var bases embed.FS

// Bases returns the CRD YAML files, keyed by file name.
func Bases() (fs.FS, error) { return fs.Sub(bases, "bases") }
