#!/usr/bin/env bash
# toxiproxy.sh - build Shopify's toxiproxy server, the byte-level fault
# injector of the fault suite (tests/faults; docs/testing.md, "Faults").
#
#   scripts/toxiproxy.sh build   build it unless the cached binary is current;
#                                print the binary's path on stdout
#   scripts/toxiproxy.sh path    print where the binary is (or would be)
#
# Nothing of toxiproxy is in this repository but tests/toxiproxy/go.mod and
# go.sum: a wrapper module whose tool directive names
# github.com/Shopify/toxiproxy/v2/cmd/server at v2.5.0 (the version of the
# client package the main module's tests use). Its sources come from the Go
# module proxy (or the module cache), checked against tests/toxiproxy/go.sum.
#
# The binary is cached per content of tests/toxiproxy/go.mod and go.sum, the
# Go version and the platform, under
#   ${MAILBOX_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mailbox-mcp}/toxiproxy-KEY/toxiproxy-server
# so a machine builds it once (about 30 s cold; ~15 MB). Builds by parallel
# processes are serialized with flock(1); older builds are removed.
set -euo pipefail

die() { echo "toxiproxy.sh: $*" >&2; exit 1; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
MOD=$ROOT/tests/toxiproxy
[ -s "$MOD/go.mod" ] && [ -s "$MOD/go.sum" ] || die "$MOD/go.mod or go.sum missing"
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || die "go not found on PATH"
# the wrapper module alone: no go.work of a parent directory, no GOFLAGS
# meant for the main module; pure Go
export GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0

CACHE=${MAILBOX_MCP_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/mailbox-mcp}
KEY=$( { cat "$MOD/go.mod" "$MOD/go.sum"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16)
DIR=$CACHE/toxiproxy-$KEY
BIN=$DIR/toxiproxy-server

cmd_build() {
  mkdir -p "$CACHE"
  exec 9>"$CACHE/toxiproxy.lock"
  flock 9
  if [ -x "$BIN" ]; then
    echo "$BIN"
    return
  fi
  local version start tmp
  version=$(cd "$MOD" && go list -m -f '{{.Version}}' github.com/Shopify/toxiproxy/v2) || die "cannot read toxiproxy's version from $MOD/go.mod"
  mkdir -p "$DIR"
  tmp=$(mktemp "$DIR/toxiproxy.XXXXXX")
  start=$(date +%s)
  echo "toxiproxy.sh: building toxiproxy $version into $DIR (once per machine; about 30 s cold)" >&2
  if ! (cd "$MOD" && go build -trimpath -ldflags "-s -w" -o "$tmp" github.com/Shopify/toxiproxy/v2/cmd/server) >&2; then
    rm -f "$tmp"
    die "building toxiproxy failed (the Go module proxy must be reachable on a machine without it in the module cache)"
  fi
  mv -f "$tmp" "$BIN"
  echo "toxiproxy.sh: built in $(( $(date +%s) - start ))s" >&2
  local old
  for old in "$CACHE"/toxiproxy-*/; do
    [ "${old%/}" = "$DIR" ] || rm -rf "${old%/}"
  done
  echo "$BIN"
}

case "${1:-}" in
  build) cmd_build ;;
  path) echo "$BIN" ;;
  *) die "usage: $0 build|path" ;;
esac
