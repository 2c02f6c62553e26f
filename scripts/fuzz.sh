#!/usr/bin/env bash
# fuzz.sh - runs every Fuzz target of the repository (found in the
# *_test.go files under internal/ and cmd/) for FUZZ_TIME (default 5s), one
# target per go test invocation as -fuzz requires. scripts/test.sh calls it
# on a full run; .ci/run runs it beside the container checks. A failure
# leaves the crashing input in the package's testdata/fuzz/<target>/: commit
# it, so that it becomes a regular test case. Exit status 1 when a target
# failed.
#
# Go 1.26's fuzz coordinator can fail a target at the end of -fuzztime with
# "context deadline exceeded" and no crashing input (go.dev/issue/75804,
# fixed in Go 1.27). A failure that wrote no input is therefore run once
# more, and fails only if it fails again; one that wrote an input always
# fails.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export PATH="$PATH:/usr/local/go/bin"
fuzz_time=${FUZZ_TIME:-5s}
fuzz_once() { # dir target -> status; output in $out, new inputs in $found
  local dir=$1 target=$2 corpus=$1/testdata/fuzz/$2 before status
  before=$(ls "$corpus" 2>/dev/null)
  out=$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzz_time" "$dir" 2>&1)
  status=$?
  found=$(comm -13 <(printf '%s\n' "$before") <(ls "$corpus" 2>/dev/null))
  return $status
}
fuzz_failed=0
while IFS=: read -r file target; do
  dir=./$(dirname "$file")
  if fuzz_once "$dir" "$target"; then
    echo "ok   $dir $target"
    continue
  fi
  if [ -z "$found" ] && printf '%s\n' "$out" | grep -q 'context deadline exceeded'; then
    echo "     $dir $target: failed with no crashing input (go.dev/issue/75804); running it again"
    if fuzz_once "$dir" "$target"; then
      echo "ok   $dir $target"
      continue
    fi
  fi
  echo "FAIL $dir $target"
  printf '%s\n' "$out" | grep -v '^fuzz: elapsed' | sed 's/^/    /'
  fuzz_failed=1
done < <(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(' internal cmd 2>/dev/null \
           | sed -E 's/:func (Fuzz[A-Za-z0-9_]+)\($/:\1/' | sort)
exit $fuzz_failed
