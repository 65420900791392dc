"""Loaded with -p project_plugin: a fixture only this plugin gives."""
import pytest


@pytest.fixture
def from_plugin():
    return "plugin"
