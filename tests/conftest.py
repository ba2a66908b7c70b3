"""Shared pytest setup.

Tests marked ``root`` build real networks (network namespaces, Mininet). They
need root. Outside CI a non-root run skips them; in CI (CI=true, always root)
a missing privilege is a failure, never a silent skip.
"""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    if os.environ.get("CI") and any("root" in item.keywords for item in items):
        pytest.exit("CI must run as root: the root-marked tests cannot be skipped", returncode=1)
    skip = pytest.mark.skip(reason="needs root (network namespaces / Mininet)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)
