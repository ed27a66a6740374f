#!/usr/bin/env bash
# Runs every test of a Criterion binary under one compute-sanitizer tool,
# one process per test, several at a time, and prints one line per test plus
# a total. Exit status 0 only when every test passed with no sanitizer error.
# Usage: bash tests/sanitize-all.sh TOOL BINARY LOGDIR [PARALLEL [REGEX]]
#   TOOL: memcheck | racecheck | synccheck | initcheck
#   REGEX: run only the tests whose "suite/name" matches (grep -E)
# Waits inside kernels are bounded by COLLGEN_TIMEOUT_MS; under a sanitizer
# kernels run many times slower, so it is raised to 120 s here unless set
# (the timeout test sets its own 300 ms limit).
set -u
tool=$1 bin=$2 logdir=$3 par=${4:-4} only=${5:-}
mkdir -p "$logdir"
export COLLGEN_TIMEOUT_MS=${COLLGEN_TIMEOUT_MS:-120000}
export COLLGEN_TEST_SLOW=1   # timing bounds of the GPU tests stretch under the sanitizer
# `--list` prints "suite: N tests" followed by tree lines ending in the name.
tests=$("$bin" --list 2>&1 | awk '/: [0-9]+ tests?$/ {s=$1; sub(":", "", s); next}
                                  {n=$NF; if (s != "" && n != "") print s "/" n}')
[ -z "$only" ] || tests=$(echo "$tests" | grep -E "$only")
[ -n "$tests" ] || { echo "sanitize-all: $bin listed no tests${only:+ matching $only}"; exit 2; }
run_one() { # tool bin logdir test
  local log="$3/$1-${4//\//.}.log" t0=$(date +%s)
  compute-sanitizer --tool "$1" --target-processes all --error-exitcode 99 "$2" --jobs 1 --filter="$4" > "$log" 2>&1
  local rc=$? errs
  # a filter that matched nothing would pass silently: demand exactly one test
  if [ $rc = 0 ] && ! grep -q 'Tested: 1 |' "$log"; then rc=98; fi
  errs=$(grep -oE '(ERROR SUMMARY|RACECHECK SUMMARY): [0-9]+ (errors?|hazards?)[^$]*' "$log" | tail -1)
  printf '%-62s %-7s %4ss  %s\n' "$4" "$([ $rc = 0 ] && echo ok || echo FAIL:$rc)" \
    "$(( $(date +%s) - t0 ))" "$errs"
}
export -f run_one
echo "$tests" | xargs -P "$par" -I{} bash -c 'run_one "$@"' _ "$tool" "$bin" "$logdir" {} \
  | sort | tee "$logdir/$tool-summary.txt"
total=$(wc -l < "$logdir/$tool-summary.txt")
bad=$(grep -vc ' ok ' "$logdir/$tool-summary.txt")
echo "$tool: $total tests, $((total - bad)) passed clean, $bad failed"
[ "$bad" = 0 ]
