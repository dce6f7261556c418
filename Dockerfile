# syntax=docker/dockerfile:1@sha256:ecfaec9ed6d810b56388c508f4121597bfbba70d41a6dfeee4d8cad5f295fc32
# Multi-stage, multi-platform build: a static codeport binary on distroless, running as a non-root
# user. The build stage runs on the builder's own platform and cross-compiles for the target one
# (docker buildx build --platform linux/amd64,linux/arm64: make docker-buildx), so no stage runs
# under emulation.
#
# Every base image is pinned by the digest of its multi-platform index, the tag kept beside it for
# readers: the tag says what the image is, the digest decides which bytes are built on. The Go
# image carries exactly go.mod's Go version (the official image sets GOTOOLCHAIN=local, so an older
# one refuses to build). `make pin-images` resolves the tags anew and rewrites the digests.
FROM --platform=$BUILDPLATFORM golang:1.26.8@sha256:3c3e25a4da13fd0478eed2df1eb35a0e667094a7124d3993a6a1d30f71c17e79 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/codeport .

FROM gcr.io/distroless/static-debian12:nonroot@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639
COPY --from=build /out/codeport /usr/local/bin/codeport
# 65532 is distroless's nonroot user; the chart runs it with a read-only root filesystem.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/codeport"]
CMD ["--help"]
