# syntax=docker/dockerfile:1
# Multi-stage, multi-platform build: a static codeport binary on distroless, running as a non-root
# user. The build stage runs on the builder's own platform and cross-compiles for the target one
# (docker buildx build --platform linux/amd64,linux/arm64: make docker-buildx), so no stage runs
# under emulation.
#
# Base images are referenced by tag. To pin them, replace each tag with tag@sha256:<digest> as
# `docker buildx imagetools inspect <image>` prints it for the multi-platform index.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/codeport .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/codeport /usr/local/bin/codeport
# 65532 is distroless's nonroot user; the chart runs it with a read-only root filesystem.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/codeport"]
CMD ["--help"]
