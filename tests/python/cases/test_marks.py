# Markers pytest --memrun cannot use error their own case (with the reason), never the session (tests/python/check).
import pytest
@pytest.mark.memrun(memory="64MiB", colour="red")
def test_badkey(): pass
@pytest.mark.memrun(expect="oom")
def test_nomemory(): pass
@pytest.mark.memrun(memory="64MiB", memory_high="32MiB")
def test_high(): pass
@pytest.mark.memrun(memory="64MiB")
def test_ok(): pass
