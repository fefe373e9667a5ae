package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// LDFlags are the linker flags of an image's binary: no symbol table or
// DWARF, and the version `tugboat version` prints.
func LDFlags(version string) string {
	return "-s -w -X " + VersionVariable + "=" + version
}

// BuildBinary compiles ./cmd/tugboat of the checkout at repoRoot for
// linux/arch into out, static (CGO_ENABLED=0), with -trimpath, the kind's
// build tags and LDFlags(version), as the Dockerfile does.
func BuildBinary(ctx context.Context, repoRoot string, k Kind, version, arch, out string) error {
	args := []string{"build", "-trimpath", "-ldflags", LDFlags(version), "-o", out}
	if k.Tags != "" {
		args = append(args, "-tags", k.Tags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/tugboat")...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %w\n%s", args, err, out)
	}
	return nil
}

// RefName is the org.opencontainers.image.ref.name annotation WriteLayout
// gives the image: its full reference, repository:tag.
const RefName = "org.opencontainers.image.ref.name"

// Reference returns the image's reference: Repository/name:version.
func Reference(repository string, k Kind, version string) (name.Tag, error) {
	return name.NewTag(repository + "/" + k.Name + ":" + version)
}

// WriteLayout writes img as the only image of a new OCI image layout at
// dir (replacing what was there), annotated with its reference.
func WriteLayout(dir string, img v1.Image, ref name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	return p.AppendImage(img,
		layout.WithAnnotations(map[string]string{RefName: ref.String()}),
		layout.WithPlatform(v1.Platform{OS: cf.OS, Architecture: cf.Architecture}))
}

// WriteTarball writes img as a `docker load` tarball at path, tagged ref.
func WriteTarball(path string, img v1.Image, ref name.Tag) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return tarball.WriteToFile(path, ref, img)
}
