# Each kind of case pytest --memrun must give pytest's own outcome for
# (tests/python/check runs it and reads the JUnit XML).
import subprocess
import sys

import numpy as np
import pytest

MiB = 1 << 20


@pytest.mark.memrun(memory="64MiB")
def test_fits():
    a = np.ones(16 * MiB, dtype=np.uint8)
    assert a.sum() == 16 * MiB


@pytest.mark.memrun(memory="64MiB", expect="oom")
def test_expected_oom():
    np.ones(200 * MiB, dtype=np.uint8)


@pytest.mark.memrun(memory="64MiB")
def test_unexpected_oom():
    print("about to allocate 200 MiB")
    np.ones(200 * MiB, dtype=np.uint8)


@pytest.mark.memrun(memory="64MiB")
def test_child_process_over_limit():
    subprocess.run([sys.executable, "-c", "b = b'x' * (100 * 2**20)"], check=True)


@pytest.mark.memrun(memory="64MiB")
def test_an_assertion_fails_within_the_limit():
    a = np.ones(4 * MiB, dtype=np.uint8)
    assert a.sum() == 0


@pytest.mark.memrun(memory="64MiB")
@pytest.mark.skip(reason="shows a skip")
def test_skipped():
    raise AssertionError("never runs")


@pytest.mark.memrun(memory="64MiB")
@pytest.mark.xfail(reason="a known bug", strict=True)
def test_xfail():
    assert 1 + 1 == 3


def test_unmarked():
    assert sum(range(10)) == 45
