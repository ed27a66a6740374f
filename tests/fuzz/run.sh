#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (ASan + UBSan + coverage) and
# runs each for SECONDS (default 60) over a copy of its seed corpus, so the
# committed corpus is not rewritten. Any crash, leak, UB report or timeout
# fails the run (exit 1). Usage: bash tests/fuzz/run.sh [SECONDS] [NAME...]
# Prints one line per harness: executions, corpus size, result.
set -u
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:-60}; shift || true
B=${COLLGEN_FUZZ_BUILD:-build-fuzz}
CC=clang cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Debug -DCOLLGEN_FUZZ=ON -DCOLLGEN_BUILD_TESTS=OFF \
  -DCOLLGEN_BUILD_BENCH=OFF > "$B-configure.log" 2>&1 || { cat "$B-configure.log"; exit 1; }
cmake --build "$B" -j"$(nproc)" > "$B-build.log" 2>&1 || { tail -40 "$B-build.log"; exit 1; }
names=("$@")
if [ ${#names[@]} = 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do n=$(basename "$f" .c); names+=("${n#fuzz_}"); done
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export COLLGEN_CACHE_DISABLE=1 COLLGEN_LOG=off
status=0
for n in "${names[@]}"; do
  work=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$n/." "$work/" 2>/dev/null || true
  log="$B/fuzz_$n.log"
  "$B/tests/fuzz/fuzz_$n" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$B/crash-$n-" "$work" > "$log" 2>&1
  rc=$?
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  printf 'fuzz %-16s %-5s %10s execs in %ss, corpus %s files\n' "$n" \
    "$([ $rc = 0 ] && echo ok || echo FAIL)" "${execs:-?}" "$SECONDS_EACH" "$(ls "$work" | wc -l)"
  if [ $rc != 0 ]; then status=1; tail -40 "$log"; fi
  rm -rf "$work"
done
exit $status
