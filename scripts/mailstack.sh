#!/usr/bin/env bash
# mailstack.sh - a real mail stack on loopback for integration tests.
#
#   Dovecot 2.3 : IMAP (plain+STARTTLS and implicit TLS), LMTP, SASL auth,
#                 users from a passwd-file, Maildir storage.
#   Postfix 3.7 : SMTP submission (STARTTLS and implicit TLS), AUTH PLAIN/LOGIN
#                 checked against Dovecot, delivery to Dovecot over LMTP;
#                 plus an MX-style port (no AUTH) for "incoming" mail.
#
#   port (+MAILSTACK_PORT_OFFSET)  what
#   1143  IMAP, plain + STARTTLS (LOGIN/AUTHENTICATE allowed before STARTTLS)
#   1993  IMAP, implicit TLS
#   1587  SMTP submission, STARTTLS required before AUTH (Postfix)
#   1465  SMTP submission, implicit TLS (Postfix)
#   1025  SMTP "MX": no AUTH, accepts mail for the local domains (Postfix)
#   1024  LMTP straight into Dovecot
#
# Everything (config, certs, sockets, queue, mail, logs) lives under DIR.
# Nothing is written to /etc; no systemd; runs as root.
#
# Packages (install once; this script installs nothing). The preseed keeps
# Postfix's package from writing /etc/postfix/main.cf:
#   echo 'postfix postfix/main_mailer_type select No configuration' | debconf-set-selections
#   DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
#       dovecot-core dovecot-imapd dovecot-lmtpd postfix
# Optional: dovecot-submissiond (MAILSTACK_DOVECOT_SUBMISSION=1), and for poking
# by hand: curl swaks libnet-ssleay-perl (swaks needs the latter for --tls).
# Also used: python3 (stdlib only, for `seed`), openssl (a dovecot-core dependency).
#
# Usage:
#   mailstack.sh start DIR            start, wait until ready, print ports/PIDs
#   mailstack.sh stop DIR             stop both daemons (by PID) and wait
#   mailstack.sh seed DIR USER N [MAILBOX]
#                                     bulk-load N synthetic messages (Maildir);
#                                     MAILBOX is an IMAP name with "/" as the
#                                     hierarchy separator (default INBOX), given
#                                     in modified UTF-7 as on the wire (e.g.
#                                     'Entw&APw-rfe' for "Entwürfe") or in UTF-8
#                                     (encoded to modified UTF-7 for the disk)
#   mailstack.sh restart-dovecot DIR  stop only Dovecot (drops every IMAP
#                                     connection) and start it again with the
#                                     same config; wait until IMAP answers.
#                                     Postfix keeps running; mail it could not
#                                     hand over meanwhile (deferred) is flushed.
#   mailstack.sh kick DIR USER        doveadm kick USER: drop USER's IMAP
#                                     connections, wait until they are gone
#                                     (a user with no connections is not an
#                                     error)
#   mailstack.sh status DIR           print the env file, say whether running
#
# restart-dovecot, kick and seed read the ports from DIR/mailstack.env, so
# they need no MAILSTACK_PORT_OFFSET.
#
# Environment knobs:
#   MAILSTACK_PORT_OFFSET  added to every port (default 0) - lets several
#                          stacks run side by side (e.g. parallel go test pkgs)
#   MAILSTACK_USERS        "user@dom:password ..." (default alice/bob below)
#   MAILSTACK_USERS_FILE   a file of user@dom:password lines, read instead of
#                          MAILSTACK_USERS when set: a list of thousands of
#                          users is too long for one environment variable
#                          (Linux refuses a string over 128 KiB at exec)
#   MAILSTACK_UID          numeric uid/gid owning the mail (default 5000; it
#                          does not need to exist in /etc/passwd)
#   MAILSTACK_DEBUG=1      verbose auth/mail logging
#   MAILSTACK_DOVECOT_SUBMISSION=1
#                          also run Dovecot's own submission server (2587
#                          STARTTLS, 2465 TLS); it relays into Postfix's MX port
#   MAILSTACK_SEED         RNG seed for `seed` (default 1) - output is repeatable
#   MAILSTACK_LOGIN_PROCESSES=N
#                          imap-login processes (high-performance mode:
#                          service imap-login { process_min_avail }); default
#                          1, so that TLS sessions resume (Dovecot advises one
#                          per CPU core, whose ticket keys differ)
#   MAILSTACK_IMAP_SERVICE_COUNT=N
#                          connections one imap process serves, one after
#                          the other, before it exits (service imap {
#                          service_count }); default 100, Dovecot's
#                          default is 1 (a new process for every login)
#   MAILSTACK_IMAP_PREFORK=N
#                          keep N imap processes started and idle
#                          (service imap { process_min_avail }): with none
#                          idle, Dovecot's master starts one process at a
#                          time for the logins that arrive, so under many
#                          logins a second they wait for each other. Default
#                          0 (Dovecot's default). The Go helper
#                          (internal/mailstack) passes these three through
#                          from its environment, e.g. to mailbox-bench -users.
#   MAILSTACK_METADATA=1   IMAP METADATA (RFC 5464): mail_attribute_dict =
#                          file:%h/dovecot-attributes and imap_metadata = yes;
#                          Dovecot then advertises METADATA (never
#                          METADATA-SERVER). Default off.
#   MAILSTACK_OAUTH2_URL=http://127.0.0.1:PORT/introspect
#                          OAuth logins (SASL OAUTHBEARER and XOAUTH2) for
#                          IMAP and for submission (Postfix asks Dovecot):
#                          Dovecot's oauth2 passdb checks each token with a
#                          POST to this RFC 7662 introspection URL, which must
#                          answer 200 {"active":true,"username":"USER"} for a
#                          good token and 200 {"active":false} for a bad one
#                          (any other answer is an internal error: NO
#                          [UNAVAILABLE]). Password logins keep working.
#                          Default off (empty).
#   MAILSTACK_OAUTH2_USERNAME_ATTRIBUTE=username
#                          the top-level string field of the introspection
#                          answer that must equal the SASL user after %Lu
#                          (Ory Hydra: sub). Nested objects are not seen.
#   MAILSTACK_OAUTH2_SCOPE="mail"
#                          scope(s) an access token must have been granted
#                          (the answer's "scope"), space-separated; default
#                          none required
#
# After `start`, DIR/mailstack.env holds KEY=VALUE lines (ports, PIDs, users,
# CA file) for tests to read. DIR/etc/cert.pem is a self-signed cert for
# localhost / 127.0.0.1 / mail.example.test; trust it as the CA.
set -euo pipefail
umask 022

die() { echo "mailstack: $*" >&2; exit 1; }

OFF=${MAILSTACK_PORT_OFFSET:-0}
IMAP_PORT=$((1143 + OFF))
IMAPS_PORT=$((1993 + OFF))
SUBMISSION_PORT=$((1587 + OFF))
SUBMISSIONS_PORT=$((1465 + OFF))
LMTP_PORT=$((1024 + OFF))
MX_PORT=$((1025 + OFF))
DC_SUBMISSION_PORT=$((2587 + OFF))
DC_SUBMISSIONS_PORT=$((2465 + OFF))
DC_SUBMISSION=${MAILSTACK_DOVECOT_SUBMISSION:-0}
METADATA=${MAILSTACK_METADATA:-0}
IMAP_PREFORK=${MAILSTACK_IMAP_PREFORK:-0}
IMAP_SERVICE_COUNT=${MAILSTACK_IMAP_SERVICE_COUNT:-100}
LOGIN_PROCESSES=${MAILSTACK_LOGIN_PROCESSES:-1}
for v in IMAP_PREFORK IMAP_SERVICE_COUNT LOGIN_PROCESSES; do
  case ${!v} in ''|*[!0-9]*) die "MAILSTACK_$v must be a number, got '${!v}'" ;; esac
done
OAUTH2_URL=${MAILSTACK_OAUTH2_URL:-}
OAUTH2_USER_ATTR=${MAILSTACK_OAUTH2_USERNAME_ATTRIBUTE:-username}
OAUTH2_SCOPE=${MAILSTACK_OAUTH2_SCOPE:-}
MAIL_UID=${MAILSTACK_UID:-5000}
USERS=${MAILSTACK_USERS:-"alice@example.test:alicepw bob@example.test:bobpw"}
USERS_FILE=${MAILSTACK_USERS_FILE:-}
HOSTNAME_FQDN=mail.example.test

absdir() { mkdir -p "$1" && (cd "$1" && pwd -P); }

# A zombie (an exited daemon not yet reaped by init, which can take a while
# in some containers) does not count as alive.
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && [ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" != Z ]; }

# Read the master PIDs of a stack (empty if not running).
dovecot_pid() { [ -s "$1/run/master.pid" ] && cat "$1/run/master.pid" || true; }
postfix_pid() { [ -s "$1/postfix/spool/pid/master.pid" ] && tr -d ' ' <"$1/postfix/spool/pid/master.pid" || true; }

# First line a server sends on 127.0.0.1:PORT ($2 = tls for implicit TLS).
banner() {
  local port=$1 mode=${2:-plain} line=""
  if [ "$mode" = tls ]; then
    # coproc keeps s_client's stdin open, so it does not quit before the banner
    coproc OSSL { exec openssl s_client -quiet -connect "127.0.0.1:$port" 2>/dev/null; }
    read -r -t 3 line <&"${OSSL[0]}" || true
    kill "$OSSL_PID" 2>/dev/null || true; wait "$OSSL_PID" 2>/dev/null || true
  else
    line=$( (exec 3<>"/dev/tcp/127.0.0.1/$port" && read -r -t 3 l <&3 && printf '%s' "$l") 2>/dev/null || true)
  fi
  printf '%s' "$line"
}

# Wait until PORT greets with a line containing PATTERN.
wait_banner() {
  local port=$1 what=$2 pat=$3 mode=${4:-plain} i line=""
  for i in $(seq 1 100); do
    line=$(banner "$port" "$mode")
    case "$line" in *"$pat"*) return 0 ;; esac
    sleep 0.05
  done
  die "$what on port $port did not answer with '$pat' (last: '$line'); see $D/log"
}

# Run a daemon launcher with stdio on a log file and every other inherited fd
# closed, so a caller reading our stdout through a pipe (Go's exec Output())
# gets EOF when this script exits instead of waiting for the daemons.
detached() {
  local log=$1; shift
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-" 2>/dev/null || true
    done
    exec "$@" </dev/null >>"$log" 2>&1
  )
}

cmd_start() {
  [ $# -eq 1 ] || die "usage: $0 start DIR"
  [ "$(id -u)" = 0 ] || die "must run as root"
  for b in dovecot postfix openssl; do
    command -v "$b" >/dev/null || die "$b not installed; run: apt-get install -y --no-install-recommends dovecot-core dovecot-imapd dovecot-lmtpd postfix"
  done
  [ -x /usr/lib/dovecot/lmtp ] || die "dovecot-lmtpd not installed"
  [ -x /usr/lib/dovecot/imap ] || die "dovecot-imapd not installed"
  [ "$DC_SUBMISSION" != 1 ] || [ -x /usr/lib/dovecot/submission ] || die "dovecot-submissiond not installed"
  getent passwd dovecot >/dev/null && getent passwd dovenull >/dev/null && getent passwd postfix >/dev/null \
    || die "system users dovecot/dovenull/postfix missing (they are created by the packages)"

  case "$1" in *[[:space:]]*) die "DIR must not contain whitespace: $1" ;; esac
  D=$(absdir "$1")
  # Unix sockets live in $D/run; sun_path is limited to 108 bytes.
  [ ${#D} -le 70 ] || die "DIR path too long for unix sockets (${#D} > 70 chars): $D"
  if alive "$(dovecot_pid "$D")" || alive "$(postfix_pid "$D")"; then
    die "a stack is already running in $D (use: $0 stop $D)"
  fi

  # The unprivileged daemons (dovecot auth, mail uid, postfix) must reach DIR.
  chmod 0755 "$D"
  local p=$D
  while p=$(dirname "$p"); [ "$p" != / ]; do
    if [ -z "$(find "$p" -maxdepth 0 -perm -o=x)" ]; then
      echo "mailstack: chmod o+x $p (daemons running as dovecot/postfix/uid $MAIL_UID must traverse it)" >&2
      chmod o+x "$p"
    fi
  done

  mkdir -p "$D"/{etc/postfix,run,state,log,mail,postfix/data,postfix/spool}
  chown postfix:postfix "$D/postfix/data"
  rm -f "$D"/log/*.log

  # --- TLS: one self-signed ECDSA cert, also the CA for clients -------------
  if [ ! -s "$D/etc/cert.pem" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -days 3650 -subj "/CN=localhost" \
      -addext "subjectAltName=DNS:localhost,DNS:$HOSTNAME_FQDN,IP:127.0.0.1" \
      -keyout "$D/etc/key.pem" -out "$D/etc/cert.pem" 2>/dev/null
    chmod 0600 "$D/etc/key.pem"; chmod 0644 "$D/etc/cert.pem"
  fi

  # --- users ------------------------------------------------------------------
  # passwd-file: user:{scheme}password:uid:gid::home  (uid/gid/home from defaults)
  # One awk pass and one mkdir, not a process per user: 10,000 users take
  # well under a second.
  if [ -n "$USERS_FILE" ]; then
    [ -r "$USERS_FILE" ] || die "MAILSTACK_USERS_FILE: cannot read $USERS_FILE"
  fi
  local domains
  { if [ -n "$USERS_FILE" ]; then cat "$USERS_FILE"; else tr -s ' \t' '\n\n' <<<"$USERS"; fi; } \
    | awk -v D="$D" '
      /^[[:space:]]*$/ { next }
      {
        c = index($0, ":"); user = substr($0, 1, c - 1); pw = substr($0, c + 1); at = index(user, "@")
        if (c == 0 || at < 2 || at == length(user) || pw == "" || $0 ~ /[[:space:]]/) {
          print "mailstack: bad MAILSTACK_USERS entry: " $0 > "/dev/stderr"; bad = 1; exit 1
        }
        dom = substr(user, at + 1)
        printf "%s:{PLAIN}%s::::::\n", user, pw > (D "/etc/passwd")
        printf "%s OK\n", user > (D "/etc/postfix/vmailbox")
        printf "%s/mail/%s/%s\n", D, dom, substr(user, 1, at - 1) > (D "/etc/maildirs")
        if (!(dom in seen)) { seen[dom] = 1; printf "%s%s", sep, dom > (D "/etc/domains"); sep = " " }
        n++
      }
      END { if (!bad && n == 0) { print "mailstack: no users" > "/dev/stderr"; exit 1 } }' \
    || exit 1
  xargs -d '\n' mkdir -p <"$D/etc/maildirs"
  domains=$(cat "$D/etc/domains"); rm -f "$D/etc/maildirs" "$D/etc/domains"
  local maindom=${domains%% *}
  chown root:dovecot "$D/etc/passwd"; chmod 0640 "$D/etc/passwd"
  if [ -n "$OAUTH2_URL" ]; then
    case "$OAUTH2_URL" in http://*|https://*) ;; *) die "MAILSTACK_OAUTH2_URL must be an http(s) URL" ;; esac
    case "$OAUTH2_USER_ATTR" in ""|*[!A-Za-z0-9_.-]*) die "MAILSTACK_OAUTH2_USERNAME_ATTRIBUTE must be a field name" ;; esac
    case "$OAUTH2_SCOPE" in *[!A-Za-z0-9_.:/\ -]*) die "MAILSTACK_OAUTH2_SCOPE: unexpected character in '$OAUTH2_SCOPE'" ;; esac
    # read by the auth process (user dovecot); it holds no secret
    cat >"$D/etc/dovecot-oauth2.conf.ext" <<EOF
introspection_mode = post
introspection_url = $OAUTH2_URL
username_attribute = $OAUTH2_USER_ATTR
active_attribute = active
active_value = true
timeout_msecs = 2000
$([ -n "$OAUTH2_SCOPE" ] && echo "scope = $OAUTH2_SCOPE")
EOF
    chmod 0644 "$D/etc/dovecot-oauth2.conf.ext"
  fi
  chown -R "$MAIL_UID:$MAIL_UID" "$D/mail"; chmod 0755 "$D/mail"

  local debug_dc="" ; [ "${MAILSTACK_DEBUG:-}" = 1 ] && debug_dc="auth_verbose = yes
auth_debug = yes
mail_debug = yes
verbose_ssl = yes"

  # --- Dovecot ----------------------------------------------------------------
  cat >"$D/etc/dovecot.conf" <<EOF
# generated by mailstack.sh - Dovecot $(dovecot --version | cut -d' ' -f1)
protocols = imap lmtp$([ "$DC_SUBMISSION" = 1 ] && echo " submission")
listen = 127.0.0.1
base_dir = $D/run
state_dir = $D/state
instance_name = mailstack-$OFF
log_path = $D/log/dovecot.log
hostname = $HOSTNAME_FQDN
postmaster_address = postmaster@$maindom
default_internal_user = dovecot
default_internal_group = dovecot
default_login_user = dovenull
# generous limits so benchmarks measure the client, not the defaults
default_process_limit = 500
default_client_limit = 5000
mail_max_userip_connections = 500
$debug_dc

ssl = yes
ssl_cert = <$D/etc/cert.pem
ssl_key = <$D/etc/key.pem
ssl_min_protocol = TLSv1.2
# loopback counts as secure for Dovecot anyway; this also allows LOGIN
# in clear on 1143 from any address it might be reached at.
disable_plaintext_auth = no
auth_mechanisms = plain login$([ -n "$OAUTH2_URL" ] && echo " oauthbearer xoauth2")
auth_username_format = %Lu
# tests: answer failed logins at once and do not slow down later logins from
# 127.0.0.1 after failures (the per-IP auth penalty is off when auth cannot
# reach anvil's anvil-auth-penalty socket)
auth_failure_delay = 0

passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u $D/etc/passwd
$([ -n "$OAUTH2_URL" ] && echo "  # passwords only: tokens go to the oauth2 passdb below
  mechanisms = plain login")
}
$(if [ -n "$OAUTH2_URL" ]; then cat <<EOS
# OAuth logins: each token is checked at the introspection URL
passdb {
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = $D/etc/dovecot-oauth2.conf.ext
}
EOS
fi)
userdb {
  driver = passwd-file
  args = username_format=%u $D/etc/passwd
  default_fields = uid=$MAIL_UID gid=$MAIL_UID home=$D/mail/%d/%n
}
mail_location = maildir:~/Maildir
first_valid_uid = $MAIL_UID
last_valid_uid = $MAIL_UID
namespace inbox {
  inbox = yes
  separator = /
  mailbox Sent {
    special_use = \\Sent
    auto = subscribe
  }
  mailbox Drafts {
    special_use = \\Drafts
    auto = subscribe
  }
  mailbox Trash {
    special_use = \\Trash
    auto = subscribe
  }
  mailbox Junk {
    special_use = \\Junk
    auto = subscribe
  }
}

service imap-login {
  inet_listener imap {
    port = $IMAP_PORT
  }
  inet_listener imaps {
    port = $IMAPS_PORT
    ssl = yes
  }
  # high-performance mode: long-lived login processes, each doing the TLS
  # of the connections it accepted for as long as they last. Dovecot
  # advises one per CPU core; but OpenSSL's session-ticket keys are per
  # process, so a client's TLS resumption then works only when it reaches
  # the process that issued its ticket (internal/transport's
  # TestDovecotAndPostfixResume needs one). Under mailbox-bench -users one
  # and two did equally well (MAILSTACK_LOGIN_PROCESSES; docs/scaling.md).
  service_count = 0
  process_min_avail = $LOGIN_PROCESSES
  # Dovecot's advice for this mode too: a long-lived process holding many
  # TLS connections can outgrow the default 256M of address space
  vsz_limit = 1G
}
# One imap process per connection: a gateway pool of 1,024 connections plus
# the processes of connections being closed would pass Dovecot's default
# of 1024 (mailbox-bench -users measures such a pool).
service imap {
  process_limit = 2048
  # Still one connection at a time per process (client_limit 1), but a
  # process serves up to 100 connections one after the other instead of
  # exiting after one: no fork, exec and settings lookup per login
  # (Dovecot's advice for CPU, "Dovecot Optimizations"; Dovecot's default
  # is 1, MAILSTACK_IMAP_SERVICE_COUNT). All users here share one mail uid,
  # as with most virtual users.
  service_count = $IMAP_SERVICE_COUNT
$([ "$IMAP_PREFORK" -gt 0 ] && echo "  # preforked imap processes (MAILSTACK_IMAP_PREFORK): with none idle,
  # Dovecot's master starts one at a time for the logins that arrive
  # (fork, exec, settings from config), so logins queue behind each other
  process_min_avail = $IMAP_PREFORK")
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = $LMTP_PORT
  }
}
$(if [ "$DC_SUBMISSION" = 1 ]; then cat <<EOS
service submission-login {
  inet_listener submission {
    port = $DC_SUBMISSION_PORT
  }
  inet_listener submissions {
    port = $DC_SUBMISSIONS_PORT
    ssl = yes
  }
}
# Dovecot's LMTP refuses EHLO, so submission must relay through an MTA:
submission_relay_host = 127.0.0.1
submission_relay_port = $MX_PORT
submission_relay_trusted = yes
EOS
fi)
$(if [ "$METADATA" = 1 ]; then cat <<'EOS'
# IMAP METADATA (RFC 5464): entries are kept in one file per user, which
# the file dict rewrites whole on every change
mail_attribute_dict = file:%h/dovecot-attributes
protocol imap {
  imap_metadata = yes
}
EOS
fi)
service anvil {
  unix_listener anvil-auth-penalty {
    mode = 0
  }
}
service auth {
  # Postfix asks Dovecot to check AUTH PLAIN/LOGIN passwords here
  unix_listener auth-postfix {
    mode = 0660
    user = postfix
    group = postfix
  }
}
EOF

  # --- Postfix ----------------------------------------------------------------
  cat >"$D/etc/postfix/main.cf" <<EOF
# generated by mailstack.sh - Postfix $(postconf -d -h mail_version 2>/dev/null)
compatibility_level = 3.6
queue_directory = $D/postfix/spool
data_directory = $D/postfix/data
mail_owner = postfix
myhostname = $HOSTNAME_FQDN
mydomain = $maindom
myorigin = \$mydomain
mydestination =
inet_interfaces = loopback-only
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
maillog_file = $D/log/postfix.log
maillog_file_prefixes = $D/log
biff = no
alias_maps =
alias_database =
local_transport = error:local delivery is disabled
# mailboxes: known users are delivered to Dovecot over LMTP; unknown
# recipients in these domains are refused at RCPT time (550 5.1.1)
virtual_mailbox_domains = $domains
virtual_mailbox_maps = texthash:$D/etc/postfix/vmailbox
virtual_transport = lmtp:inet:127.0.0.1:$LMTP_PORT
# nothing ever leaves the machine: mail to other domains is accepted and dropped
default_transport = discard:outbound mail disabled by mailstack
relay_transport = discard:outbound mail disabled by mailstack
smtp_dns_support_level = disabled
# TLS + SASL (Dovecot)
smtpd_tls_cert_file = $D/etc/cert.pem
smtpd_tls_key_file = $D/etc/key.pem
smtpd_tls_security_level = may
smtpd_tls_mandatory_protocols = >=TLSv1.2
smtpd_sasl_type = dovecot
smtpd_sasl_path = $D/run/auth-postfix
smtpd_sasl_auth_enable = no
smtpd_relay_restrictions = permit_mynetworks, permit_sasl_authenticated, reject_unauth_destination
# Dovecot 2.3's LMTP does not offer SMTPUTF8: if Postfix advertised it, a
# client that sends MAIL FROM ... SMTPUTF8 (Go's net/smtp does whenever it is
# advertised) with raw UTF-8 headers would get 250 and then a silent bounce.
smtputf8_enable = no
# no DNS at all: do not reverse-resolve clients
smtpd_peername_lookup = no
# benchmarks: do not slow senders down when the queue fills, allow more smtpd
in_flow_delay = 0
default_process_limit = 200
EOF
  [ "${MAILSTACK_DEBUG:-}" = 1 ] && echo "debug_peer_list = 127.0.0.1" >>"$D/etc/postfix/main.cf"

  cat >"$D/etc/postfix/master.cf" <<EOF
# service type  private unpriv  chroot  wakeup  maxproc command + args
127.0.0.1:$SUBMISSION_PORT inet n - n - - smtpd
  -o syslog_name=postfix/submission
  -o smtpd_tls_security_level=encrypt
  -o smtpd_sasl_auth_enable=yes
  -o smtpd_tls_auth_only=yes
  -o smtpd_client_restrictions=permit_sasl_authenticated,reject
  -o smtpd_relay_restrictions=permit_sasl_authenticated,reject
  -o smtpd_recipient_restrictions=permit_sasl_authenticated,reject
127.0.0.1:$SUBMISSIONS_PORT inet n - n - - smtpd
  -o syslog_name=postfix/submissions
  -o smtpd_tls_wrappermode=yes
  -o smtpd_sasl_auth_enable=yes
  -o smtpd_client_restrictions=permit_sasl_authenticated,reject
  -o smtpd_relay_restrictions=permit_sasl_authenticated,reject
  -o smtpd_recipient_restrictions=permit_sasl_authenticated,reject
127.0.0.1:$MX_PORT inet n - n - - smtpd
  -o syslog_name=postfix/mx
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
EOF
  chmod 0644 "$D"/etc/postfix/*
  # Postfix re-reads (sleeping 300 ms each time, ~2 s in all) any main.cf or
  # table file modified in the last ~2 s; backdate ours.
  touch -d '-1 min' "$D"/etc/postfix/*

  # --- start ------------------------------------------------------------------
  # if anything below fails, do not leave half a stack running
  trap '[ -n "${READY:-}" ] || { echo "mailstack: start failed, stopping what was started" >&2; cmd_stop "$D" >&2 || true; }' EXIT
  detached "$D/log/dovecot-start.log" dovecot -c "$D/etc/dovecot.conf" \
    || { cat "$D/log/dovecot-start.log" >&2; die "dovecot failed to start; see $D/log/dovecot.log"; }
  detached "$D/log/postfix-start.log" postfix -c "$D/etc/postfix" start \
    || { cat "$D/log/postfix-start.log" >&2; die "postfix failed to start; see $D/log/postfix.log"; }

  wait_banner "$IMAP_PORT" "Dovecot IMAP" "* OK"
  wait_banner "$IMAPS_PORT" "Dovecot IMAPS" "* OK" tls
  wait_banner "$SUBMISSION_PORT" "Postfix submission" "220 "
  wait_banner "$SUBMISSIONS_PORT" "Postfix submissions" "220 " tls
  wait_banner "$MX_PORT" "Postfix mx" "220 "
  if [ "$DC_SUBMISSION" = 1 ]; then
    wait_banner "$DC_SUBMISSION_PORT" "Dovecot submission" "220 "
    wait_banner "$DC_SUBMISSIONS_PORT" "Dovecot submissions" "220 " tls
  fi
  [ -S "$D/run/auth-postfix" ] || die "dovecot auth socket for postfix missing"
  READY=1

  local dpid ppid
  dpid=$(dovecot_pid "$D"); ppid=$(postfix_pid "$D")
  {
    echo "MAILSTACK_DIR=$D"
    echo "MAILSTACK_HOST=127.0.0.1"
    echo "MAILSTACK_IMAP_PORT=$IMAP_PORT"
    echo "MAILSTACK_IMAPS_PORT=$IMAPS_PORT"
    echo "MAILSTACK_SUBMISSION_PORT=$SUBMISSION_PORT"
    echo "MAILSTACK_SUBMISSIONS_PORT=$SUBMISSIONS_PORT"
    echo "MAILSTACK_LMTP_PORT=$LMTP_PORT"
    echo "MAILSTACK_MX_PORT=$MX_PORT"
    if [ "$DC_SUBMISSION" = 1 ]; then
      echo "MAILSTACK_DOVECOT_SUBMISSION_PORT=$DC_SUBMISSION_PORT"
      echo "MAILSTACK_DOVECOT_SUBMISSIONS_PORT=$DC_SUBMISSIONS_PORT"
    fi
    echo "MAILSTACK_CA_FILE=$D/etc/cert.pem"
    if [ -n "$USERS_FILE" ]; then echo "MAILSTACK_USERS_FILE=$USERS_FILE"; else echo "MAILSTACK_USERS=\"$USERS\""; fi
    echo "MAILSTACK_DOVECOT_PID=$dpid"
    echo "MAILSTACK_POSTFIX_PID=$ppid"
    echo "MAILSTACK_DOVECOT_CONF=$D/etc/dovecot.conf"
    echo "MAILSTACK_UID=$MAIL_UID"
  } >"$D/mailstack.env"
  cat "$D/mailstack.env"
}

# PIDs of all processes in the session led by a master (both masters call
# setsid(), so their children share the master's PID as session id).
# Zombies are left out: they hold no ports or files any more.
session_pids() { [ -n "${1:-}" ] && ps -e -o pid=,sid=,stat= | awk -v s="$1" '$2 == s && $3 !~ /^Z/ { print $1 }' || true; }

# SIGTERM the given masters ("postfix stop" / "doveadm stop"), then wait until
# every process of their sessions is gone. A master exits within about a
# second, but children still serving clients outlive it: with an IMAPS client
# connected, imap-login (the TLS proxy), imap, auth, log... stay; auth also
# stays for Postfix's idle smtpd processes, connected to auth-postfix since
# the readiness check, for up to 100 s; a new Dovecot would then find its old
# sockets in use. So what is left once the masters are gone gets SIGTERM,
# and SIGKILL 5 s later.
stop_masters() {
  local m left i
  for m in "$@"; do kill -TERM "$m" 2>/dev/null || true; done
  for i in $(seq 1 200); do
    left=""; for m in "$@"; do alive "$m" && left="$left $m"; done
    [ -z "$left" ] && break
    sleep 0.05
  done
  left=""; for m in "$@"; do left="$left $(session_pids "$m")"; done
  if [ -n "${left//[[:space:]]/}" ]; then kill -TERM $left 2>/dev/null || true; fi
  for i in $(seq 1 100); do
    left=""; for m in "$@"; do left="$left $(session_pids "$m")"; done
    [ -z "${left//[[:space:]]/}" ] && return 0
    sleep 0.05
  done
  echo "mailstack: still running, sending SIGKILL to:" $left >&2
  kill -KILL $left 2>/dev/null || true
  sleep 0.1
}

# Stop only Dovecot's master and all its processes (no-op if not running).
stop_dovecot() {
  local dpid; dpid=$(dovecot_pid "$1")
  if alive "$dpid"; then stop_masters "$dpid"; fi
}

cmd_stop() {
  [ $# -eq 1 ] || die "usage: $0 stop DIR"
  [ -d "$1" ] || die "no such directory: $1"
  D=$(cd "$1" && pwd -P)
  local ppid dpid
  ppid=$(postfix_pid "$D"); dpid=$(dovecot_pid "$D")
  alive "$ppid" || ppid=""; alive "$dpid" || dpid=""
  # both at once
  stop_masters $ppid $dpid
  echo "stopped (postfix ${ppid:-not running}, dovecot ${dpid:-not running})"
}

cmd_restart_dovecot() {
  [ $# -eq 1 ] || die "usage: $0 restart-dovecot DIR"
  [ "$(id -u)" = 0 ] || die "must run as root"
  [ -d "$1" ] || die "no such directory: $1"
  D=$(cd "$1" && pwd -P)
  [ -s "$D/mailstack.env" ] && [ -s "$D/etc/dovecot.conf" ] || die "no stack in $D (run start first)"
  # the ports of this stack, whatever MAILSTACK_PORT_OFFSET says now
  local imap imaps dcsub dcsubs dpid
  imap=$(envval "$D" MAILSTACK_IMAP_PORT); imaps=$(envval "$D" MAILSTACK_IMAPS_PORT)
  dcsub=$(envval "$D" MAILSTACK_DOVECOT_SUBMISSION_PORT); dcsubs=$(envval "$D" MAILSTACK_DOVECOT_SUBMISSIONS_PORT)
  [ -n "$imap" ] && [ -n "$imaps" ] || die "no IMAP ports in $D/mailstack.env"

  stop_dovecot "$D"
  # same stdio handling as start: the daemon must not hold the caller's pipes
  detached "$D/log/dovecot-start.log" dovecot -c "$D/etc/dovecot.conf" \
    || { cat "$D/log/dovecot-start.log" >&2; die "dovecot failed to start; see $D/log/dovecot.log"; }
  wait_banner "$imap" "Dovecot IMAP" "* OK"
  wait_banner "$imaps" "Dovecot IMAPS" "* OK" tls
  if [ -n "$dcsub" ]; then
    wait_banner "$dcsub" "Dovecot submission" "220 "
    wait_banner "$dcsubs" "Dovecot submissions" "220 " tls
  fi
  [ -S "$D/run/auth-postfix" ] || die "dovecot auth socket for postfix missing"
  dpid=$(dovecot_pid "$D")
  sed -i "s/^MAILSTACK_DOVECOT_PID=.*/MAILSTACK_DOVECOT_PID=$dpid/" "$D/mailstack.env"
  # deliveries that failed while LMTP was down wait for Postfix's backoff
  # (minutes); retry them now
  if alive "$(postfix_pid "$D")"; then postqueue -c "$D/etc/postfix" -f >/dev/null 2>&1 || true; fi
  echo "dovecot restarted (pid $dpid)"
}

cmd_kick() {
  [ $# -eq 2 ] || die "usage: $0 kick DIR USER"
  [ -d "$1" ] || die "no such directory: $1"
  D=$(cd "$1" && pwd -P); local user=$2 out rc=0 i
  [ -s "$D/etc/dovecot.conf" ] || die "no stack in $D (run start first)"
  out=$(doveadm -c "$D/etc/dovecot.conf" kick "$user" 2>&1) || rc=$?
  printf '%s\n' "$out"
  if [ "$rc" != 0 ]; then
    # 68 + "no users kicked": the user had no connections - nothing to do
    case "$rc:$out" in 68:*"no users kicked"*) return 0 ;; esac
    die "doveadm kick $user failed (exit $rc)"
  fi
  # doveadm only signals the processes: wait until anvil no longer lists them
  for i in $(seq 1 100); do
    doveadm -c "$D/etc/dovecot.conf" who -1 "$user" 2>/dev/null \
      | awk -v u="$user" '$1 == u { f = 1 } END { exit f }' && return 0
    sleep 0.05
  done
  die "connections of $user still listed 5s after doveadm kick"
}

cmd_status() {
  [ $# -eq 1 ] || die "usage: $0 status DIR"
  D=$(cd "$1" && pwd -P)
  [ -s "$D/mailstack.env" ] && cat "$D/mailstack.env"
  local dpid ppid; dpid=$(dovecot_pid "$D"); ppid=$(postfix_pid "$D")
  if alive "$dpid" && alive "$ppid"; then echo "running"; else echo "not running (dovecot ${dpid:-?}, postfix ${ppid:-?})"; return 1; fi
}

# Value of KEY in DIR/mailstack.env (empty if absent).
envval() { sed -n "s/^$2=//p" "$1/mailstack.env" 2>/dev/null | tr -d '"' || true; }

# Print two lines for an IMAP mailbox name: its modified UTF-7 form (RFC 3501
# 5.1.3, as Dovecot stores Maildir++ folder names on disk) and its UTF-8 form
# (what doveadm takes). An all-ASCII name is taken to be modified UTF-7
# already ("Entw&APw-rfe"; a literal "&" is "&-"); a name with non-ASCII
# characters is taken to be UTF-8 ("Entwürfe").
mailbox_names() {
  PYTHONUTF8=1 PYTHONIOENCODING=utf-8 python3 - "$1" <<'PYEOF'
import base64, sys
name = sys.argv[1]

def decode(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "&":
            j = s.find("-", i + 1)
            if j < 0:
                raise ValueError("unterminated '&' (write a literal & as &-)")
            if j == i + 1:
                out.append("&")
            else:
                b = s[i + 1:j].replace(",", "/")
                out.append(base64.b64decode(b + "=" * (-len(b) % 4), validate=True).decode("utf-16-be"))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)

def encode(s):
    out, buf = [], ""
    def flush():
        if buf:
            b = base64.b64encode(buf.encode("utf-16-be")).decode().rstrip("=").replace("/", ",")
            out.append("&" + b + "-")
    for c in s:
        if 0x20 <= ord(c) <= 0x7E:
            flush()
            buf = ""
            out.append("&-" if c == "&" else c)
        else:
            buf += c
    flush()
    return "".join(out)

try:
    utf8 = decode(name) if name.isascii() else name
except Exception as e:
    sys.exit("mailstack: %r is not valid modified UTF-7: %s" % (name, e))
if any(ord(c) < 0x20 or ord(c) == 0x7F for c in utf8):
    sys.exit("mailstack: control characters in mailbox name %r" % name)
if "." in utf8:
    sys.exit("mailstack: '.' is not allowed in a mailbox name with Maildir++ (the separator is '/')")
if utf8.startswith("/") or utf8.endswith("/") or "//" in utf8:
    sys.exit("mailstack: empty hierarchy level in mailbox name %r" % name)
print(encode(utf8))
print(utf8)
PYEOF
}

cmd_seed() {
  [ $# -ge 3 ] && [ $# -le 4 ] || die "usage: $0 seed DIR USER N [MAILBOX]"
  D=$(cd "$1" && pwd -P); local user=$2 n=$3 mbox=${4:-INBOX}
  [[ "$n" =~ ^[0-9]+$ ]] || die "N must be a number"
  [ -s "$D/etc/passwd" ] && awk -F: -v u="$user" '$1 == u { f = 1 } END { exit !f }' "$D/etc/passwd" \
    || die "unknown user $user (run start first)"
  local uid; uid=$(envval "$D" MAILSTACK_UID); MAIL_UID=${uid:-$MAIL_UID}
  local md="$D/mail/${user#*@}/${user%@*}/Maildir" kind=inbox
  if [ "${mbox^^}" = INBOX ]; then
    mbox=INBOX
  else
    # On disk (Maildir++): ".<name in modified UTF-7, '/' replaced by '.'>";
    # doveadm wants the name in UTF-8.
    local names disk
    names=$(mailbox_names "$mbox") || die "bad mailbox name: $mbox"
    disk=${names%%$'\n'*}; mbox=${names#*$'\n'}
    md="$md/.${disk//\//.}"; kind=sub
  fi
  python3 - "$md" "$n" "$MAIL_UID" "${MAILSTACK_SEED:-1}" "$kind" "$user" <<'PYEOF'
import os, sys, random, time, base64, socket, urllib.parse
md, n, uid, seed, kind, rcpt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
rnd = random.Random(seed)
for sub in ("cur", "new", "tmp"):
    os.makedirs(os.path.join(md, sub), exist_ok=True)
if kind == "sub":
    open(os.path.join(md, "maildirfolder"), "a").close()
host = socket.gethostname().replace("/", "_").replace(":", "_")

FIRST = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan",
         "Judy", "Mallory", "Niaj", "Olivia", "Peggy", "Rupert", "Sybil", "Trent", "Victor", "Walter"]
LAST = ["Smith", "Jones", "Miller", "Garcia", "Kowalski", "Nguyen", "Okafor", "Schmidt", "Rossi", "Tanaka"]
DOMS = ["example.test", "example.org", "lists.example.net", "corp.example.com", "mail.example.de"]
WORDS = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore "
         "et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi aliquip "
         "ex ea commodo consequat duis aute irure in reprehenderit voluptate velit esse cillum eu fugiat nulla "
         "pariatur excepteur sint occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim "
         "id est laborum report meeting invoice release build deploy review budget schedule").split()
TOPICS = ["Quarterly report", "Meeting notes", "Invoice", "Re: build failure", "Lunch?", "Release plan",
          "Fwd: contract draft", "Weekly status", "[list] digest", "Password reset", "Travel booking",
          "Re: Re: question about the API", "Photos from the trip", "Your order has shipped"]
# (charset, transfer-encoding, subject text, body text) - non-UTF-8 samples
CHARSETS = [
    ("iso-8859-1", "quoted-printable", "Grüße aus Köln - Übersicht", "Sehr geehrte Damen und Herren, schöne Grüße aus Köln. Straße, Äpfel, Öl."),
    ("windows-1252", "quoted-printable", "Café “special” offer €5", "Déjà vu: naïve café, 5 € only — “quoted”."),
    ("koi8-r", "base64", "Привет из Москвы", "Здравствуйте! Это тестовое письмо в кодировке KOI8-R."),
    ("iso-2022-jp", "7bit", "会議の議事録", "こんにちは。これはテストメールです。"),
    ("shift_jis", "base64", "請求書のお知らせ", "いつもお世話になっております。請求書を添付します。"),
    ("gb2312", "base64", "季度报告", "您好，这是一封测试邮件。"),
    ("iso-8859-2", "quoted-printable", "Zażółć gęślą jaźń", "Dzień dobry, pozdrowienia z Łodzi."),
]
UTF8_SUBJECTS = ["Ünïcödé ✓ subject", "日本語の件名", "Emoji 🎉 party", "Ελληνικά θέμα"]

def enc_word(s, cs):
    return "=?%s?B?%s?=" % (cs, base64.b64encode(s.encode(cs)).decode())

def qp(b):
    out, line = [], ""
    for ch in b:
        c = bytes([ch])
        t = c.decode() if (33 <= ch <= 126 and ch != 61) or ch == 32 else "=%02X" % ch
        if ch == 10:
            out.append(line); line = ""; continue
        if len(line) + len(t) > 75:
            out.append(line + "="); line = ""
        line += t
    out.append(line)
    return "\n".join(out)

def b64lines(b):
    s = base64.b64encode(b).decode()
    return "\n".join(s[i:i + 76] for i in range(0, len(s), 76))

def text(nwords):
    ws = [rnd.choice(WORDS) for _ in range(nwords)]
    lines, cur = [], []
    for w in ws:
        cur.append(w)
        if len(cur) >= 12:
            lines.append(" ".join(cur)); cur = []
            if rnd.random() < 0.15: lines.append("")
    if cur: lines.append(" ".join(cur))
    return "\n".join(lines)

def person():
    f, l, d = rnd.choice(FIRST), rnd.choice(LAST), rnd.choice(DOMS)
    return f, l, "%s.%s@%s" % (f.lower(), l.lower(), d)

now = int(time.time())
start = now - 2 * 365 * 86400
step = max(1, (now - start) // max(n, 1))
pid = os.getpid()
stats = {"multipart": 0, "charset": 0, "alt": 0}
t0 = time.time()
total = 0
for i in range(n):
    ts = start + i * step + rnd.randrange(step)
    f, l, addr = person()
    frm = '"%s %s" <%s>' % (f, l, addr)
    if rnd.random() < 0.03:
        frm = "%s <%s>" % (enc_word(f + " Müller", "utf-8"), addr)
    r = rnd.random()
    subj = "%s #%d" % (rnd.choice(TOPICS), i + 1)
    hdr = [
        "Return-Path: <%s>" % addr,
        "From: %s" % frm,
        "To: <%s>" % rcpt,
        "Date: %s" % time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(ts)),
        "Message-ID: <seed.%d.%d.%d@mailstack.example.test>" % (seed, i, ts),
    ]
    if rnd.random() < 0.2:
        hdr.append("In-Reply-To: <seed.%d.%d.%d@mailstack.example.test>" % (seed, max(0, i - rnd.randrange(1, 50)), ts - 3600))
    if rnd.random() < 0.1:
        hdr.append("Cc: %s, %s" % (person()[2], person()[2]))
    hdr.append("MIME-Version: 1.0")
    # body size: mostly small, long tail
    nwords = int(min(rnd.lognormvariate(4.5, 1.0), 20000))
    if r < 0.03:   # multipart/mixed with a binary attachment
        stats["multipart"] += 1
        b = "b%d.%d" % (seed, i)
        x = rnd.random()   # mostly small attachments, a long tail up to 3 MB
        att_size = (rnd.randrange(2000, 20000) if x < 0.6 else rnd.randrange(20000, 200000) if x < 0.9
                    else rnd.randrange(200000, 1000000) if x < 0.99 else 3000000)
        att = rnd.randbytes(att_size)
        name, ctype = rnd.choice([("report.pdf", "application/pdf"), ("photo.png", "image/png"),
                                  ("data.bin", "application/octet-stream"), ("Grüße.txt", "text/plain")])
        fname = name if name.isascii() else "UTF-8''" + urllib.parse.quote(name)
        disp = 'attachment; filename="%s"' % name if name.isascii() else "attachment; filename*=%s" % fname
        hdr.append("Subject: %s" % subj)
        hdr.append('Content-Type: multipart/mixed; boundary="%s"' % b)
        body = ("This is a multi-part message in MIME format.\n\n--%s\nContent-Type: text/plain; charset=utf-8\n"
                "Content-Transfer-Encoding: 8bit\n\nSee attached, grüße.\n%s\n\n--%s\nContent-Type: %s; name=\"%s\"\n"
                "Content-Disposition: %s\nContent-Transfer-Encoding: base64\n\n%s\n--%s--\n") % (
                    b, text(nwords), b, ctype, name if name.isascii() else enc_word(name, "utf-8"), disp, b64lines(att), b)
    elif r < 0.06:  # non-UTF-8 charset, encoded subject and body
        stats["charset"] += 1
        cs, cte, s_txt, b_txt = rnd.choice(CHARSETS)
        hdr.append("Subject: %s %d" % (enc_word(s_txt, cs), i + 1))
        hdr.append("Content-Type: text/plain; charset=%s" % cs)
        hdr.append("Content-Transfer-Encoding: %s" % cte)
        raw = (b_txt + "\n" + text(nwords // 4) + "\n").encode(cs)
        if cte == "quoted-printable": body = qp(raw) + "\n"
        elif cte == "base64": body = b64lines(raw) + "\n"
        else: body = raw.decode("ascii") + "\n"
    elif r < 0.09:  # multipart/alternative text + html
        stats["alt"] += 1
        b = "a%d.%d" % (seed, i)
        t = text(nwords)
        hdr.append("Subject: %s" % (enc_word(rnd.choice(UTF8_SUBJECTS), "utf-8") if rnd.random() < 0.5 else subj))
        hdr.append('Content-Type: multipart/alternative; boundary="%s"' % b)
        body = ("--%s\nContent-Type: text/plain; charset=us-ascii\n\n%s\n--%s\nContent-Type: text/html; charset=utf-8\n\n"
                "<html><body><p>%s</p></body></html>\n--%s--\n") % (b, t, b, t.replace("\n\n", "</p><p>"), b)
    else:
        hdr.append("Subject: %s" % subj)
        hdr.append("Content-Type: text/plain; charset=us-ascii")
        body = text(nwords) + "\n"
    msg = ("\n".join(hdr) + "\n\n" + body).encode("utf-8")
    size = len(msg)
    vsize = size + msg.count(b"\n")
    flags = ""
    if rnd.random() < 0.1: flags += "F"
    if rnd.random() < 0.2: flags += "R"
    if rnd.random() < 0.7: flags += "S"
    fn = "%d.M%dP%dQ%d.%s,S=%d,W=%d:2,%s" % (ts, i % 1000000, pid, i, host, size, vsize, flags)
    path = os.path.join(md, "cur", fn)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, msg); os.close(fd)
    os.chown(path, uid, uid)
    os.utime(path, (ts, ts))   # INTERNALDATE = mtime
    total += size
for dp, dn, fn in os.walk(md):
    os.chown(dp, uid, uid)
sys.stderr.write("seeded %d messages (%.1f MiB; %d with attachments, %d non-UTF-8, %d multipart/alternative) into %s in %.2fs\n"
                 % (n, total / 1048576.0, stats["multipart"], stats["charset"], stats["alt"], md, time.time() - t0))
PYEOF
  # Let Dovecot index the new files now (assigns UIDs, builds the index) so the
  # first client SELECT does not pay for it.  Needs the stack running.
  chown "$MAIL_UID:$MAIL_UID" "$D/mail/${user#*@}/${user%@*}" "$D/mail/${user#*@}/${user%@*}/Maildir"
  if alive "$(dovecot_pid "$D")"; then
    local t0=$EPOCHREALTIME
    doveadm -c "$D/etc/dovecot.conf" mailbox status -u "$user" 'messages unseen vsize' "$mbox"
    # a new folder is also subscribed, so LSUB-only clients see it
    if [ "$kind" = sub ]; then doveadm -c "$D/etc/dovecot.conf" mailbox subscribe -u "$user" "$mbox"; fi
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "dovecot indexed the mailbox in %.2fs\n", b - a }' >&2
  else
    echo "dovecot not running: index will be built on first access" >&2
  fi
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  seed) shift; cmd_seed "$@" ;;
  status) shift; cmd_status "$@" ;;
  restart-dovecot) shift; cmd_restart_dovecot "$@" ;;
  kick) shift; cmd_kick "$@" ;;
  *) awk 'NR > 1 && /^set -euo pipefail/ { exit } NR > 1' "$0"; exit 2 ;;
esac
