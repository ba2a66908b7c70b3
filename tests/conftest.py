"""Shared pytest setup.

Tests marked ``root`` build real networks (network namespaces, Mininet) and need
root. A run that selects them without root fails them with a message saying so
(tests/support/root_guard.py); ``-m "not root"`` (``make unit``) leaves them out.
"""

from __future__ import annotations

import os

import pytest

from tests.support.root_guard import pytest_runtest_setup

__all__ = ["pytest_runtest_setup"]


@pytest.fixture(scope="session", autouse=True)
def p4hub_state_dir(tmp_path_factory):
    """Controllers and clients started by the tests keep their state (administrator token,
    the job API's own CA) in a directory of the test session's, never the machine's
    /var/lib/p4hub (P4HUB_STATE_DIR: controller/client.py)."""
    os.environ["P4HUB_STATE_DIR"] = str(tmp_path_factory.mktemp("p4hub-state"))
    yield
