# pytest_memrun.peak() and the memrun_peak fixture: the kernel's peak of a block.
import os
import subprocess
import sys

import numpy as np
import pytest

import pytest_memrun
import pytest_memrun._cgroup

MiB = 1 << 20


def within(value, expected, tolerance=2 * MiB):
    return abs(value - expected) <= tolerance


@pytest.mark.memrun(memory="256MiB")
def test_peak_of_100_mib(memrun_peak):
    with memrun_peak() as p:
        a = np.ones(100 * MiB, dtype=np.uint8)
        del a
    assert within(p.peak, 100 * MiB), p
    assert p.retained < 2 * MiB, p
    print(p)


@pytest.mark.memrun(memory="256MiB")
def test_retained_of_a_kept_array():
    with pytest_memrun.peak() as p:
        kept = np.ones(50 * MiB, dtype=np.uint8)
    assert within(p.retained, 50 * MiB), p
    assert kept[0] == 1


@pytest.mark.memrun(memory="256MiB")
def test_memory_freed_before_the_block_is_not_counted():
    a = np.ones(100 * MiB, dtype=np.uint8)
    del a
    with pytest_memrun.peak() as p:
        b = np.ones(10 * MiB, dtype=np.uint8)
        del b
    assert within(p.peak, 10 * MiB), p


@pytest.mark.memrun(memory="256MiB")
def test_a_child_process_is_counted():
    with pytest_memrun.peak() as p:
        subprocess.run([sys.executable, "-c", "b = b'x' * (100 * 2**20)"], check=True)
    assert p.peak >= 100 * MiB, p


@pytest.mark.memrun(memory="256MiB")
def test_max_is_asserted():
    with pytest.raises(pytest_memrun.PeakExceeded, match="above its max 24.0 MiB"):
        with pytest_memrun.peak(max="24MiB"):
            np.ones(50 * MiB, dtype=np.uint8)
    with pytest.raises(pytest_memrun.PeakExceeded, match="retained"):
        with pytest_memrun.peak(retained_max="2MiB"):
            kept = np.ones(10 * MiB, dtype=np.uint8)
    assert kept[0] == 1


@pytest.mark.memrun(memory="64MiB")
def test_the_figure_is_the_kernels():
    # v1: the test's own leaf, whose mark is reset; v2: per-fd memory.peak
    # resets from 6.12. Only v2 before 6.12 falls back to sampling.
    with pytest_memrun.peak() as p:
        pass
    release = tuple(int(x) for x in os.uname().release.split(".")[:2])
    version, _ = pytest_memrun._cgroup.memory_group()
    if version == 1:
        assert p.source == "memory.max_usage_in_bytes", p
    elif release >= (6, 12):
        assert p.source == "memory.peak", p
    else:
        assert p.source.startswith("sampled every"), p
