#!/usr/bin/env bash
# Starts the mail stack (scripts/mailstack.sh, on loopback ports) and
# publishes it on the container network with socat:
#   993 -> IMAPS 1993, 587 -> submission 1587 (STARTTLS), 465 -> submissions 1465.
# Copies the stack's self-signed certificate to /certs/mailserver-ca.pem for
# the gateway (MAIL_CA_FILE). Seeds SEED_MESSAGES messages per user once.
set -euo pipefail
D=/var/lib/mailstack
S=/opt/mailserver/mailstack.sh

"$S" stop "$D" >/dev/null 2>&1 || true # a stale stack after an unclean stop
"$S" start "$D"
mkdir -p /certs
cp "$D/etc/cert.pem" /certs/mailserver-ca.pem
chmod 0644 /certs/mailserver-ca.pem

if [ ! -e "$D/.seeded" ] && [ "${SEED_MESSAGES:-0}" -gt 0 ]; then
  for entry in ${MAILSTACK_USERS:-alice@example.test:alicepw bob@example.test:bobpw}; do
    "$S" seed "$D" "${entry%%:*}" "$SEED_MESSAGES"
  done
  touch "$D/.seeded"
fi

pids=()
for map in 993:1993 587:1587 465:1465; do
  socat "TCP-LISTEN:${map%%:*},fork,reuseaddr" "TCP:127.0.0.1:${map#*:}" &
  pids+=($!)
done

stop() {
  kill "${pids[@]}" 2>/dev/null || true
  "$S" stop "$D"
  exit 0
}
trap stop TERM INT
echo "mailserver ready: IMAPS 993, submission 587/465; users: ${MAILSTACK_USERS:-alice@example.test bob@example.test}" | sed 's/:[^ ]*//g'
wait
