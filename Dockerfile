# syntax=docker/dockerfile:1
#
# tugboat's images, for a machine with a Docker (BuildKit) daemon:
#
#   docker build -t ghcr.io/tugboat-dev/tugboat:dev .                        # hub, agent and CLI
#   docker build --target agent -t ghcr.io/tugboat-dev/tugboat-agent:dev .   # the agent-only build
#
# Without a daemon, `make image` builds the same two images as OCI layouts
# (e2e/image; docs/install.md). Both run the static binary at
# /usr/local/bin/tugboat as its entrypoint, as user 65532, on distroless
# static (no shell, no package manager). Pin BASE_IMAGE by digest in a release
# pipeline: --build-arg BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:...

ARG GO_VERSION=1.26
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

# The Go build runs on the builder's own platform and cross-compiles.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS source
WORKDIR /src
ENV GOTOOLCHAIN=go1.26.10 CGO_ENABLED=0
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api api
COPY agent agent
COPY cmd cmd
COPY config config
COPY controllers controllers
COPY e2e e2e
COPY webhook webhook

# VERSION is what `tugboat version` prints (and the agent reports to the
# hub); the ldflags are those of `make image` (e2e/image.LDFlags).
FROM source AS build-tugboat
ARG TARGETOS=linux TARGETARCH VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X tugboat.dev/tugboat/cmd/tugboat/app.Version=${VERSION}" \
      -o /out/tugboat ./cmd/tugboat

# The agent-only build: only `agent` and `version` (see the Makefile's build).
FROM source AS build-agent
ARG TARGETOS=linux TARGETARCH VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -tags agentonly \
      -ldflags "-s -w -X tugboat.dev/tugboat/cmd/tugboat/app.Version=${VERSION}" \
      -o /out/tugboat ./cmd/tugboat

FROM ${BASE_IMAGE} AS agent
ARG VERSION=dev REVISION=""
LABEL org.opencontainers.image.title="tugboat-agent" \
      org.opencontainers.image.description="tugboat-agent: the spoke agent only (tugboat built with -tags agentonly)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/tugboat-dev/tugboat" \
      org.opencontainers.image.url="https://github.com/tugboat-dev/tugboat"
COPY --from=build-agent /out/tugboat /usr/local/bin/tugboat
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/usr/local/bin/tugboat"]

# The default target (last): the full binary, for the hub and the CLI.
FROM ${BASE_IMAGE} AS tugboat
ARG VERSION=dev REVISION=""
LABEL org.opencontainers.image.title="tugboat" \
      org.opencontainers.image.description="tugboat: the hub, the spoke agent and the CLI of the multi-cluster Helm promotion controller" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/tugboat-dev/tugboat" \
      org.opencontainers.image.url="https://github.com/tugboat-dev/tugboat"
COPY --from=build-tugboat /out/tugboat /usr/local/bin/tugboat
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/usr/local/bin/tugboat"]
