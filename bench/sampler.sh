#!/usr/bin/env bash
# The sampler's cost: memrun's CPU time running N tests that each sleep one
# second, with the timeline sampled every 20 ms (the default) and with
# sampling off (--sample-interval 0), in the same run, best of ROUNDS. The
# tests use no CPU themselves, so the CPU time is memrun's.
#   bench/sampler.sh [BUILD_DIR] [N]
set -euo pipefail
build=${1:-build}
n=${2:-10}
rounds=${ROUNDS:-3}
work=$(mktemp -d -p /dev/shm)
trap 'rm -rf "$work"' EXIT
{
  echo "tests:"
  for i in $(seq 1 "$n"); do echo "  - {name: t$i, run: [sleep, '1'], memory: 16MiB}"; done
} > "$work/spec.yaml"
cpu() {  # user+system seconds of memrun and what it waited for
  /usr/bin/time -f "%U %S" -o "$work/time" "$build/memrun" "$work/spec.yaml" --run-dir "$work/runs" "$@" > /dev/null
  awk '{print $1 + $2}' "$work/time"
}
min() { if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc)" = 1 ]; then echo "$2"; else echo "$1"; fi; }
on= off=
for r in $(seq 1 "$rounds"); do
  a=$(cpu); b=$(cpu --sample-interval 0)
  printf 'round %d: sampling on %.3f s CPU, off %.3f s CPU\n' "$r" "$a" "$b"
  on=$(min "$on" "$a"); off=$(min "$off" "$b")
done
printf '\n%d tests x 1 s, best of %d: memrun CPU with the 20 ms sampler %.3f s, without %.3f s\n' "$n" "$rounds" "$on" "$off"
printf 'sampler cost: %.2f ms CPU per test-second (%.2f%% of one core)\n' \
  "$(echo "($on - $off) * 1000 / $n" | bc -l)" "$(echo "($on - $off) * 100 / $n" | bc -l)"
