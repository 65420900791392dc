"""A small pytest suite whose cases use known amounts of memory: what memrun's
`suites:` runs case by case (tests/suites_test.cc, specs/suites.yaml).
Markers set a case's own limit; a spec rule may set others."""
import subprocess
import sys

import pytest


def touch(mib):
    """mib MiB of bytes, every page written (b"\\1" * n fills them)."""
    return b"\1" * (mib << 20)


def test_small():
    assert len(touch(8)) == 8 << 20


@pytest.mark.memrun(memory="64MiB", expect="oom")
def test_loads_everything():
    # Under 64 MiB the kernel kills it: the marker says that is expected.
    assert len(touch(200)) == 200 << 20


@pytest.mark.parametrize("mib", [4, 16])
def test_param(mib):
    assert len(touch(mib)) == mib << 20


def test_child_holds_memory():
    # The memory is in a child process: pytest-memray's tracking misses it;
    # the test's cgroup does not.
    subprocess.run([sys.executable, "-c", "x = b'\\1' * (40 << 20)"], check=True)
