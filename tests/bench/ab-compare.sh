#!/usr/bin/env bash
# A/B latency of two builds of collgen on this machine's GPU(s): the tree
# here ("new") and an older tree at OLD ("old", e.g. from `git archive`).
# Builds collgen-ab-latency (tests/bench/ab_latency.c, the same source) in
# both, runs them alternately ROUNDS times, and prints per case the median
# of each and new/old. Usage: bash tests/bench/ab-compare.sh OLD [ROUNDS]
set -eu
OLD=$(cd "$1" && pwd); ROUNDS=${2:-3}
cd "$(dirname "$0")/../.."
D=$PWD/.deps/usr
export LD_LIBRARY_PATH=$D/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
cp tests/bench/ab_latency.c "$OLD/tests/bench/ab_latency.c"
grep -q collgen-ab-latency "$OLD/tests/CMakeLists.txt" ||
  sed -n '/^# collgen-ab-latency/,/collgen_static)$/p' tests/CMakeLists.txt >> "$OLD/tests/CMakeLists.txt"
for t in "$PWD" "$OLD"; do
  cmake -S "$t" -B "$t/build-ab" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$D" \
    -DCMAKE_C_FLAGS="-I$D/include/x86_64-linux-gnu" > "$t/build-ab.log" 2>&1
  cmake --build "$t/build-ab" -j"$(nproc)" --target collgen-ab-latency >> "$t/build-ab.log" 2>&1 ||
    { tail -30 "$t/build-ab.log"; exit 1; }
done
R=${OUT:-$PWD/build-ab}; mkdir -p "$R"
: > "$R/ab-new.txt"; : > "$R/ab-old.txt"
for i in $(seq "$ROUNDS"); do
  COLLGEN_CACHE_DIR=$PWD/build-ab/cache ./build-ab/tests/collgen-ab-latency >> "$R/ab-new.txt"
  COLLGEN_CACHE_DIR=$OLD/build-ab/cache "$OLD/build-ab/tests/collgen-ab-latency" >> "$R/ab-old.txt"
done
head -1 "$R/ab-new.txt"
median() { grep "^ab $1 " "$2" | awk '{print $3}' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
printf '%-28s %10s %10s %8s\n' case "old us" "new us" new/old
for c in $(grep '^ab ' "$R/ab-new.txt" | awk '{print $2}' | sort -u); do
  o=$(median "$c" "$R/ab-old.txt"); n=$(median "$c" "$R/ab-new.txt")
  awk -v c="$c" -v o="$o" -v n="$n" 'BEGIN { printf "%-28s %10.3f %10.3f %8.3f\n", c, o, n, n / o }'
done
