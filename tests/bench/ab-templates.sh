#!/usr/bin/env bash
# A/B of two template trees with one build: runs collgen-bench ARGS
# alternately with this tree's templates ("new") and those of the tree at
# OLD ("old": its gen/ and templates/, e.g. from
# `git archive HEAD~1 gen templates | tar -x -C ab-old`), each with its own
# kernel cache, ROUNDS times, and prints every table line of both, tagged.
# Use it for kernel changes that keep the host side as it is (the kernel
# parameters must be the same). Every run checks its results first, as
# collgen-bench always does.
# Usage: bash tests/bench/ab-templates.sh BUILD OLD_TREE ROUNDS ARGS...
set -eu
BUILD=$1 OLD=$(cd "$2" && pwd) ROUNDS=$3; shift 3
cd "$(dirname "$0")/../.."
for i in $(seq "$ROUNDS"); do
  for side in new old; do
    if [ $side = new ]; then tpl=$PWD; else tpl=$OLD; fi
    COLLGEN_TEMPLATE_DIR=$tpl COLLGEN_CACHE_DIR=$PWD/$BUILD/cache-ab-$side \
      "./$BUILD/tests/bench/collgen-bench" "$@" | sed "s/^/$side $i: /"
  done
done
