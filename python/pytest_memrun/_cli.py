"""The `memrun` command of the wheel: the packaged binary, exec'd in place."""
import os
import sys

from . import binary


def main():
    path = binary()
    os.execv(path, [path, *sys.argv[1:]])
