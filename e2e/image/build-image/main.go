// Command build-image builds tugboat's images without a Docker daemon
// (`make image`): for each image it compiles the binary for linux with
// -trimpath and the version baked in, lays it over the base and writes an OCI
// image layout to <out>/<image> (and with --tarball a `docker load` tarball
// to <out>/<image>.tar).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"tugboat.dev/tugboat/e2e/bins"
	"tugboat.dev/tugboat/e2e/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "build-image:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		version    = flag.String("version", "", "the version to bake in (tugboat version) and tag; required")
		revision   = flag.String("revision", "", "the git commit, for the org.opencontainers.image.revision label")
		out        = flag.String("out", "bin/image", "directory for the OCI layouts (one per image) and tarballs")
		base       = flag.String("base", "", "base image: an OCI layout directory or a tarball; empty builds the default base (scratch, CA certificates, user 65532)")
		arch       = flag.String("arch", runtime.GOARCH, "GOARCH of the image")
		images     = flag.String("images", "tugboat,tugboat-agent", "the images to build, comma-separated")
		repository = flag.String("repository", image.Repository, "repository the images are tagged under")
		tarballs   = flag.Bool("tarball", false, "also write <out>/<image>.tar for docker load or kind load image-archive")
	)
	flag.Parse()
	if *version == "" {
		return fmt.Errorf("--version is required")
	}
	// SOURCE_DATE_EPOCH (https://reproducible-builds.org/specs/source-date-epoch/)
	// dates the image and its files; unset, they carry the epoch.
	var created time.Time
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
		}
		created = time.Unix(sec, 0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root, err := bins.FindRepoRoot(".")
	if err != nil {
		return err
	}
	for _, n := range strings.Split(*images, ",") {
		k, err := image.KindNamed(strings.TrimSpace(n))
		if err != nil {
			return err
		}
		o := image.Options{Kind: k, Version: *version, Revision: *revision, Created: created, Arch: *arch}
		if *base != "" {
			if o.Base, err = image.LoadBase(*base, *arch); err != nil {
				return err
			}
		}
		o.Binary = filepath.Join(*out, "linux-"+*arch, k.Name)
		if err := image.BuildBinary(ctx, root, k, *version, *arch, o.Binary); err != nil {
			return err
		}
		img, err := image.Build(o)
		if err != nil {
			return err
		}
		ref, err := image.Reference(*repository, k, *version)
		if err != nil {
			return err
		}
		dir := filepath.Join(*out, k.Name)
		if err := image.WriteLayout(dir, img, ref); err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s@%s: OCI layout %s\n", ref, digest, dir)
		if *tarballs {
			tar := dir + ".tar"
			if err := image.WriteTarball(tar, img, ref); err != nil {
				return err
			}
			fmt.Printf("%s: tarball %s\n", ref, tar)
		}
	}
	return nil
}
