import warnings

import pytest


def test_passes(answer):
    assert answer == 42


def test_fails():
    assert 1 == 2


def test_skips():
    pytest.skip("skipped on purpose")


@pytest.mark.skipif(True, reason="a skipif")
def test_skipif():
    pass


@pytest.mark.xfail(reason="known bug")
def test_xfails():
    assert False


@pytest.mark.xfail(reason="fixed since")
def test_xpasses():
    pass


@pytest.mark.xfail(reason="fixed since", strict=True)
def test_xpasses_strict():
    pass


def test_error(broken):
    pass


def test_warns():
    # Passes alone; fails under -W error.
    warnings.warn("deprecated", DeprecationWarning)


def test_plugin_fixture(from_plugin):
    assert from_plugin == "plugin"


def test_ini_option(pytestconfig):
    # -o sets an ini value for every case.
    assert pytestconfig.getini("python_files") == ["test_*.py", "check_*.py"]


@pytest.mark.parametrize("text", ["a b", "it's", "[x]"])
def test_awkward_ids(text):
    assert text
