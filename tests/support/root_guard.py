"""Root-marked tests in a run without root: they fail, never skip.

Tests marked ``root`` build real networks (network namespaces, Mininet) and need root.
A run that selects them without root fails each of them with one message that says how
to run them or leave them out (``-m "not root"``, which is what ``make unit`` runs): a
skipped root test would let a non-root ``make test`` exit 0 having tested none of the
networking. ``tests/conftest.py`` installs the hook; the guard's own tests replace
:func:`effective_uid` to play a non-root user without changing privileges.
"""

from __future__ import annotations

import os

import pytest

ROOT_MARK = "root"
NEEDS_ROOT = ('needs root (network namespaces, Mininet): run it as root, or leave the root '
              'tests out with -m "not root" (`make unit`)')


def effective_uid() -> int:
    """The user id the guard checks; a seam for the guard's own tests."""
    return os.geteuid()


def refusal(item: pytest.Item) -> str | None:
    """Why ``item`` cannot run here, or None when it can."""
    if ROOT_MARK in item.keywords and effective_uid() != 0:
        return f"{item.nodeid} {NEEDS_ROOT}"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = refusal(item)
    if reason is not None:
        pytest.fail(reason, pytrace=False)
