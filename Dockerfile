# syntax=docker/dockerfile:1
# mailbox-mcp: a static Go binary on an empty base image, run as a non-root
# user. Build:   docker build --build-arg VERSION=v1.2.3 -t mailbox-mcp .
# The same build steps run without Docker in scripts/docker-build-check.sh
# (keep the two in step; tests/deploy_test.go checks this file).

ARG GO_VERSION=1.26
# the build stage's base; CI, which reaches no registry, passes a local image
# with the same Go (scripts/docker-ci.sh: --build-arg BUILD_IMAGE=local/golang-ci:1.26)
ARG BUILD_IMAGE=golang:${GO_VERSION}-bookworm

# --- build stage ---------------------------------------------------------------
FROM ${BUILD_IMAGE} AS build
WORKDIR /src
# modules first, so that the download layer is cached across source edits
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY internal ./internal
ARG VERSION=dev
# static: no libc in the runtime image; the version is linked in
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X github.com/mailbox-mcp/mailbox-mcp/internal/buildinfo.version=${VERSION}" \
      -o /out/mailbox-mcp ./cmd/mailbox-mcp \
 && /out/mailbox-mcp version

# --- runtime stage -------------------------------------------------------------
FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title="mailbox-mcp" \
      org.opencontainers.image.description="MCP gateway to a mailbox over IMAP and SMTP" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/mailbox-mcp/mailbox-mcp"
# CA certificates, to verify the mail servers' TLS certificates
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/mailbox-mcp /mailbox-mcp
# listen on all interfaces inside the container; publish the port to choose who reaches it
ENV BIND_ADDRESS=0.0.0.0 \
    PORT=3000
EXPOSE 3000
# an unprivileged user that exists nowhere (no /etc/passwd needed on scratch)
USER 65532:65532
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/mailbox-mcp", "healthcheck"]
ENTRYPOINT ["/mailbox-mcp"]
CMD ["serve"]
