import pytest


@pytest.fixture
def answer():
    return 42


@pytest.fixture
def broken():
    raise RuntimeError("a fixture that fails: pytest's 'error'")
