"""Helpers shared by the benchmarks: argument parsing, and for those that build their own
namespaces and veths, running p4lite-switch on them."""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from p4hub.hosts.wire import AGG_UDP_PORT

REPO = Path(__file__).resolve().parent.parent
ETH_P_ALL = 0x0003
CLONE_NEWNET = 0x40000000

AGG_PORT_BYTES = AGG_UDP_PORT.to_bytes(2, "big")  # UDP port field of a p4hub datagram

_libc: ctypes.CDLL | None = None
T = TypeVar("T")


def mininet_ready(name: str) -> bool:
    """A Mininet benchmark's start: False (after saying so) when not root; else SIGTERM
    is made to tear the rack down as an exception would, and True."""
    if os.geteuid() != 0:
        print(f"bench.{name} needs root (Mininet)", file=sys.stderr)
        return False
    from p4hub.topologies.rack import exit_on_sigterm

    exit_on_sigterm()
    return True


def comma_list(cast: Callable[[str], T]) -> Callable[[str], list[T]]:
    """An argparse ``type`` for ``1,2,4``: the items, each through ``cast``."""
    return lambda text: [cast(x) for x in text.split(",")]


def result_key(datagram: bytes) -> bytes:
    """(job, position) of a p4hub datagram: a RESULT is checked against the one the PBox would send."""
    return datagram[2:4] + datagram[12:16]


POSITION_OFFSET = 12  # of the position field (u32, big-endian) in a p4hub datagram (hosts/wire.py)
FRAME_PAYLOAD_OFFSET = 42  # of the datagram in an Ethernet/IPv4/UDP frame without IP options


def advance_position(data: bytes, delta: int, at: int = POSITION_OFFSET) -> bytes:
    """``data`` with the position field at offset ``at`` advanced by ``delta`` (mod 2**32).

    Aggregators keep each cell's round position, so a replayed contribution with an
    unchanged position is a duplicate, not a new one; a benchmark that replays a cycle
    advances every position by a multiple of 2 x the window to get real rounds again
    (same slot, same shadow set, a newer position)."""
    position = (int.from_bytes(data[at:at + 4], "big") + delta) & 0xFFFFFFFF
    return data[:at] + position.to_bytes(4, "big") + data[at + 4:]


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


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_p4lite_switch(interfaces: dict[int, str], grpc_port: int, log_path: Path,
                        wait_seconds: float, priority_queues: int = 1,
                        packet_io: str = "socket") -> subprocess.Popen:
    """p4lite-switch on ``interfaces`` (port -> interface) with no program,
    ``priority_queues`` egress queues per port and ``--packet-io packet_io`` (socket or
    mmap), its output in ``log_path``; returns once
    its gRPC port takes connections. Raises RuntimeError (with the log's tail) if it
    exits or does not listen within ``wait_seconds``."""
    exe = REPO / ".venv" / "bin" / "p4lite-switch"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "p4lite.switch.process.main"]
    for port, interface in interfaces.items():
        cmd += ["-i", f"{port}@{interface}"]
    cmd += ["--no-p4", "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}",
            "--priority-queues", str(priority_queues), "--packet-io", packet_io]
    with log_path.open("w") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", grpc_port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"p4lite-switch did not start: {log_path.read_text()[-2000:]}")
