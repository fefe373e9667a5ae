package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/image"
)

// shells are the names no image may hold anywhere.
var shells = map[string]bool{"sh": true, "bash": true, "ash": true, "dash": true, "zsh": true, "busybox": true}

// TestImage_runsVersionAsNonRoot builds both images as `make image` does
// (the binary with -trimpath and the version ldflags, over the default
// base), writes each as an OCI layout and a tarball, loads the layout back
// and checks what a cluster would run: the entrypoint, the non-root user, no
// shell in any layer, the labels, and that the binary taken out of the image
// prints the version baked in (and that only the full one has a hub).
func TestImage_runsVersionAsNonRoot(t *testing.T) {
	for _, kind := range image.Kinds() {
		t.Run(kind.Name, func(t *testing.T) { testImage(t, kind) })
	}
}

func testImage(t *testing.T, kind image.Kind) {
	g := NewWithT(t)
	root, err := bins.FindRepoRoot(".")
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	const version = "v0.9.1-imagetest"
	created := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	bin := filepath.Join(dir, kind.Name)
	g.Expect(image.BuildBinary(ctx, root, kind, version, runtime.GOARCH, bin)).To(Succeed())

	opts := image.Options{Kind: kind, Binary: bin, Version: version, Revision: "0123abc", Created: created, Arch: runtime.GOARCH}
	img, err := image.Build(opts)
	g.Expect(err).NotTo(HaveOccurred())
	ref, err := image.Reference(image.Repository, kind, version)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(image.WriteLayout(filepath.Join(dir, "layout"), img, ref)).To(Succeed())
	g.Expect(image.WriteTarball(filepath.Join(dir, "image.tar"), img, ref)).To(Succeed())

	// Load the layout from disk, as a registry push or `skopeo copy oci:` would.
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "layout"))
	g.Expect(err).NotTo(HaveOccurred())
	im, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(im.Manifests).To(HaveLen(1))
	desc := im.Manifests[0]
	g.Expect(desc.Annotations).To(HaveKeyWithValue(image.RefName, "ghcr.io/tugboat-dev/"+kind.Name+":"+version))
	g.Expect(desc.Platform).To(Equal(&v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
	loaded, err := idx.Image(desc.Digest)
	g.Expect(err).NotTo(HaveOccurred())

	cf, err := loaded.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cf.OS).To(Equal("linux"))
	g.Expect(cf.Config.Entrypoint).To(Equal([]string{"/usr/local/bin/tugboat"}))
	g.Expect(cf.Config.Cmd).To(BeEmpty())
	g.Expect(cf.Config.User).To(Equal("65532:65532"))
	g.Expect(cf.Config.Labels).To(Equal(map[string]string{
		"org.opencontainers.image.title":       kind.Name,
		"org.opencontainers.image.description": kind.Description,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    "0123abc",
		"org.opencontainers.image.source":      "https://github.com/tugboat-dev/tugboat",
		"org.opencontainers.image.url":         "https://github.com/tugboat-dev/tugboat",
		"org.opencontainers.image.created":     "2026-11-01T12:00:00Z",
	}))
	g.Expect(cf.Config.Env).To(ContainElement("SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"))

	// Every layer: no shell anywhere, nothing but the base's files and the
	// binary, owned by root except the user's home.
	layers, err := loaded.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layers).To(HaveLen(2))
	files := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		g.Expect(err).NotTo(HaveOccurred())
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			g.Expect(err).NotTo(HaveOccurred())
			name := path.Clean("/" + h.Name)
			g.Expect(shells).NotTo(HaveKey(path.Base(name)), "layer holds %s", name)
			g.Expect(h.Typeflag).To(BeElementOf(byte(tar.TypeReg), byte(tar.TypeDir)), "%s is neither a file nor a directory", name)
			files[name] = h
		}
		g.Expect(rc.Close()).To(Succeed())
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	g.Expect(names).To(ConsistOf("/etc", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/ssl", "/etc/ssl/certs",
		"/etc/ssl/certs/ca-certificates.crt", "/home", "/home/nonroot", "/root", "/tmp",
		"/usr", "/usr/local", "/usr/local/bin", "/usr/local/bin/tugboat"))
	g.Expect(files["/usr/local/bin/tugboat"].Mode).To(Equal(int64(0o755)))
	g.Expect(files["/home/nonroot"].Uid).To(Equal(65532))
	g.Expect(files["/tmp"].Mode).To(Equal(int64(0o1777)))

	fs := flatten(t, loaded)
	g.Expect(string(fs["/etc/passwd"])).To(ContainSubstring("nonroot:x:65532:65532:"))
	g.Expect(string(fs["/etc/group"])).To(ContainSubstring("nonroot:x:65532:"))
	g.Expect(countCerts(t, fs["/etc/ssl/certs/ca-certificates.crt"])).To(BeNumerically(">", 100))

	// The binary out of the image prints the version it was built with.
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is for linux")
	}
	exe := filepath.Join(dir, "from-image")
	g.Expect(os.WriteFile(exe, fs["/usr/local/bin/tugboat"], 0o755)).To(Succeed())
	out, err := exec.CommandContext(ctx, exe, "version").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(strings.TrimSpace(string(out))).To(Equal(version))
	// The agent-only build has no hub; the full one has.
	out, err = exec.CommandContext(ctx, exe, "hub", "--help").CombinedOutput()
	if kind.Tags == "agentonly" {
		g.Expect(err).To(HaveOccurred(), "the agent image's binary knows `hub`:\n%s", out)
	} else {
		g.Expect(err).NotTo(HaveOccurred(), "the tugboat image's binary has no `hub`:\n%s", out)
	}
	out, err = exec.CommandContext(ctx, exe, "agent", "--help").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s: no `agent`:\n%s", kind.Name, out)

	// The tarball holds the same image, and the build is reproducible.
	fromTar, err := tarball.ImageFromPath(filepath.Join(dir, "image.tar"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := image.Build(opts)
	g.Expect(err).NotTo(HaveOccurred())
	want, err := img.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	for name, other := range map[string]v1.Image{"the layout's": loaded, "a rebuilt": again} {
		d, err := other.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d).To(Equal(want), "%s image's digest", name)
	}
	// A docker tarball keeps the config and the layers, not the manifest
	// (a daemon writes its own).
	for name, other := range map[string]v1.Image{"the tarball's": fromTar, "a rebuilt": again} {
		d, err := other.ConfigName()
		g.Expect(err).NotTo(HaveOccurred())
		w, err := img.ConfigName()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d).To(Equal(w), "%s image's config digest", name)
		layers, err := other.Layers()
		g.Expect(err).NotTo(HaveOccurred())
		wantLayers, err := img.Layers()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(layers).To(HaveLen(len(wantLayers)))
		for i := range layers {
			d, _ := layers[i].DiffID()
			w, _ := wantLayers[i].DiffID()
			g.Expect(d).To(Equal(w), "%s image's layer %d", name, i)
		}
	}
}

// TestLoadBase_layoutAndTarball builds on a base read from an OCI layout and
// from a tarball (as the --base flag of `make image` does) and checks that
// the base's layers and settings are kept under the binary's layer.
func TestLoadBase_layoutAndTarball(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	base, err := image.DefaultBase(time.Time{}, "arm64")
	g.Expect(err).NotTo(HaveOccurred())
	// A base of someone else's: an extra variable and label.
	bcf, err := base.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	bcf = bcf.DeepCopy()
	bcf.Config.Env = append(bcf.Config.Env, "TZ=UTC")
	bcf.Config.Labels = map[string]string{"com.example.base": "yes"}
	bcf.Config.User = "0"
	bcf.Config.Cmd = []string{"/bin/sh"}
	base, err = mutate.ConfigFile(base, bcf)
	g.Expect(err).NotTo(HaveOccurred())
	baseRef, err := image.Reference("example.com/bases", image.Kind{Name: "static"}, "1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(image.WriteLayout(filepath.Join(dir, "base"), base, baseRef)).To(Succeed())
	g.Expect(image.WriteTarball(filepath.Join(dir, "base.tar"), base, baseRef)).To(Succeed())
	baseLayers, err := base.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	wantBase, err := baseLayers[0].DiffID()
	g.Expect(err).NotTo(HaveOccurred())

	bin := filepath.Join(dir, "tugboat")
	g.Expect(os.WriteFile(bin, []byte("not really a binary"), 0o755)).To(Succeed())
	kind, err := image.KindNamed("tugboat")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = image.LoadBase(filepath.Join(dir, "base"), "amd64")
	g.Expect(err).To(MatchError(ContainSubstring("no image for linux/amd64")))
	_, err = image.LoadBase(filepath.Join(dir, "missing"), "arm64")
	g.Expect(err).To(HaveOccurred())

	for _, p := range []string{filepath.Join(dir, "base"), filepath.Join(dir, "base.tar")} {
		b, err := image.LoadBase(p, "arm64")
		g.Expect(err).NotTo(HaveOccurred(), p)
		img, err := image.Build(image.Options{Kind: kind, Binary: bin, Version: "v1.2.3", Arch: "arm64", Base: b})
		g.Expect(err).NotTo(HaveOccurred())
		layers, err := img.Layers()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(layers).To(HaveLen(2), p)
		d, err := layers[0].DiffID()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d).To(Equal(wantBase), p)
		cf, err := img.ConfigFile()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cf.Architecture).To(Equal("arm64"))
		g.Expect(cf.Config.Env).To(ContainElement("TZ=UTC"))
		g.Expect(cf.Config.Labels).To(HaveKeyWithValue("com.example.base", "yes"))
		g.Expect(cf.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.title", "tugboat"))
		g.Expect(cf.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.version", "v1.2.3"))
		// The image's own settings win over the base's.
		g.Expect(cf.Config.User).To(Equal("65532:65532"))
		g.Expect(cf.Config.Cmd).To(BeEmpty())
		g.Expect(cf.Config.Entrypoint).To(Equal([]string{image.BinaryPath}))
		g.Expect(string(flatten(t, img)[image.BinaryPath])).To(Equal("not really a binary"))
	}
}

// flatten returns the regular files of img's file system, by absolute path.
func flatten(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			var b bytes.Buffer
			if _, err := io.Copy(&b, tr); err != nil {
				t.Fatal(err)
			}
			files[path.Clean("/"+h.Name)] = b.Bytes()
		}
	}
}

// countCerts parses a PEM bundle and counts its certificates.
func countCerts(t *testing.T, data []byte) int {
	t.Helper()
	n := 0
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return n
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatalf("certificate %d of the bundle: %v", n, err)
		}
		n++
	}
}
