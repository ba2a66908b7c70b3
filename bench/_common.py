"""Helpers shared by the benchmarks that build their own namespaces and veths."""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

ETH_P_ALL = 0x0003
CLONE_NEWNET = 0x40000000

_libc: ctypes.CDLL | None = None


def sh(*cmd: str, check: bool = True) -> None:
    subprocess.run(cmd, check=check, capture_output=True)


@contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the body with this thread in network namespace ``name`` (from ``ip netns``),
    then bring it back to the namespace it was in; sockets made inside stay there."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL("libc.so.6", use_errno=True)
    root = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
        yield
    finally:
        _libc.setns(root, CLONE_NEWNET)
        os.close(root)
        os.close(target)
