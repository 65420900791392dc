"""Doctests that --doctest-modules collects.

>>> double(2)
4
"""


def double(x):
    """
    >>> double(21)
    42
    """
    return 2 * x


def skipped():
    """
    >>> skipped()  # doctest: +SKIP
    'never run'
    """


def wrong():
    """
    >>> wrong()
    1
    """
    return 2
