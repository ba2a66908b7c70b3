"""Slot-to-core affinity: N reuseport UDP sockets and the cBPF program that picks one
by slot group (``socket index = (slot // SLOT_GROUP) mod N``, hosts/slot_groups.py)."""

from __future__ import annotations

import ctypes
import logging
import socket
from collections.abc import Callable

from p4hub.hosts.slot_groups import SLOT_GROUP

log = logging.getLogger("p4hub-pbox")

SO_ATTACH_REUSEPORT_CBPF = 51  # include/uapi/asm-generic/socket.h
SLOT_OFFSET = 8  # byte offset of the u32 slot field in the UDP payload (hosts/wire.py)
SOCKET_BUFFER = 4 << 20  # room for bursts of a whole window from every worker

# Classic BPF opcodes (include/uapi/linux/bpf_common.h).
_BPF_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_BPF_ALU_DIV_K = 0x04 | 0x30 | 0x00  # BPF_ALU | BPF_DIV | BPF_K
_BPF_ALU_MOD_K = 0x04 | 0x90 | 0x00  # BPF_ALU | BPF_MOD | BPF_K
_BPF_RET_A = 0x06 | 0x10  # BPF_RET | BPF_A


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def steering_program(n_sockets: int) -> list[tuple[int, int, int, int]]:
    """The cBPF program that returns ``(slot // SLOT_GROUP) mod n_sockets``.

    For SO_REUSEPORT programs the kernel runs the filter with the skb data pulled
    past the UDP header (reuseport_select_sock -> run_bpf_filter pulls hdr_len =
    sizeof(struct udphdr)), so absolute offset 8 is the slot field of our header.
    BPF_LD|BPF_W|BPF_ABS loads it in network byte order, as the wire has it. A
    datagram too short to hold the field makes the load fail, the program returns 0
    and the packet goes to socket 0, whose aggregator counts it as malformed.
    """
    return [
        (_BPF_LD_W_ABS, 0, 0, SLOT_OFFSET),
        (_BPF_ALU_DIV_K, 0, 0, SLOT_GROUP),
        (_BPF_ALU_MOD_K, 0, 0, n_sockets),
        (_BPF_RET_A, 0, 0, 0),
    ]


def attach_steering(sock: socket.socket, n_sockets: int) -> None:
    """Attach the slot-steering program to the reuseport group of ``sock`` (OSError on failure)."""
    program = steering_program(n_sockets)
    filters = (_SockFilter * len(program))(*[_SockFilter(*insn) for insn in program])
    fprog = _SockFprog(len(program), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, bytes(fprog))


def _udp_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
        except OSError:
            pass  # the kernel caps it at rmem_max/wmem_max; the default still works
    sock.bind((host, port))
    return sock


def open_sockets(
    host: str, port: int, workers: int, attach: Callable[[socket.socket, int], None] = attach_steering
) -> list[socket.socket]:
    """Bind ``workers`` reuseport sockets in order and attach steering.

    The reuseport group indexes sockets in bind order, which is why they are all
    bound here, in one process, before any worker is forked. Returns one socket
    (no steering needed) when ``workers`` is 1 or the program cannot be attached.
    """
    first = _udp_socket(host, port)
    if workers == 1:
        return [first]
    bound_port = first.getsockname()[1]
    socks = [first] + [_udp_socket(host, bound_port) for _ in range(workers - 1)]
    try:
        attach(first, workers)
    except OSError as exc:
        log.warning(
            "cannot attach the reuseport steering program (%s): falling back to one process", exc
        )
        for sock in socks[1:]:
            sock.close()
        return [first]
    return socks
