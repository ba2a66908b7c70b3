"""Shared pytest setup.

Tests marked ``root`` build real networks (network namespaces, Mininet) and need
root. A run that selects them without root fails them with a message saying so
(tests/support/root_guard.py); ``-m "not root"`` (``make unit``) leaves them out.
"""

from __future__ import annotations

from tests.support.root_guard import pytest_runtest_setup

__all__ = ["pytest_runtest_setup"]
