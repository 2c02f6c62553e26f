#!/usr/bin/env bash
# docker-ci.sh - builds the image from the real Dockerfile and runs it the
# ways docs/deploy.md documents, against real mail servers, on a Debian 12
# machine as root with no container registry reachable (apt, npm and the Go
# module proxy are):
#   1. image checks: uid 65532, --read-only and --cap-drop ALL, healthy,
#      size <= 32 MB, `mailbox-mcp version` prints the build's version;
#   2. docker compose (docker-compose.yml + deploy/ci/compose.ci.yml) against
#      the mail stack of scripts/mailstack.sh, driven by the TypeScript SDK
#      (tests/clients/docker-smoke.mjs): list folders, send, read, wait;
#   3. the documented `--profile mail` stack (deploy/mailserver) answering;
#   4. scale-out: three gateway containers sharing one Redis container
#      (REDIS_URL; deploy/ci/redis.Dockerfile) behind HAProxy (round-robin, no
#      stickiness), go run ./tests/scaleout (every replica reports Redis ok,
#      2,000 calls, a token made on one replica opened on the others, a code
#      and a refresh token single-use across replicas, one replica killed
#      mid-run).
# It installs what it needs (docker.io, debootstrap, haproxy; compose v2
# built from its Go module), caching under $CI_CACHE, and starts dockerd when
# none runs. Every output line starts with "docker-ci:". Exit status non-zero,
# with the reason, on any failure - an engine that cannot start included.
#
#   scripts/docker-ci.sh
#
# Environment: CI_CACHE (default /var/cache/mailbox-mcp-ci).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
export PATH="/usr/local/go/bin:$PATH:/usr/local/sbin:/usr/sbin:/sbin"
export DEBIAN_FRONTEND=noninteractive DOCKER_BUILDKIT=0

exec > >(stdbuf -oL sed -u 's/^/docker-ci: /') 2>&1

CACHE=${CI_CACHE:-/var/cache/mailbox-mcp-ci}
COMPOSE_VERSION=v2.40.3
GO_IMAGE=local/golang-ci:1.26
DEBIAN_IMAGE=local/debian-ci:12
PROJECT=mailbox-mcp-ci
T0=$(date +%s)
mkdir -p "$CACHE"
WORK=$(mktemp -d /tmp/docker-ci.XXXXXX)
chmod 0755 "$WORK"

step() { echo "==> [$(( $(date +%s) - T0 ))s] $*"; }
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

# Debian's docker CLI (20.10), whose plugin directory the compose build fills
# (another docker on PATH might look elsewhere).
docker() { /usr/bin/docker "$@"; }
compose() { docker compose -p "$PROJECT" "$@"; }

stack_dir="" haproxy_pid="" locks=()
cleanup() {
  local st=$?
  set +e
  if [ -x /usr/bin/docker ] && docker info >/dev/null 2>&1; then
    compose -f docker-compose.yml -f deploy/ci/compose.ci.yml down -v --remove-orphans >/dev/null 2>&1
    CI_ENCRYPTION_KEY=x CI_GATEWAY_PORT=1 CI_DEBIAN_IMAGE=x compose -f docker-compose.yml -f deploy/ci/compose.mail.ci.yml --profile mail down -v --remove-orphans >/dev/null 2>&1
    docker rm -f mmcp-ci-check mmcp-ci-gw1 mmcp-ci-gw2 mmcp-ci-gw3 mmcp-ci-redis >/dev/null 2>&1
  fi
  [ -n "$haproxy_pid" ] && kill "$haproxy_pid" 2>/dev/null
  [ -n "$stack_dir" ] && scripts/mailstack.sh stop "$stack_dir" >/dev/null 2>&1
  rm -rf "$WORK" "$stack_dir"
  if [ $st != 0 ]; then echo "FAILED after $(( $(date +%s) - T0 ))s"; else echo "PASS in $(( $(date +%s) - T0 ))s"; fi
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || fail "needs root (dockerd, debootstrap, the mail stack)"

# --- packages -------------------------------------------------------------------
step "packages"
need=()
for p in docker.io debootstrap haproxy; do
  dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "apt-get install ${need[*]}"
  apt-get update -q >/dev/null || fail "apt-get update"
  apt-get install -y -q --no-install-recommends "${need[@]}" >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log"; fail "apt-get install ${need[*]}"; }
fi
ok "$(docker --version), $(haproxy -v | head -1)"

# --- compose v2, built from its Go module (Debian's is v1) -----------------------
step "docker compose $COMPOSE_VERSION"
plugin=/usr/libexec/docker/cli-plugins/docker-compose
if ! "$plugin" version 2>/dev/null | grep -q "$COMPOSE_VERSION"; then
  if [ ! -x "$CACHE/docker-compose-$COMPOSE_VERSION" ]; then
    export GOMODCACHE="$CACHE/gomod" GOCACHE="$CACHE/gocache" GOFLAGS=-modcacherw
    dir=$(go mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" 2>"$WORK/gomod.log" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
    [ -d "$dir" ] || fail "go mod download of compose $COMPOSE_VERSION"
    rm -rf "$WORK/compose" && cp -r "$dir" "$WORK/compose" && chmod -R u+w "$WORK/compose"
    (cd "$WORK/compose" && CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
      -o "$CACHE/docker-compose-$COMPOSE_VERSION.tmp" ./cmd >"$WORK/compose-build.log" 2>&1) \
      || { grep -v '^go: downloading' "$WORK/compose-build.log" | tail -30; fail "building compose"; }
    mv "$CACHE/docker-compose-$COMPOSE_VERSION.tmp" "$CACHE/docker-compose-$COMPOSE_VERSION"
    unset GOMODCACHE GOCACHE GOFLAGS
  fi
  install -D -m 0755 "$CACHE/docker-compose-$COMPOSE_VERSION" "$plugin"
fi
ok "$(docker compose version)"

# --- the engine ------------------------------------------------------------------
step "dockerd"
if ! docker info >/dev/null 2>&1; then
  nohup dockerd >"$CACHE/dockerd.log" 2>&1 &
  dpid=$!
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    kill -0 "$dpid" 2>/dev/null || break # it exited
    sleep 0.5
  done
  if ! docker info >/dev/null 2>&1; then
    tail -30 "$CACHE/dockerd.log"
    fail "the container engine (dockerd) did not start: see $CACHE/dockerd.log above. This machine kind runs it; do not skip"
  fi
fi
ok "engine $(docker version -f '{{.Server.Version}}'), storage $(docker info -f '{{.Driver}}')"

# --- local base images (no registry) -----------------------------------------------
# debootstrap minbase bookworm from the configured mirror, the host's extra CA
# certificates (outbound TLS is intercepted here), and for the build image the
# host's Go toolchain. Both stay local: CI never publishes them.
step "base images $DEBIAN_IMAGE, $GO_IMAGE"
govers=$(go env GOVERSION)
if [ "$(docker image inspect -f '{{index .Config.Labels "go.version"}}' "$GO_IMAGE" 2>/dev/null)" != "$govers" ] \
  || ! docker image inspect "$DEBIAN_IMAGE" >/dev/null 2>&1; then
  if [ ! -s "$CACHE/bookworm-minbase.tar" ]; then
    mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
    mirror=${mirror:-http://deb.debian.org/debian}
    rootfs="$WORK/rootfs"
    debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
      || { tail -30 "$WORK/debootstrap.log"; fail "debootstrap bookworm from $mirror"; }
    if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
      cp -r /usr/local/share/ca-certificates/. "$rootfs/usr/local/share/ca-certificates/"
      chroot "$rootfs" update-ca-certificates >/dev/null 2>&1 || fail "update-ca-certificates in the build image"
    fi
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -cf "$CACHE/bookworm-minbase.tar.tmp" . && mv "$CACHE/bookworm-minbase.tar.tmp" "$CACHE/bookworm-minbase.tar"
    rm -rf "$rootfs"
  fi
  docker import "$CACHE/bookworm-minbase.tar" "$DEBIAN_IMAGE" >/dev/null
  # the Go image: the minbase root filesystem plus the host's GOROOT
  goroot=$(go env GOROOT)
  mkdir -p "$WORK/gorootfs" && tar -C "$WORK/gorootfs" -xf "$CACHE/bookworm-minbase.tar"
  cp -a "$goroot" "$WORK/gorootfs/usr/local/go"
  tar -C "$WORK/gorootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV GOTOOLCHAIN=local' --change 'ENV GOPATH=/go' --change "LABEL go.version=$govers" \
    - "$GO_IMAGE" >/dev/null || fail "docker import $GO_IMAGE"
  rm -rf "$WORK/gorootfs"
fi
ok "$GO_IMAGE ($govers)"

# --- the gateway image --------------------------------------------------------------
VERSION="v0.0.0-ci.$(git rev-parse --short=12 HEAD 2>/dev/null || echo local)"
IMAGE="mailbox-mcp:$VERSION"
step "docker build ($IMAGE)"
docker build -q --build-arg BUILD_IMAGE="$GO_IMAGE" --build-arg VERSION="$VERSION" -t "$IMAGE" . >"$WORK/build.log" 2>&1 \
  || { cat "$WORK/build.log"; fail "docker build of the Dockerfile"; }
docker tag "$IMAGE" mailbox-mcp:ci
# earlier runs' tags (a CI machine that is reused fills up otherwise; untagged build
# stages stay: they are the layer cache of the next build)
docker images --format '{{.Repository}}:{{.Tag}}' 'mailbox-mcp' | grep -E '^mailbox-mcp:v0\.0\.0-ci\.' | grep -vxF "$IMAGE" | xargs -r /usr/bin/docker rmi >/dev/null 2>&1 || true
# the scale-out's Redis: Debian's redis-server on the local base image (no registry)
REDIS_IMAGE=mailbox-mcp-ci-redis:12
docker build -q --network host --build-arg BASE_IMAGE="$DEBIAN_IMAGE" -t "$REDIS_IMAGE" -f deploy/ci/redis.Dockerfile deploy/ci >"$WORK/redis-build.log" 2>&1 \
  || { cat "$WORK/redis-build.log"; fail "docker build of deploy/ci/redis.Dockerfile"; }

# --- ports: below 32768, locked like internal/mailstack's, so that the test suite's
# stacks running meanwhile never take them ---------------------------------------------
mkdir -p /tmp/mmcp-port-locks
lock_port() { # port -> 0 when locked by us and free
  local fd
  exec {fd}>"/tmp/mmcp-port-locks/$1"
  if flock -n "$fd" && ! ss -Hltn "sport = :$1" | grep -q .; then locks+=("$fd"); return 0; fi
  exec {fd}>&-; return 1
}
OFFSET=""
for _ in $(seq 1 50); do
  o=$(( 10000 + 20 * (RANDOM % 1000) ))
  all=1
  for b in 1024 1025 1143 1465 1587 1993; do lock_port $((b + o)) || { all=0; break; }; done
  [ $all = 1 ] && { OFFSET=$o; break; }
done
[ -n "$OFFSET" ] || fail "no free port offset for the mail stack"
GWPORTS=()
for p in $(seq 13000 13099); do
  lock_port "$p" && GWPORTS+=("$p")
  [ ${#GWPORTS[@]} = 6 ] && break
done
[ ${#GWPORTS[@]} = 6 ] || fail "no 6 free ports in 13000-13099"
LB_PORT=${GWPORTS[0]} GW1=${GWPORTS[1]} GW2=${GWPORTS[2]} GW3=${GWPORTS[3]} MAILPROFILE_PORT=${GWPORTS[4]} REDIS_PORT=${GWPORTS[5]}

KEY=$(docker run --rm "$IMAGE" keygen)
[[ "$KEY" =~ ^[0-9a-f]{64}$ ]] || fail "keygen printed '$KEY'"

# --- 1. image checks -----------------------------------------------------------------------
step "image checks"
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
[ "$size" -le $((32 * 1024 * 1024)) ] || fail "image is $size bytes, over 32 MB"
ok "size $(( size / 1024 )) KiB (<= 32 MB)"
got=$(docker run --rm --read-only --cap-drop ALL "$IMAGE" version)
[ "$got" = "mailbox-mcp $VERSION" ] || fail "version: got '$got', want 'mailbox-mcp $VERSION'"
ok "version: $got"
docker run -d --name mmcp-ci-check --network host --read-only --cap-drop ALL --security-opt no-new-privileges:true \
  -e PORT="$GW1" -e IMAP_HOST=imap.invalid -e ENCRYPTION_KEY="$KEY" --health-interval 1s --health-start-period 0s \
  "$IMAGE" >/dev/null
health=""
for _ in $(seq 1 30); do
  health=$(docker inspect -f '{{.State.Health.Status}}' mmcp-ci-check)
  [ "$health" = healthy ] && break
  [ "$(docker inspect -f '{{.State.Running}}' mmcp-ci-check)" = true ] || { docker logs mmcp-ci-check; fail "the container exited"; }
  sleep 0.5
done
[ "$health" = healthy ] || { docker logs mmcp-ci-check; fail "health check: $health, want healthy"; }
pid=$(docker inspect -f '{{.State.Pid}}' mmcp-ci-check)
uids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$pid/status")
[ "$uids" = "65532 65532 65532 65532" ] || fail "process runs as uids $uids, want 65532"
capeff=$(awk '/^CapEff:/ {print $2}' "/proc/$pid/status")
[ "$capeff" = 0000000000000000 ] || fail "effective capabilities $capeff, want none"
ok "runs as 65532, no capabilities, read-only root filesystem, health check: healthy"
docker rm -f mmcp-ci-check >/dev/null

# --- the mail stack -----------------------------------------------------------------------------
step "mail stack (scripts/mailstack.sh, port offset $OFFSET)"
stack_dir=$(mktemp -d /tmp/mmcp-ci-stack.XXXXXX)
export MAILSTACK_PORT_OFFSET=$OFFSET MAILSTACK_DOVECOT_SUBMISSION=0
export MAILSTACK_USERS="alice@example.test:alicepw bob@example.test:bobpw carol@example.test:carolpw"
scripts/mailstack.sh start "$stack_dir" >"$WORK/stack.log" 2>&1 || { cat "$WORK/stack.log"; fail "mail stack start"; }
# shellcheck disable=SC1091
. "$stack_dir/mailstack.env"
scripts/mailstack.sh seed "$stack_dir" carol@example.test 120 >/dev/null
cp "$MAILSTACK_CA_FILE" "$WORK/mail-ca.pem" && chmod 0644 "$WORK/mail-ca.pem"
doveadm_count() { doveadm -c "$stack_dir/etc/dovecot.conf" mailbox status -u "$1" messages INBOX | sed 's/.*messages=//'; }
ok "IMAPS $MAILSTACK_IMAPS_PORT, submissions $MAILSTACK_SUBMISSIONS_PORT"

if [ ! -d tests/clients/node_modules/@modelcontextprotocol/sdk ]; then
  (cd tests/clients && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in tests/clients"
fi

# --- 2. compose against the mail stack ------------------------------------------------------------
step "docker compose up (host network, gateway on $GW1)"
export VERSION CI_GATEWAY_PORT=$GW1 CI_IMAPS_PORT=$MAILSTACK_IMAPS_PORT CI_SUBMISSIONS_PORT=$MAILSTACK_SUBMISSIONS_PORT \
  CI_ENCRYPTION_KEY=$KEY CI_CA_FILE=$WORK/mail-ca.pem CI_DEBIAN_IMAGE=$DEBIAN_IMAGE
CF=(-f docker-compose.yml -f deploy/ci/compose.ci.yml)
compose "${CF[@]}" up -d --no-build --wait --wait-timeout 60 || { compose "${CF[@]}" logs; fail "compose up --wait"; }
ok "healthy"
out=$(node tests/clients/docker-smoke.mjs "http://127.0.0.1:$GW1/mcp" alice@example.test alicepw full) \
  || { compose "${CF[@]}" logs --tail 50; fail "TypeScript SDK against the compose gateway"; }
ok "TypeScript SDK: list folders, send, read, wait: $out"
compose "${CF[@]}" down -v >/dev/null 2>&1 || fail "compose down -v"
ok "compose down -v"
# The scale profile (Valkey, HAProxy, the replicas without published ports):
# its images cannot be pulled here, so the files are checked, not run; the
# scale-out below runs the same topology from local images.
compose -f docker-compose.yml -f deploy/scale/compose.scale.yml "${CF[@]:2}" --profile scale config -q \
  || fail "docker-compose.yml with deploy/scale/compose.scale.yml (--profile scale)"
haproxy -c -q -f deploy/scale/haproxy.cfg || fail "deploy/scale/haproxy.cfg"
ok "scale profile: compose files and deploy/scale/haproxy.cfg valid"

# --- 3. the documented mail profile ------------------------------------------------------------------
step "docker compose --profile mail (bundled mail server; gateway on $MAILPROFILE_PORT)"
MF=(-f docker-compose.yml -f deploy/ci/compose.mail.ci.yml --profile mail)
CI_GATEWAY_PORT=$MAILPROFILE_PORT compose "${MF[@]}" build -q mailserver >"$WORK/mailbuild.log" 2>&1 \
  || { cat "$WORK/mailbuild.log"; fail "building deploy/mailserver"; }
CI_GATEWAY_PORT=$MAILPROFILE_PORT compose "${MF[@]}" up -d --no-build --wait --wait-timeout 120 \
  || { CI_GATEWAY_PORT=$MAILPROFILE_PORT compose "${MF[@]}" logs --tail 50; fail "compose --profile mail up --wait"; }
out=$(node tests/clients/docker-smoke.mjs "http://127.0.0.1:$MAILPROFILE_PORT/mcp" alice@example.test alicepw list) \
  || { CI_GATEWAY_PORT=$MAILPROFILE_PORT compose "${MF[@]}" logs --tail 50; fail "imap_list_folders against the mail profile"; }
ok "mail profile answers imap_list_folders: $out"
CI_GATEWAY_PORT=$MAILPROFILE_PORT compose "${MF[@]}" down -v >/dev/null 2>&1 || fail "compose --profile mail down -v"

# --- 4. scale-out ------------------------------------------------------------------------------------------
step "scale-out: 3 replicas ($GW1 $GW2 $GW3) sharing Redis ($REDIS_PORT) behind HAProxy on $LB_PORT"
docker run -d --name mmcp-ci-redis --network host --read-only --cap-drop ALL --security-opt no-new-privileges:true \
  "$REDIS_IMAGE" --port "$REDIS_PORT" >/dev/null
for _ in $(seq 1 40); do
  docker exec mmcp-ci-redis redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break
  sleep 0.25
done
docker exec mmcp-ci-redis redis-cli -p "$REDIS_PORT" ping | grep -q PONG || { docker logs mmcp-ci-redis; fail "Redis did not answer"; }
ok "Redis: $(docker exec mmcp-ci-redis redis-server --version | cut -d' ' -f1-3)"
i=0
for p in $GW1 $GW2 $GW3; do
  i=$((i + 1))
  # One name for all three (the balancer's): the OAuth issuer, so that a
  # sign-in made at one replica refreshes at any other.
  docker run -d --name "mmcp-ci-gw$i" --network host --read-only --cap-drop ALL --security-opt no-new-privileges:true \
    -e PORT="$p" -e IMAP_HOST=127.0.0.1 -e IMAP_PORT="$MAILSTACK_IMAPS_PORT" -e SMTP_HOST=127.0.0.1 \
    -e SMTP_PORT="$MAILSTACK_SUBMISSIONS_PORT" -e SMTP_SECURITY=tls -e MAIL_CA_FILE=/ci/mail-ca.pem -e ENCRYPTION_KEY="$KEY" \
    -e REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" -e PUBLIC_URL="http://127.0.0.1:$LB_PORT" \
    -e LOG_LEVEL=warn -v "$WORK/mail-ca.pem:/ci/mail-ca.pem:ro" --health-interval 1s --health-start-period 0s \
    "$IMAGE" >/dev/null
done
cat >"$WORK/haproxy.cfg" <<EOF
global
  maxconn 2000
  stats socket $WORK/haproxy.sock mode 600 level admin
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  retries 2
  option redispatch
frontend mcp
  bind 127.0.0.1:$LB_PORT
  default_backend gateways
  http-response set-header X-Served-By %s
backend gateways
  balance roundrobin
  option httpchk GET /health
  default-server inter 1s fall 2 rise 2
  server gw1 127.0.0.1:$GW1 check
  server gw2 127.0.0.1:$GW2 check
  server gw3 127.0.0.1:$GW3 check
EOF
haproxy -c -q -f "$WORK/haproxy.cfg" || fail "haproxy config"
haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy.log" 2>&1 &
haproxy_pid=$!
for i in 1 2 3; do
  for _ in $(seq 1 40); do [ "$(docker inspect -f '{{.State.Health.Status}}' "mmcp-ci-gw$i")" = healthy ] && break; sleep 0.25; done
  [ "$(docker inspect -f '{{.State.Health.Status}}' "mmcp-ci-gw$i")" = healthy ] || { docker logs "mmcp-ci-gw$i"; fail "replica $i not healthy"; }
done
sleep 2.5 # HAProxy: rise 2 at 1 s
go build -o "$WORK/scaleout" ./tests/scaleout || fail "building tests/scaleout"
# the replicas' cgroups (v1 here; the CPU figure is left out elsewhere)
cg=() cpufiles=()
for i in 1 2 3; do cg+=("$(docker inspect -f '{{.Id}}' "mmcp-ci-gw$i")"); done
for id in "${cg[@]}"; do
  f=/sys/fs/cgroup/cpuacct/docker/$id/cpuacct.usage
  [ -r "$f" ] && cpufiles+=("$f")
done
cpucmd=""
[ ${#cpufiles[@]} = 3 ] && cpucmd="cat ${cpufiles[*]} | awk '{s += \$1} END {print s}'"
"$WORK/scaleout" -lb "http://127.0.0.1:$LB_PORT/mcp" \
  -replicas "http://127.0.0.1:$GW1/mcp,http://127.0.0.1:$GW2/mcp,http://127.0.0.1:$GW3/mcp" \
  -user carol@example.test -pass carolpw -want-inbox "$(doveadm_count carol@example.test)" \
  -calls 2000 -clients 16 -kill "/usr/bin/docker kill mmcp-ci-gw2" -stats-socket "$WORK/haproxy.sock" -kill-server gw2 -redis \
  -refresh-replay -public-url "http://127.0.0.1:$LB_PORT" \
  -send-user alice@example.test -send-pass alicepw -send-to bob@example.test \
  -cpu-cmd "$cpucmd" -count-cmd "doveadm -c $stack_dir/etc/dovecot.conf mailbox status -u bob@example.test messages INBOX" \
  || { tail -20 "$WORK/haproxy.log"; fail "scale-out"; }
ok "scale-out"
for i in 1 3; do
  m=/sys/fs/cgroup/memory/docker/${cg[$((i - 1))]}
  if [ -r "$m/memory.stat" ]; then
    echo "memory of replica $i after the run: rss $(( $(awk '$1 == "total_rss" {print $2}' "$m/memory.stat") / 1024 / 1024 )) MiB, peak usage (page cache included) $(( $(cat "$m/memory.max_usage_in_bytes") / 1024 / 1024 )) MiB"
  fi
done
echo "total $(( $(date +%s) - T0 ))s"
