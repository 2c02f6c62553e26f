#!/usr/bin/env bash
# docker-build-check.sh - the Dockerfile's build steps without a Docker
# engine: the same static build (CGO_ENABLED=0, -trimpath, the version linked
# in with -ldflags -X), then checks that the binary
#   - is statically linked (no ELF interpreter, no dynamic section),
#   - prints the version it was built with (`version`),
#   - answers `healthcheck` against a running gateway (exit 0), and fails it
#     (exit 1) when nothing listens,
# running as the Dockerfile's user when started as root (uid 65532).
#
#   scripts/docker-build-check.sh [VERSION]     (default: v0.0.0-check)
#
# Exit status 0 when every check passes. Needs Go; no network beyond the Go
# module proxy (modules are usually cached).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/go/bin"

version=${1:-v0.0.0-check}
work=$(mktemp -d "${TMPDIR:-/tmp}/docker-build-check.XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# The Dockerfile's flags, read from it so that the two cannot drift apart.
grep -q 'CGO_ENABLED=0 GOOS=linux go build -trimpath' Dockerfile || fail "Dockerfile build line changed: update this script"
ldflags=$(sed -n 's/.*-ldflags "\([^"]*\)".*/\1/p' Dockerfile)
[ -n "$ldflags" ] || fail "no -ldflags in Dockerfile"
ldflags=${ldflags//\$\{VERSION\}/$version}

bin="$work/mailbox-mcp"
echo "==> CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags \"$ldflags\" ./cmd/mailbox-mcp"
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "$ldflags" -o "$bin" ./cmd/mailbox-mcp
ok "built $(du -h "$bin" | cut -f1) $bin"

# static: no PT_INTERP program header and no dynamic section
if command -v readelf >/dev/null; then
  if readelf -lW "$bin" | grep -q 'INTERP'; then fail "binary has an ELF interpreter (dynamically linked)"; fi
  if readelf -dW "$bin" 2>/dev/null | grep -q 'NEEDED'; then fail "binary needs shared libraries"; fi
else
  go version -m "$bin" | grep -q 'CGO_ENABLED=0' || fail "binary not built with CGO_ENABLED=0"
fi
if command -v file >/dev/null; then
  file "$bin" | grep -q 'statically linked' || fail "file(1) does not call it statically linked: $(file "$bin")"
fi
ok "statically linked"

# run as the image's user when we can
as_user=()
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  chmod 0755 "$work" "$bin"
  as_user=(setpriv --reuid=65532 --regid=65532 --clear-groups)
fi

got=$(env -i "${as_user[@]}" "$bin" version)
[ "$got" = "mailbox-mcp $version" ] || fail "version: got '$got', want 'mailbox-mcp $version'"
ok "version: $got"

# a free port
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

# healthcheck with nothing listening: must fail
if env -i PORT="$port" "${as_user[@]}" "$bin" healthcheck --timeout 2s >/dev/null 2>&1; then
  fail "healthcheck passed with no gateway running"
fi
ok "healthcheck fails (exit 1) with no gateway"

# the image's environment: empty filesystem but the binary and the CA file,
# BIND_ADDRESS=0.0.0.0, PORT; a throw-away key and an IMAP host that is never
# dialled (start-up does not log in anywhere)
key=$(env -i "$bin" keygen)
env -i BIND_ADDRESS=0.0.0.0 PORT="$port" IMAP_HOST=imap.invalid ENCRYPTION_KEY="$key" \
  "${as_user[@]}" "$bin" serve >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 50); do
  if env -i BIND_ADDRESS=0.0.0.0 PORT="$port" "${as_user[@]}" "$bin" healthcheck >/dev/null 2>&1; then
    break
  fi
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; fail "serve exited"; }
  sleep 0.1
done
out=$(env -i BIND_ADDRESS=0.0.0.0 PORT="$port" "${as_user[@]}" "$bin" healthcheck) || { cat "$work/serve.log"; fail "healthcheck failed against the running gateway"; }
ok "healthcheck against the running gateway: $out"
if grep -q "$key" "$work/serve.log"; then fail "the key appears in the log"; fi

kill -TERM "$pid"
st=0; wait "$pid" || st=$?
pid=""
[ "$st" = 0 ] || { cat "$work/serve.log"; fail "serve exited with $st after SIGTERM"; }
ok "SIGTERM: clean exit"
echo "PASS: the Dockerfile's build steps work"
