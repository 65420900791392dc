# A module pytest skips as it collects it, as test files that need an
# optional engine do: pytest counts one skip, and so must memrun.
import pytest

pytest.importorskip("no_such_engine_for_memrun")


def test_never_collected():
    assert False
