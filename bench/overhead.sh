#!/usr/bin/env bash
# memrun's per-test overhead: N `/bin/true` tests through memrun (one spec)
# against a bare fork/exec/wait loop of the same command, in the same run,
# best of ROUNDS rounds (the machines are shared and noisy).
#
# memrun is measured twice: with its log folder on tmpfs (memrun's own cost:
# cgroup mkdir/rmdir, limits, clone, kernel reads) and on disk in the build
# folder (what a default run pays: on these machines' ext4, creating a file
# costs about 0.5 ms in the inode allocator, twice per test for its logs).
#   bench/overhead.sh [BUILD_DIR] [N]
set -euo pipefail
build=${1:-build}
n=${2:-500}
rounds=${ROUNDS:-5}
disk=$(mktemp -d -p "$build")
shm=$(mktemp -d -p /dev/shm)
trap 'rm -rf "$disk" "$shm"' EXIT

{
  echo "tests:"
  for i in $(seq 1 "$n"); do echo "  - {name: t$i, run: [/bin/true], memory: 64MiB}"; done
} > "$shm/spec.yaml"

now() { date +%s.%N; }
min() { if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc)" = 1 ]; then echo "$2"; else echo "$1"; fi; }
time_it() {  # prints the seconds a command took
  local t0 t1
  t0=$(now); "$@" > /dev/null || { echo "failed: $*" >&2; exit 1; }; t1=$(now)
  echo "$t1 - $t0" | bc -l
}
best_bare= best_shm= best_disk=
for r in $(seq 1 "$rounds"); do
  b=$(time_it "$build/bench/bare-loop" "$n" /bin/true)
  s=$(time_it "$build/memrun" "$shm/spec.yaml" --run-dir "$shm/runs")
  d=$(time_it "$build/memrun" "$shm/spec.yaml" --run-dir "$disk/runs")
  rm -rf "$shm/runs" "$disk/runs"
  printf 'round %d: bare %.3f s, memrun (logs on tmpfs) %.3f s, memrun (logs on disk) %.3f s\n' "$r" "$b" "$s" "$d"
  best_bare=$(min "$best_bare" "$b"); best_shm=$(min "$best_shm" "$s"); best_disk=$(min "$best_disk" "$d")
done
ms() { echo "$1 * 1000 / $n" | bc -l; }
bare=$(ms "$best_bare"); shm_ms=$(ms "$best_shm"); disk_ms=$(ms "$best_disk")
printf '\n%d tests of /bin/true, best of %d rounds\n' "$n" "$rounds"
printf '%-28s %8.3f ms/test\n' "bare fork/exec/wait" "$bare"
printf '%-28s %8.3f ms/test  overhead %.3f ms (goal < 1 ms)  ratio %.2fx\n' "memrun, logs on tmpfs" "$shm_ms" \
  "$(echo "$shm_ms - $bare" | bc -l)" "$(echo "$shm_ms / $bare" | bc -l)"
printf '%-28s %8.3f ms/test  overhead %.3f ms              ratio %.2fx\n' "memrun, logs on disk" "$disk_ms" \
  "$(echo "$disk_ms - $bare" | bc -l)" "$(echo "$disk_ms / $bare" | bc -l)"
