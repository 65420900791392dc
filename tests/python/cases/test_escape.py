# A case that leaves its cgroup (as root it can: a forked case is not sealed
# as a memrun SPEC test is) never passes: tests/python/check expects it to
# fail, naming the escape.
import os

import pytest

import pytest_memrun._cgroup


@pytest.mark.memrun(memory="64MiB")
def test_moves_itself_out_of_its_limit():
    pytest_memrun._cgroup.join(os.getppid())  # back into pytest's own groups
    b = b"x" * (100 << 20)
    assert len(b) == 100 << 20
