"""Cases where an allocator hook and the kernel may disagree (bench/run
memray): each touches 100 MiB in its own way. pytest-memray reports what
it saw allocated at the high-water mark; memrun reports the kernel's peak of
the test's cgroup."""
import mmap
import os
import subprocess
import sys
import time

import numpy as np
import polars as pl

MIB = 1 << 20
N = 100


def test_nothing():
    """The baseline: the interpreter, pytest, NumPy and Polars loaded."""


def test_python_bytes():
    data = b"\1" * (N * MIB)
    assert len(data) == N * MIB


def test_numpy_buffer():
    data = np.ones(N * MIB // 8)
    assert data.nbytes == N * MIB


def test_polars_native():
    # Polars allocates in Rust, with its own allocator.
    series = pl.int_range(0, N * MIB // 8, eager=True).cast(pl.Int64)
    assert series.len() == N * MIB // 8


def test_child_process():
    subprocess.run([sys.executable, "-c", f"x = b'\\1' * ({N} << 20)"], check=True)


def test_mmap_file():
    # File-backed pages of BENCH_FILE (N MiB, written by bench/run), read
    # once through a mapping: page cache charged to the reader.
    with open(os.environ["BENCH_FILE"], "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            assert sum(m[i] for i in range(0, N * MIB, 4096)) >= 0


def test_short_spike():
    data = b"\1" * (N * MIB)
    del data
    time.sleep(0.01)
