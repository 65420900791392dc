#!/bin/sh
# Runs inside the systemd VM (tests/vm/run systemd): N `/bin/true` through a
# bare loop, through `systemd-run --scope` and through memrun, ROUNDS times
# in this one boot. Prints one line per measurement: "NAME SECONDS".
#   bench/vm_overhead.sh BUILD_DIR N ROUNDS
build=$1
n=$2
rounds=$3
work=$(mktemp -d)
{ echo "tests:"; i=1; while [ "$i" -le "$n" ]; do echo "  - {name: t$i, run: [/bin/true], memory: 64MiB}"; i=$((i + 1)); done; } > "$work/spec.yaml"
t() { s=$(date +%s.%N); "$@" > /dev/null 2>&1 || echo "failed: $*" >&2; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
r=1
while [ "$r" -le "$rounds" ]; do
  echo "bare $(t "$build/bench/bare-loop" "$n" /bin/true)"
  echo "systemd-run $(t "$build/bench/bare-loop" "$n" /usr/bin/systemd-run --scope --quiet -p MemoryMax=64M /bin/true)"
  echo "memrun $(t "$build/memrun" "$work/spec.yaml" --backend systemd --run-dir "$work/runs")"
  r=$((r + 1))
done
