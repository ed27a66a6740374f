#!/usr/bin/env bash
# Regenerates every golden kernel source with the given collgen binary
# (default build/collgen), from the same arguments test_cli.c checks
# (gen_matches_golden_sources). Run after an intended template change and
# review the diff. Usage: bash tests/golden/regen.sh [COLLGEN]
set -eu
cd "$(dirname "$0")/../.."
B=${1:-build/collgen}
# Each expect_golden("ARGS", "FILE") of test_cli.c, with its string pieces joined.
sed -n '/Test(cli, gen_matches_golden_sources)/,/^}/p' tests/test_cli.c | tr -d '\n' |
  grep -o 'expect_golden([^;]*;' | while read -r call; do
    args=$(printf '%s' "$call" | sed -E 's/^expect_golden\(//; s/\);$//' |
           sed -E 's/"[[:space:]]*"//g' | sed -E 's/^"([^"]*)",[[:space:]]*"([^"]*)"$/\1|\2/')
    file=${args#*|}; args=${args%|*}
    # shellcheck disable=SC2086
    "$B" $args > "tests/golden/$file"
    echo "regenerated tests/golden/$file"
  done
