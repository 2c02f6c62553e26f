#!/usr/bin/env bash
# encrypt-credentials.sh - make an ENCRYPTION_KEY, or seal mailbox credentials
# into a token for the gateway, without ever putting a password on a command
# line or on disk.
#
#   scripts/encrypt-credentials.sh --generate-key
#       print a new 64-hex-character ENCRYPTION_KEY
#   ENCRYPTION_KEY=... scripts/encrypt-credentials.sh [USER]
#       prompt for USER (if not given) and the password (no echo), print a token
#   printf '%s\n' "$PASSWORD" | ENCRYPTION_KEY=... scripts/encrypt-credentials.sh USER
#       read the password from standard input (for scripts)
#
# Uses the mailbox-mcp binary on PATH if there is one, else `go run` from
# this checkout. The token works only with a gateway using the same key.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if command -v mailbox-mcp >/dev/null 2>&1; then
  run=(mailbox-mcp)
else
  run=(go run "$here/cmd/mailbox-mcp")
fi
case "${1:-}" in
  -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
  --generate-key|keygen) exec "${run[@]}" keygen ;;
esac
if [ -z "${ENCRYPTION_KEY:-}" ]; then
  echo "encrypt-credentials: set ENCRYPTION_KEY (the gateway's key), or run with --generate-key to make one" >&2
  exit 2
fi
if [ $# -ge 1 ]; then
  exec "${run[@]}" token --user "$1"
fi
exec "${run[@]}" token
