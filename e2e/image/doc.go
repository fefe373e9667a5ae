// Package image builds tugboat's container images without a Docker daemon
// (`make image`): it compiles the tugboat binary for Linux with -trimpath and
// the version baked in, lays it over a base image and writes the result as an
// OCI image layout (and, when asked, a `docker load` tarball) with the
// go-containerregistry libraries.
//
// The base is configurable (an OCI layout or a tarball on disk, since no
// registry is reachable from the machines that build it). By default it is
// built from files the module pins, so the build needs neither a registry
// nor a daemon, and gives the same bytes for the same inputs: an empty
// (scratch) file system with the Mozilla root certificates from
// golang.org/x/crypto/x509roots/fallback, an /etc/passwd and /etc/group
// naming the non-root user nonroot (65532), its home and /tmp. There is no
// shell and no package manager: the image holds the binary and those files.
//
// It is a build tool, not part of tugboat: the Dockerfile at the top of the
// repository builds the same images with a daemon, over distroless.
package image
