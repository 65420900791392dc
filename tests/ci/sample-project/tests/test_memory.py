import pytest


def test_small_table():
    table = [bytes(1024) for _ in range(10_000)]
    assert len(table) == 10_000


@pytest.mark.memrun(memory="48MiB", expect="oom")
def test_loading_everything_is_killed():
    _ = [bytearray(1 << 20) for _ in range(256)]
