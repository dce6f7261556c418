# syntax=docker/dockerfile:1
# Multi-stage build: a static codeport binary on distroless, running as a non-root user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/codeport .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/codeport /usr/local/bin/codeport
# 65532 is distroless's nonroot user; the chart runs it with a read-only root filesystem.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/codeport"]
CMD ["--help"]
