package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What every tugboat image shares.
const (
	// BinaryPath is where the tugboat binary lives in both images; it is
	// the entrypoint, so a Pod's args are tugboat's (`hub ...`, `agent ...`).
	BinaryPath = "/usr/local/bin/tugboat"
	// UID and GID are the non-root user the images run as (distroless's
	// "nonroot").
	UID = 65532
	GID = 65532
	// User is the config's user, numeric so that runAsNonRoot can check it.
	User = "65532:65532"
	// Source is the org.opencontainers.image.source label.
	Source = "https://github.com/tugboat-dev/tugboat"
	// Repository is where the images are published.
	Repository = "ghcr.io/tugboat-dev"
	// VersionVariable is the link-time variable `tugboat version` prints.
	VersionVariable = "tugboat.dev/tugboat/cmd/tugboat/app.Version"
)

// Kind is one of tugboat's two images.
type Kind struct {
	// Name is the image name under Repository, and the Dockerfile target.
	Name string
	// Tags are the Go build tags of its binary.
	Tags string
	// Description is its org.opencontainers.image.description label.
	Description string
}

// Kinds returns both images: tugboat (the hub, the CLI and the agent, every
// subcommand) and tugboat-agent (the agent-only build, -tags agentonly).
func Kinds() []Kind {
	return []Kind{
		{Name: "tugboat", Description: "tugboat: the hub, the spoke agent and the CLI of the multi-cluster Helm promotion controller"},
		{Name: "tugboat-agent", Tags: "agentonly", Description: "tugboat-agent: the spoke agent only (tugboat built with -tags agentonly)"},
	}
}

// KindNamed returns the Kind called name.
func KindNamed(name string) (Kind, error) {
	for _, k := range Kinds() {
		if k.Name == name {
			return k, nil
		}
	}
	return Kind{}, fmt.Errorf("no image %q (want tugboat or tugboat-agent)", name)
}

// Options describe one image to build.
type Options struct {
	Kind Kind
	// Binary is the Linux tugboat binary to put at BinaryPath.
	Binary string
	// Version and Revision (the git commit) become labels.
	Version, Revision string
	// Created is the image's creation time and every added file's mtime;
	// the zero time means the Unix epoch, so equal inputs give equal digests.
	Created time.Time
	// Arch is the binary's GOARCH (the config's architecture).
	Arch string
	// Base is the image to build on; nil means DefaultBase.
	Base v1.Image
}

// Labels returns the org.opencontainers.image.* labels of an image.
func Labels(o Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       o.Kind.Name,
		"org.opencontainers.image.description": o.Kind.Description,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.url":         Source,
		"org.opencontainers.image.created":     created(o.Created).UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

// Build lays the binary over the base and sets the entrypoint, the user
// and the labels.
func Build(o Options) (v1.Image, error) {
	if o.Kind.Name == "" || o.Binary == "" || o.Version == "" || o.Arch == "" {
		return nil, fmt.Errorf("image: kind, binary, version and arch are required")
	}
	base := o.Base
	if base == nil {
		var err error
		if base, err = DefaultBase(o.Created, o.Arch); err != nil {
			return nil, err
		}
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	t := created(o.Created)
	return layerOver(base, t, o.Arch, []entry{
		{name: "usr/", dir: true, mode: 0o755},
		{name: "usr/local/", dir: true, mode: 0o755},
		{name: "usr/local/bin/", dir: true, mode: 0o755},
		{name: BinaryPath[1:], mode: 0o755, data: bin},
	}, v1.History{CreatedBy: "tugboat e2e/image: COPY tugboat " + BinaryPath, Comment: o.Kind.Name + " " + o.Version}, func(cf *v1.ConfigFile) {
		cf.Config.Entrypoint = []string{BinaryPath}
		cf.Config.Cmd = nil
		if cf.Config.Labels == nil {
			cf.Config.Labels = map[string]string{}
		}
		for k, v := range Labels(o) {
			cf.Config.Labels[k] = v
		}
	})
}

// created returns t, or the Unix epoch for the zero time.
func created(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return t.UTC()
}

// entry is a file or directory of a layer.
type entry struct {
	name     string
	dir      bool
	mode     int64
	uid, gid int
	data     []byte
}

// tarLayer returns an OCI layer (gzip) holding entries, owned by root unless
// the entry says otherwise, with mtime t.
func tarLayer(t time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: t, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
