#!/usr/bin/env bash
# test.sh - the test command of the project: formatting, vet, and every test,
# including the integration tests against a real Dovecot/Postfix stack
# (scripts/mailstack.sh, started by internal/mailtest).
#
#   scripts/test.sh                          gofmt -l, go vet ./..., go test -race -count=1 ./...
#   scripts/test.sh -run Foo ./internal/...  extra args go to go test (and the
#                                            packages named also scope vet/gofmt)
#
# The integration tests need root and the Debian packages dovecot-core
# dovecot-imapd dovecot-lmtpd postfix (plus openssl, python3). Run as root on a
# machine without them, this script installs them (apt-get); otherwise it
# says what to install and those tests skip - unless CI=true, where they fail.
# Ory Hydra, the OAuth provider of the sign-in tests, is built from source by
# scripts/hydra.sh (the Go module proxy and a C compiler, once per machine);
# Shopify's toxiproxy, the fault injector of tests/faults, by
# scripts/toxiproxy.sh (the Go module proxy, once per machine).
#
# Output: one line per test and subtest (--- PASS/FAIL/SKIP, with the reason
# of a skip), one ok/FAIL line per package, the full output of every failing
# test or package (panics, build errors), and a closing line
#   N passed, N failed, N skipped
# The exit status is non-zero if gofmt, vet or any test failed.
#
# Environment: CI (passed on to the tests), TEST_SHORT=1 (go test -short),
# FUZZ_TIME (how long each fuzz target runs on a full run, default 5s; 0 skips),
# TEST_KEEP_LOG=1 (keep the full go test -json log, path printed at the end).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
[ -n "${CI+x}" ] && export CI

step() { printf '\n==> %s\n' "$*"; }

# --- system packages ----------------------------------------------------------
MAIL_PKGS="dovecot-core dovecot-imapd dovecot-lmtpd postfix"
# redis-server: the shared memories' tests (internal/memory) and several
# gateway replicas sharing one (tests/replicas_test.go); each test starts
# its own on a loopback port (internal/mailstack/redis.go).
OTHER_PKGS="redis-server"
missing_pkgs() {
  local p
  for p in $MAIL_PKGS $OTHER_PKGS openssl python3 chromium; do  # chromium: the OAuth sign-in test (puppeteer-core)
    dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || printf '%s ' "$p"
  done
  # go test -race needs cgo, hence a C compiler
  command -v "$(go env CC 2>/dev/null || echo gcc)" >/dev/null 2>&1 || printf 'gcc libc6-dev '
}

if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then
  missing=$(missing_pkgs)
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
      step "installing: $missing"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update || exit 1
      # keeps the postfix package from writing /etc/postfix/main.cf
      echo 'postfix postfix/main_mailer_type select No configuration' | debconf-set-selections || exit 1
      # shellcheck disable=SC2086
      apt-get install -y --no-install-recommends $missing || exit 1
    else
      step "missing packages: $missing"
      echo "The mail stack integration tests will skip (or fail if CI=true). Install as root with:"
      echo "  echo 'postfix postfix/main_mailer_type select No configuration' | debconf-set-selections"
      echo "  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing"
      echo "and run the tests as root (the stack's daemons need it)."
    fi
  fi
elif ! command -v dovecot >/dev/null || ! command -v postfix >/dev/null; then
  step "no dpkg/apt-get: install Dovecot 2.3 (imapd, lmtpd) and Postfix yourself; the mail stack tests will skip"
fi

# --- Cyrus and Courier beside Dovecot (the interop matrix, tests/interop_test.go)
# Their dependencies from apt, the two servers unpacked under
# /var/cache/mailbox-mcp/imapservers (they conflict with dovecot-imapd, so
# they are never installed as packages); nothing when they are there.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  step "Cyrus and Courier for the interop tests (scripts/imapservers.sh install)"
  if scripts/imapservers.sh install; then echo "ok"; else echo "FAIL: scripts/imapservers.sh install"; imapservers_failed=1; fi
fi

# --- Ory Hydra, the OAuth provider of the sign-in tests ------------------------
# scripts/hydra.sh builds it from tests/hydra once per machine (about 2 min
# cold; nothing when the cached binary is current). It builds in the
# background while npm ci, gofmt and vet run, for runs that include the
# packages using it; go test waits for it. A failed build is reported, and
# the tests that need Hydra then skip (fail when CI=true).
hydra_pid=""
hydra_wanted=1
for a in "$@"; do
  case "$a" in
    .|./*|../*|/*|github.com/*|all) hydra_wanted=0 ;;
  esac
done
for a in "$@"; do
  case "$a" in
    all|*...|./tests|./tests/*|./internal/hydra*) hydra_wanted=1 ;;
  esac
done
if [ $hydra_wanted = 1 ]; then
  hydra_log=$(mktemp "${TMPDIR:-/tmp}/mailbox-mcp-hydra.XXXXXX")
  hydra_start=$(date +%s)
  scripts/hydra.sh build >"$hydra_log" 2>&1 &
  hydra_pid=$!
fi

# --- Shopify's toxiproxy, the fault injector of tests/faults -----------------
# scripts/toxiproxy.sh builds it from tests/toxiproxy once per machine (about
# 30 s cold; nothing when cached), in the background like Hydra, for runs
# that include ./tests/faults. A failed build is reported, and the fault
# suite then skips (fails when CI=true).
toxi_pid=""
toxi_wanted=$hydra_wanted
for a in "$@"; do
  case "$a" in ./tests/faults*) toxi_wanted=1 ;; esac
done
if [ $toxi_wanted = 1 ]; then
  toxi_log=$(mktemp "${TMPDIR:-/tmp}/mailbox-mcp-toxiproxy.XXXXXX")
  scripts/toxiproxy.sh build >"$toxi_log" 2>&1 &
  toxi_pid=$!
fi

# --- npm packages of the real-client tests (tests/clients) ------------------
# tests/clients_test.go runs mcp-remote and the TypeScript SDK from
# tests/clients/node_modules, installed exactly from package-lock.json. Without
# Node.js/npm those tests skip (fail when CI=true).
if command -v npm >/dev/null && command -v node >/dev/null; then
  step "npm ci (tests/clients, node $(node --version))"
  if ! (cd tests/clients && npm ci --no-audit --no-fund --loglevel=error); then
    echo "FAIL: npm ci in tests/clients"
    npm_failed=1
  else
    echo "ok"
  fi
  # The official client of the 2026-07-28 protocol (v2 SDK line), apart from
  # the v1 SDK's dependencies (tests/approval_test.go).
  step "npm ci (tests/clients/v2: @modelcontextprotocol/client)"
  if ! (cd tests/clients/v2 && npm ci --no-audit --no-fund --loglevel=error); then
    echo "FAIL: npm ci in tests/clients/v2"
    npm_failed=1
  else
    echo "ok"
  fi
  # The MCP Inspector (tests/inspector_test.go) needs Node >= 22.19: npm
  # ships Node 22 for Linux x86-64 as a package, kept in its own directory so
  # that it never shadows the machine's node for mcp-remote. Elsewhere the
  # test uses a node on PATH that is new enough, or skips.
  if [ "$(uname -sm)" = "Linux x86_64" ]; then
    step "npm ci (tests/clients/node22: Node 22 for the MCP Inspector and the conformance suite)"
    if ! (cd tests/clients/node22 && npm ci --no-audit --no-fund --loglevel=error); then
      echo "FAIL: npm ci in tests/clients/node22"
      npm_failed=1
    else
      echo "ok ($(tests/clients/node22/node_modules/.bin/node --version))"
    fi
  fi
  # Calendar material of tests/invite_test.go: invitations made by
  # ical-generator, answers parsed by node-ical (run on the Node 22 above).
  step "npm ci (tests/clients/calendar: ical-generator, node-ical)"
  if ! (cd tests/clients/calendar && npm ci --no-audit --no-fund --loglevel=error); then
    echo "FAIL: npm ci in tests/clients/calendar"
    npm_failed=1
  else
    echo "ok"
  fi
  # The real-mail corpus of tests/corpus_test.go (Foundation, mailgen, React
  # Email, MJML, rendered and read in Chromium): its own directory, run on
  # the Node 22 above (juice needs Node >= 22.12).
  step "npm ci (tests/clients/mailcorpus: real HTML mail templates)"
  if ! (cd tests/clients/mailcorpus && npm ci --no-audit --no-fund --loglevel=error); then
    echo "FAIL: npm ci in tests/clients/mailcorpus"
    npm_failed=1
  else
    echo "ok"
  fi
else
  step "node/npm not found: the real MCP client tests will skip (or fail if CI=true); install Node.js 20.18+ with npm"
fi

# --- arguments: go test flags, and packages if any are named ------------------
pkgs=() flags=()
for a in "$@"; do
  case "$a" in
    .|./*|../*|/*|github.com/*|all) pkgs+=("$a") ;;
    *) flags+=("$a") ;;
  esac
done
scoped=1
if [ ${#pkgs[@]} -eq 0 ]; then pkgs=(./...); scoped=0; fi
# -parallel 4: the tests that call t.Parallel have a mail stack of their own
# and mostly wait (browsers, providers, deliveries).
test_flags=(-count=1 -timeout=30m -parallel=4)
if [ "$(go env CGO_ENABLED)" = 1 ]; then
  test_flags+=(-race)
else
  echo "WARNING: cgo is disabled (no C compiler?): running the tests without -race" >&2
fi
[ "${TEST_SHORT:-}" = 1 ] && test_flags+=(-short)

failed_steps=()
[ -n "${npm_failed:-}" ] && failed_steps+=("npm ci")
[ -n "${imapservers_failed:-}" ] && failed_steps+=("imapservers install")

# --- gofmt --------------------------------------------------------------------
step "gofmt -l"
if [ $scoped = 0 ]; then
  fmt_targets=(.)
else
  # only the directories of the packages named (not recursive)
  mapfile -t fmt_targets < <(go list -e -f '{{.Dir}}' "${pkgs[@]}" 2>/dev/null \
    | while read -r d; do find "$d" -maxdepth 1 -name '*.go' -type f; done)
fi
unformatted=""
if [ ${#fmt_targets[@]} -gt 0 ]; then
  unformatted=$("$(go env GOROOT)/bin/gofmt" -l "${fmt_targets[@]}" 2>&1)
fi
if [ -n "$unformatted" ]; then
  echo "$unformatted"
  echo "FAIL: files above need gofmt (run: gofmt -w FILE)"
  failed_steps+=(gofmt)
else
  echo "ok"
fi

# --- go vet -------------------------------------------------------------------
step "go vet ${pkgs[*]}"
if go vet "${pkgs[@]}"; then echo "ok"; else echo "FAIL: go vet"; failed_steps+=("go vet"); fi

# --- Hydra's build (started above) ---------------------------------------------
if [ -n "$hydra_pid" ]; then
  step "Ory Hydra (scripts/hydra.sh build)"
  if wait "$hydra_pid"; then
    if grep -q 'built in' "$hydra_log"; then
      echo "ok: $(grep 'built in' "$hydra_log") (ready $(( $(date +%s) - hydra_start ))s after the start of this run)"
    else
      echo "ok: cached, $(tail -n 1 "$hydra_log")"
    fi
  else
    cat "$hydra_log"
    echo "FAIL: scripts/hydra.sh build: the OAuth provider tests will skip (or fail if CI=true)"
  fi
  rm -f "$hydra_log"
fi

if [ -n "$toxi_pid" ]; then
  step "toxiproxy (scripts/toxiproxy.sh build)"
  if wait "$toxi_pid"; then
    if grep -q 'built in' "$toxi_log"; then echo "ok: $(grep 'built in' "$toxi_log")"; else echo "ok: cached, $(tail -n 1 "$toxi_log")"; fi
  else
    cat "$toxi_log"
    echo "FAIL: scripts/toxiproxy.sh build: the fault suite will skip (or fail if CI=true)"
  fi
  rm -f "$toxi_log"
fi

# --- go test ------------------------------------------------------------------
step "go test ${test_flags[*]}${flags[*]:+ ${flags[*]}} ${pkgs[*]}"
log=$(mktemp "${TMPDIR:-/tmp}/mailbox-mcp-test.XXXXXX")
counts=$(mktemp "${TMPDIR:-/tmp}/mailbox-mcp-counts.XXXXXX")

if command -v python3 >/dev/null; then
  # go test -json -> readable, short output (see the header)
  FILTER=$(cat <<'PYEOF'
import json, sys

log = open(sys.argv[1], "w")
counts_file = sys.argv[2]
FRAMING = ("=== RUN", "=== PAUSE", "=== CONT", "=== NAME")
pkgs = {}          # package -> state
build_out = {}     # import path -> [lines]
npass = nfail = nskip = 0
failed_names = []

def state(p):
    if p not in pkgs:
        pkgs[p] = {"order": [], "tests": {}, "out": []}
    return pkgs[p]

def emit(s=""):
    sys.stdout.write(s + "\n")

def body(lines, indent, limit=None):
    lines = [l for l in lines if not l.lstrip().startswith(FRAMING) and not l.lstrip().startswith("--- ")]
    if limit is not None and len(lines) > limit:
        lines = lines[:limit] + ["... (%d more lines)" % (len(lines) - limit)]
    for l in lines:
        emit(indent + l.rstrip("\n"))

def finish(pkg, action, ev):
    global npass, nfail, nskip
    st = pkgs.pop(pkg, {"order": [], "tests": {}, "out": []})
    tests = st["tests"]
    pkg_test_fail = False
    for name in st["order"]:
        t = tests[name]
        depth = name.count("/")
        ind = "    " * depth
        res = t["result"]
        el = " (%.2fs)" % t["elapsed"] if t["elapsed"] is not None else ""
        if res == "pass":
            npass += 1
            emit("%s--- PASS: %s%s" % (ind, name, el))
        elif res == "skip":
            nskip += 1
            emit("%s--- SKIP: %s%s" % (ind, name, el))
            body(t["out"], ind + "    ", limit=10)
        else:
            nfail += 1
            pkg_test_fail = True
            failed_names.append("%s %s" % (pkg, name))
            what = "FAIL" if res == "fail" else "FAIL (did not finish: panic, timeout or exit)"
            emit("%s--- %s: %s%s" % (ind, what, name, el))
            body(t["out"], ind + "    ")
    summary = [l for l in st["out"] if l.startswith(("ok ", "ok\t", "FAIL\t", "?   ", "--- FAIL"))]
    if action == "fail":
        if ev.get("FailedBuild"):
            key = ev["FailedBuild"]
            lines = build_out.pop(key, None)
            if lines is None:
                lines = [l for k in list(build_out) for l in build_out.pop(k)]
            for l in lines:
                emit("    " + l.rstrip("\n"))
        # everything the package printed outside tests (TestMain, init, panics)
        other = [l for l in st["out"] if l not in summary and l.strip() not in ("FAIL", "PASS")]
        for l in other:
            emit("    " + l.rstrip("\n"))
        if not pkg_test_fail:
            nfail += 1
            failed_names.append("%s (package)" % pkg)
    for l in summary:
        if not l.startswith("--- FAIL"):
            emit(l.rstrip("\n"))
    if action == "fail" and not any(l.startswith("FAIL") for l in summary):
        emit("FAIL\t%s" % pkg)
    sys.stdout.flush()

for raw in sys.stdin:
    log.write(raw)
    try:
        ev = json.loads(raw)
    except ValueError:
        emit(raw.rstrip("\n"))  # not from test2json: pass it on
        continue
    a = ev.get("Action")
    if a in ("build-output", "build-fail"):
        if a == "build-output":
            build_out.setdefault(ev.get("ImportPath", ""), []).append(ev.get("Output", ""))
        continue
    pkg = ev.get("Package", "")
    test = ev.get("Test")
    st = state(pkg)
    if test:
        t = st["tests"].get(test)
        if t is None:
            t = st["tests"][test] = {"result": None, "elapsed": None, "out": []}
            st["order"].append(test)
        if a == "output":
            t["out"].append(ev.get("Output", ""))
        elif a in ("pass", "fail", "skip"):
            t["result"] = a
            t["elapsed"] = ev.get("Elapsed")
    else:
        if a == "output":
            st["out"].append(ev.get("Output", ""))
        elif a in ("pass", "fail", "skip"):
            finish(pkg, a, ev)

for pkg in list(pkgs):  # go test died before reporting these
    finish(pkg, "fail", {})
for k in list(build_out):  # build errors not tied to a package result
    for l in build_out.pop(k):
        emit(l.rstrip("\n"))
log.close()
if failed_names:
    emit("")
    emit("Failed:")
    for n in failed_names:
        emit("  " + n)
with open(counts_file, "w") as f:
    f.write("%d passed, %d failed, %d skipped\n" % (npass, nfail, nskip))
sys.exit(1 if nfail else 0)
PYEOF
)
  go test -json "${test_flags[@]}" "${flags[@]}" "${pkgs[@]}" | python3 -u -c "$FILTER" "$log" "$counts"
  st=("${PIPESTATUS[@]}")
  test_status=${st[0]}
  if [ "${st[1]}" != 0 ] && [ "$test_status" = 0 ]; then test_status=1; fi
else
  # no python3: plain go test -v, filtered with grep/awk
  echo "(python3 not found: falling back to go test -v | grep)"
  go test -v "${test_flags[@]}" "${flags[@]}" "${pkgs[@]}" >"$log" 2>&1
  test_status=$?
  grep -E '^\s*--- (PASS|FAIL|SKIP)|^(ok|FAIL|\?)\s|^panic:' "$log"
  if [ "$test_status" != 0 ]; then
    echo; echo "=== full go test output ==="; cat "$log"
  fi
  awk -v ts="$test_status" '/^[[:space:]]*--- PASS/ { p++ } /^[[:space:]]*--- FAIL/ { f++ } /^[[:space:]]*--- SKIP/ { s++ }
       END { if (!f && ts != 0) f = 1; printf "%d passed, %d failed, %d skipped\n", p, f, s }' "$log" >"$counts"
fi
[ "$test_status" != 0 ] && failed_steps+=("go test")

# The benchmark's smoke run: 1,000 messages, few calls per tool, every tool
# through the gateway binary and the same IMAP commands direct; it fails on
# any error or wrong answer, and when a tool's gateway round trips (a short
# pass through internal/rttproxy at 0 ms) rise above the committed ones (the
# targets are for the full, manual run: see docs/benchmarks.md). Whole-repository runs only; TEST_SKIP_BENCH=1 skips it.
if [ $scoped = 0 ] && [ "${TEST_SKIP_BENCH:-}" != 1 ]; then
  step "benchmark smoke run: go run ./cmd/mailbox-bench -smoke"
  if [ "$(id -u)" != 0 ] || ! command -v dovecot >/dev/null || ! command -v postfix >/dev/null; then
    if [ "${CI:-false}" != false ]; then
      echo "FAIL: the smoke run needs root and Dovecot/Postfix"; failed_steps+=("bench smoke")
    else
      echo "skipped: needs root and Dovecot/Postfix"
    fi
  else
    benchlog=$(mktemp "${TMPDIR:-/tmp}/mailbox-mcp-bench.XXXXXX")
    if timeout 600 go run ./cmd/mailbox-bench -smoke >"$benchlog" 2>&1; then
      grep -E '^\| (imap|smtp)_[a-z_]+ \| (1|64) \|' "$benchlog" || true
      echo "ok"
    else
      cat "$benchlog"; echo "FAIL: benchmark smoke run"; failed_steps+=("bench smoke")
    fi
    rm -f "$benchlog"
  fi
fi

# --- fuzzing -------------------------------------------------------------------
# scripts/fuzz.sh runs every Fuzz target for FUZZ_TIME (default 5s; 0 skips
# the step). Only on a full run: a scoped run is for quick iteration.
# .ci/run sets FUZZ_TIME=0 here and runs scripts/fuzz.sh itself, beside the
# container checks.
if [ $scoped = 0 ] && [ "${FUZZ_TIME:-5s}" != 0 ]; then
  step "fuzz: each target for ${FUZZ_TIME:-5s}"
  scripts/fuzz.sh || failed_steps+=(fuzz)
fi

if [ "${TEST_KEEP_LOG:-}" = 1 ]; then
  echo; echo "full go test log: $log"
else
  rm -f "$log"
fi
echo
if [ ${#failed_steps[@]} -gt 0 ]; then echo "FAILED: ${failed_steps[*]}"; fi
# the closing line
if [ -s "$counts" ]; then cat "$counts"; else echo "0 passed, 1 failed, 0 skipped"; failed_steps+=("go test"); fi
rm -f "$counts"
[ ${#failed_steps[@]} -eq 0 ]
