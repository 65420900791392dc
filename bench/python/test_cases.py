# bench/run pytest_memrun: 20 marked cases, each touching 8 MiB of NumPy,
# run by plain pytest, pytest --memray, pytest --memrun and a loop of
# `python -m pytest NODEID`.
import numpy as np
import pytest

MiB = 1 << 20


@pytest.mark.memrun(memory="128MiB")
@pytest.mark.parametrize("i", range(20))
def test_case(i):
    a = np.ones(8 * MiB, dtype=np.uint8)
    assert int(a[::4096].sum()) == 2048
