# Markers pytest --memrun cannot use error their own case (with the reason), never the session (tests/python/check).
import pytest
@pytest.mark.memrun(memory="64MiB", colour="red")
def test_badkey(): pass
@pytest.mark.memrun(expect="oom")
def test_nomemory(): pass
@pytest.mark.memrun(memory="64MiB", memory_high="32MiB")
def test_high(): pass
@pytest.mark.memrun(memory="64MiB", min_headroom=float("nan"))
def test_nan(): pass
@pytest.mark.memrun(memory="64MiB", env={"A": [[[[[[[[[["deep"]]]]]]]]]]})
def test_deep(): pass
@pytest.mark.memrun(memory="64MiB")
def test_long_block_name():
    import pytest_memrun
    with pytest_memrun.peak(name="n" * 300):
        pass
@pytest.mark.memrun(memory="64MiB")
def test_ok(): pass
