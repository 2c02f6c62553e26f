#!/usr/bin/env bash
# hydra.sh - build Ory Hydra, the real OpenID provider of the OAuth tests
# (internal/hydra starts it; docs/testing.md, "The OAuth provider").
#
#   scripts/hydra.sh build   build it unless the cached binary is current;
#                            print the binary's path on stdout
#   scripts/hydra.sh path    print where the binary is (or would be)
#
# Nothing of Hydra is in this repository but tests/hydra/go.mod and go.sum:
# a wrapper module whose tool directive names github.com/ory/hydra/v2 and
# which repeats Hydra's own `replace github.com/gobuffalo/pop/v6 => ory/pop`.
# A dependent module ignores a dependency's replace lines, so a plain
# `go build github.com/ory/hydra/v2@VERSION` or `go install` fails; the
# wrapper builds it. Its sources come from the Go module proxy (or the module
# cache), checked against tests/hydra/go.sum.
#
# Build tags sqlite,sqlite_omit_load_extension (as Hydra's own Makefile):
# without them DSN=memory (SQLite in memory) is not compiled in. SQLite is
# cgo, so a C compiler is needed (the same one go test -race needs).
#
# The binary is cached per content of tests/hydra/go.mod and go.sum, the Go
# version and the platform, under
#   ${MAILBOX_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mailbox-mcp}/hydra-KEY/hydra
# so a machine builds it once (about 2 min cold, 20 s with Go's build cache
# warm; ~56 MB) and a fresh CI machine once per run. Builds by parallel
# processes are serialized with flock(1); older hydra-* builds are removed.
set -euo pipefail

die() { echo "hydra.sh: $*" >&2; exit 1; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
MOD=$ROOT/tests/hydra
[ -s "$MOD/go.mod" ] && [ -s "$MOD/go.sum" ] || die "$MOD/go.mod or go.sum missing"
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || die "go not found on PATH"
# the wrapper module alone: no go.work of a parent directory, no GOFLAGS
# meant for the main module
export GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=1

TAGS=sqlite,sqlite_omit_load_extension
CACHE=${MAILBOX_MCP_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/mailbox-mcp}
KEY=$( { cat "$MOD/go.mod" "$MOD/go.sum"; echo "$TAGS"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16)
DIR=$CACHE/hydra-$KEY
BIN=$DIR/hydra

cmd_build() {
  mkdir -p "$CACHE"
  exec 9>"$CACHE/hydra.lock"
  flock 9
  if [ -x "$BIN" ]; then
    echo "$BIN"
    return
  fi
  command -v "$(go env CC)" >/dev/null || die "no C compiler ($(go env CC)): Hydra's SQLite is cgo; install gcc libc6-dev"
  local version start tmp
  version=$(cd "$MOD" && go list -m -f '{{.Version}}' github.com/ory/hydra/v2) || die "cannot read Hydra's version from $MOD/go.mod"
  mkdir -p "$DIR"
  tmp=$(mktemp "$DIR/hydra.XXXXXX")
  start=$(date +%s)
  echo "hydra.sh: building Ory Hydra $version into $DIR (once per machine; about 2 min cold)" >&2
  if ! (cd "$MOD" && go build -trimpath -tags "$TAGS" \
        -ldflags "-s -w -X github.com/ory/hydra/v2/driver/config.Version=$version" \
        -o "$tmp" github.com/ory/hydra/v2) >&2; then
    rm -f "$tmp"
    die "building Hydra failed (the Go module proxy must be reachable on a machine without it in the module cache)"
  fi
  mv -f "$tmp" "$BIN"
  echo "hydra.sh: built in $(( $(date +%s) - start ))s" >&2
  # builds for other go.sum contents or Go versions are of no further use
  local old
  for old in "$CACHE"/hydra-*/; do
    [ "${old%/}" = "$DIR" ] || rm -rf "${old%/}"
  done
  echo "$BIN"
}

case "${1:-}" in
  build) cmd_build ;;
  path) echo "$BIN" ;;
  *) die "usage: $0 build|path" ;;
esac
