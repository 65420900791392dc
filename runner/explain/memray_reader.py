"""memray's profiles read back through memray's own API (memray.FileReader),
for memrun's explain (runner/explain/memray.cc hands this file to the test's
Python, python -I -c, compiled in as runner/suites/pytest_driver.py is).

   python -I -c PROGRAM PREFIX MOST

prints, as one JSON list, one entry per profile PREFIX* (one per process
memray followed): its pid, command line and peak, and the allocations held
at its high-water mark, largest first, at most MOST, with their Python and
native frames ([function, file, line] each). A thread pool's allocations
(Polars', Arrow's, DuckDB's) carry no Python frame of their own: those live
at the peak are added up by the call they served, the Python stack of the
last allocation with Python frames made before each (a second pass over the
records, up to the peak), and come as "pool" sites: the largest one's
native frames, then that stack ("served"). A profile that cannot be read is
an entry with its "error".
"""
import glob
import json
import sys

import memray

FREES = {memray.AllocatorType.FREE, memray.AllocatorType.MUNMAP, memray.AllocatorType.PYMALLOC_FREE}


def frames(stack):
    """A stack's frames as [function, file, line] lists."""
    return [[str(f), str(p), int(l or 0)] for f, p, l in stack]


def pool_sites(r, main_tid):
    """The thread pools' allocations live at the peak, by the Python call they served."""
    live, total, peak, at = {}, 0, -1, -1
    for i, a in enumerate(r.get_allocation_records()):
        if a.allocator in FREES:
            total -= live.pop(a.address, 0)
            continue
        live[a.address] = a.size
        total += a.size
        if total > peak:
            peak, at = total, i
    live, served, last = {}, {}, None
    for i, a in enumerate(r.get_allocation_records()):
        if i > at:
            break
        if a.allocator in FREES:
            live.pop(a.address, None)
        elif a.stack_id:
            live.pop(a.address, None)
            last = a
        elif a.tid != main_tid and last is not None:
            live[a.address] = (a, last)
        else:
            live.pop(a.address, None)
    for a, by in live.values():
        s = served.setdefault(by.stack_id, [0, 0, a, by])
        s[0] += a.size
        s[1] += 1
        if a.size > s[2].size:
            s[2] = a
    out = []
    for size, count, largest, by in served.values():
        try:
            native = frames(largest.hybrid_stack_trace(max_stacks=32))
        except Exception:
            native = []
        out.append({"bytes": size, "allocations": count, "stack": native,
                    "served": frames(by.stack_trace(max_stacks=64))})
    return out


def read(prefix, most):
    """The entries of the profiles PREFIX*, as the module's docstring says."""
    out = []
    for path in sorted(glob.glob(prefix + "*")):
        try:
            r = memray.FileReader(path)
            m = r.metadata
            try:
                pool = pool_sites(r, m.main_thread_id)
            except Exception:  # an aggregated profile keeps no single allocation
                pool = None
            recs = sorted(r.get_high_watermark_allocation_records(merge_threads=False), key=lambda a: -a.size)
            sites = []
            for a in recs:
                if len(sites) == most:
                    break
                try:
                    stack = list(a.hybrid_stack_trace(max_stacks=64)) if m.has_native_traces else list(a.stack_trace(max_stacks=64))
                except Exception:
                    stack = list(a.stack_trace(max_stacks=64))
                python = any(str(p).endswith(".py") for _, p, _ in stack)
                if pool is not None and a.tid != m.main_thread_id and not python:
                    continue  # counted in a pool site
                sites.append({"bytes": a.size, "allocations": a.n_allocations, "stack": frames(stack)})
            out.append({"file": path, "pid": m.pid, "command": m.command_line, "peak": m.peak_memory, "sites": sites,
                        "pool": pool or []})
        except Exception as e:
            out.append({"file": path, "error": "%s: %s" % (type(e).__name__, e)})
    return out


if __name__ == "__main__":
    print(json.dumps(read(sys.argv[1], int(sys.argv[2]))))
