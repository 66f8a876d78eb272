# syntax=docker/dockerfile:1
#
# previewgate's container image: a static binary on scratch, run as a
# non-root user. Two ways to build it:
#
#   With a registry (pulls golang:1.26), the default target:
#     docker build -t previewgate .
#
#   Without a registry, from a binary built on the host (`runtime-host`):
#     mkdir -p ctx/rootfs/etc/ssl/certs ctx/data
#     CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o ctx/rootfs/previewgate .
#     cp /etc/ssl/certs/ca-certificates.crt ctx/rootfs/etc/ssl/certs/  # ACME needs public roots
#     cp Dockerfile ctx/ && docker build --target runtime-host -t previewgate ctx
#
# Stage order matters: the classic builder (no BuildKit, e.g. the engine API
# without version=2) builds every stage up to the target, so `runtime-host`
# comes before anything that pulls an image. BuildKit skips unused stages.

# base: what both runtime targets share. scratch has no /etc/passwd, hence a
# numeric user (65532, "nonroot" in distroless). Ports below 1024 need no
# capability in a container network (Docker >= 20.10 sets
# net.ipv4.ip_unprivileged_port_start=0); with network_mode host see
# deploy/compose.yaml.
FROM scratch AS base
USER 65532:65532
EXPOSE 80 443 9090
# The admin listener's /healthz, through the binary itself (scratch has no
# curl). healthcheck asks listen.admin of the file PREVIEWGATE_CONFIG names,
# so a config with another admin address stays healthy; a CMD that serves
# another file should set PREVIEWGATE_CONFIG to it too.
ENV PREVIEWGATE_CONFIG=/etc/previewgate/config.yaml
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
	CMD ["/previewgate", "healthcheck"]
ENTRYPOINT ["/previewgate"]
CMD ["serve", "--config", "/etc/previewgate/config.yaml"]

# runtime-host: the context holds rootfs/ (previewgate, optionally
# etc/ssl/certs/ca-certificates.crt) and data/ (empty, becomes the writable
# data dir). Files stay root-owned: the gateway cannot rewrite its binary.
FROM base AS runtime-host
COPY rootfs/ /
COPY --chown=65532:65532 data/ /var/lib/previewgate/

# build: a static binary and the CA roots from the Go image (Debian).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN mkdir -p /out/rootfs/etc/ssl/certs /out/data \
	&& CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/rootfs/previewgate . \
	&& cp /etc/ssl/certs/ca-certificates.crt /out/rootfs/etc/ssl/certs/

# runtime (default): the same image as runtime-host, built from source.
FROM base AS runtime
COPY --from=build /out/rootfs/ /
COPY --from=build --chown=65532:65532 /out/data/ /var/lib/previewgate/
