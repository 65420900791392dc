#!/usr/bin/env bash
# The Polars regression story, checked (ctest polars.regression): the same
# test under three Polars (specs/python/polars-*.lock, made by ./setup.sh
# test into .venv/), each explained (memray, in each environment), then
# memrun compare: the bad version is `regressed` against the good one, with
# the test's read_parquet line named as where the memory grew and both
# versions' bytes there; the fixed one `unchanged`.
#   tests/polars_regression.sh MEMRUN_BINARY OUT_DIR
set -euo pipefail
memrun=$1 out=$2
cd "$(dirname "$0")/.."
for v in 0.19.19 0.20.15 0.20.18; do
  [ -x ".venv/polars-$v/bin/python" ] || { echo "no .venv/polars-$v: run ./setup.sh test (it makes the Python environments)" >&2; exit 1; }
done
mkdir -p "$out"
for v in 0.19.19 0.20.15 0.20.18; do
  POLARS_ENV=polars-$v MEMRUN_SCALE=0.5 "$memrun" specs/polars_regression.yaml --explain=always --json "$out/$v.json" \
    --run-dir "$out/runs"
done
set +e
# The working set, not the kernel peak: the peak is mostly the cold read's
# page cache (~110 of ~150 MiB at this scale), which moves from run to run
# by tens of MiB (0.20.18 was once -21% against 0.19.19); the working set
# (39 vs 270 MiB) is the figure the regression changed.
"$memrun" compare --gate working-set "$out/0.19.19.json" "$out/0.20.15.json" | tee "$out/bad.txt"
bad=${PIPESTATUS[0]}
"$memrun" compare --gate working-set "$out/0.19.19.json" "$out/0.20.18.json" | tee "$out/fixed.txt"
fixed=${PIPESTATUS[0]}
set -e
[ "$bad" = 1 ] && grep -q '^regressed  *read-one-column' "$out/bad.txt" || { echo "FAIL: 0.20.15 was not called regressed (exit $bad)" >&2; exit 1; }
# Where: the test's line that calls read_parquet, whose bytes (its own
# and Polars' thread pool's) grew by more than the regression allows.
# memray's bytes move a little from run to run; the growth is ~2.5x.
where=$(grep -E '^ +where \(explained\): ' "$out/bad.txt" | head -n 1)
[[ $where =~ where\ \(explained\):\ ([0-9.]+)\ MiB\ -\>\ ([0-9.]+)\ MiB\ \ .*read_one_column\.py:[0-9]+\):\ df\ =\ pl\.read_parquet\( ]] ||
  { echo "FAIL: compare did not name read_parquet's line as where 0.20.15 grew: '$where'" >&2; exit 1; }
awk -v b="${BASH_REMATCH[1]}" -v h="${BASH_REMATCH[2]}" 'BEGIN { exit !(h > 1.5 * b) }' ||
  { echo "FAIL: read_parquet's line held ${BASH_REMATCH[1]} MiB in 0.19.19, ${BASH_REMATCH[2]} MiB in 0.20.15" >&2; exit 1; }
[ "$fixed" = 0 ] && grep -q '^unchanged  *read-one-column' "$out/fixed.txt" || { echo "FAIL: 0.20.18 was not called unchanged (exit $fixed)" >&2; exit 1; }
echo "polars.regression: 0.20.15 regressed (${BASH_REMATCH[1]} -> ${BASH_REMATCH[2]} MiB at read_parquet's line), 0.20.18 unchanged against 0.19.19"
