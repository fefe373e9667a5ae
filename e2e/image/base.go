package image

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Files of the default base.
const (
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	usersFile    = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	groupsFile   = "root:x:0:\nnonroot:x:65532:\n"
	nsswitch     = "hosts: files dns\n"
)

// CABundle returns the PEM bundle of the Mozilla NSS root certificates that
// golang.org/x/crypto/x509roots/fallback embeds, at the version go.mod pins
// (so the bundle changes only when go.mod does, not with the build machine's
// /etc/ssl). Roots the NSS store constrains (distrust after a date) are left
// out: a PEM file cannot carry the constraint.
func CABundle() []byte {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return buf.Bytes()
}

// DefaultBase returns the base built from the module's own files: scratch,
// the CA bundle, /etc/passwd and /etc/group with the user nonroot (65532),
// its home, /tmp and an nsswitch.conf, as distroless's static:nonroot has
// them. The files' mtime is createdAt (the epoch for the zero time).
func DefaultBase(createdAt time.Time, arch string) (v1.Image, error) {
	t := created(createdAt)
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	return layerOver(base, t, arch, []entry{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(usersFile)},
		{name: "etc/group", mode: 0o644, data: []byte(groupsFile)},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte(nsswitch)},
		{name: "etc/ssl/", dir: true, mode: 0o755},
		{name: "etc/ssl/certs/", dir: true, mode: 0o755},
		{name: CABundlePath[1:], mode: 0o644, data: CABundle()},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: UID, gid: GID},
		{name: "root/", dir: true, mode: 0o700},
		{name: "tmp/", dir: true, mode: 0o1777},
	}, v1.History{CreatedBy: "tugboat e2e/image: default base (CA certificates, nonroot user)"}, func(cf *v1.ConfigFile) {
		cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + CABundlePath}
	})
}

// layerOver lays files over base as one OCI layer created at t, recorded in
// the image's history as h (at t), and sets the config: linux/arch, created
// at t, run as User in /, and what configure adds.
func layerOver(base v1.Image, t time.Time, arch string, files []entry, h v1.History, configure func(*v1.ConfigFile)) (v1.Image, error) {
	layer, err := tarLayer(t, files)
	if err != nil {
		return nil, err
	}
	h.Created = v1.Time{Time: t}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: h, MediaType: types.OCILayer})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: t}
	cf.Config.User = User
	cf.Config.WorkingDir = "/"
	configure(cf)
	return mutate.ConfigFile(img, cf)
}

// LoadBase reads a base image from path: a directory is an OCI image layout
// (the image for linux/arch is taken from its index, or its only image), a
// file a tarball as `docker save` or `crane pull` writes it.
func LoadBase(path, arch string) (v1.Image, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("base image: %w", err)
	}
	if !fi.IsDir() {
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			return nil, fmt.Errorf("base image %s (a tarball): %w", path, err)
		}
		return img, nil
	}
	idx, err := layout.ImageIndexFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("base image %s (an OCI layout): %w", path, err)
	}
	img, err := pick(idx, arch)
	if err != nil {
		return nil, fmt.Errorf("base image %s: %w", path, err)
	}
	return img, nil
}

// pick returns the image of idx (or of an index it nests) for linux/arch:
// the one whose descriptor names that platform, else the only image.
func pick(idx v1.ImageIndex, arch string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var images []v1.Descriptor
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			if img, err := pick(child, arch); err == nil {
				return img, nil
			}
		case d.MediaType.IsImage():
			if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch {
				return idx.Image(d.Digest)
			}
			if d.Platform == nil {
				images = append(images, d)
			}
		}
	}
	if len(images) == 1 {
		return idx.Image(images[0].Digest)
	}
	return nil, fmt.Errorf("no image for linux/%s (and not exactly one image without a platform)", arch)
}
