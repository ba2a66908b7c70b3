"""Batched UDP I/O: ``sendmmsg`` and ``recvmmsg`` through ctypes, one system call per batch.

Python's ``socket`` has neither, and one ``send``/``recv_into`` per datagram costs a
system call plus a few microseconds of interpreter work each: at a window of 1 KB
datagrams that, not the aggregation, was where the agents' and the PBox's time went.
Here the message headers (``struct mmsghdr``), their I/O vectors and address buffers are
allocated once per socket and pointed at the caller's buffers, so a batch moves with
one call and no copies:

* :class:`BatchSender` sends the rows of a contiguous packet array (each row one
  datagram) on a connected socket, or a list of ``(datagram, address)`` pairs on an
  unconnected one;
* :class:`BatchReceiver` receives up to ``capacity`` datagrams into a preallocated
  buffer at a fixed stride, with their lengths (a datagram longer than the stride is
  flagged, never silently cut) and, optionally, their source addresses.

Errors follow ``send``/``recv``: a send that fails with an error the caller calls a
loss (a full socket buffer, an ICMP error, a firewall's EPERM) drops that one datagram
and goes on with the rest; anything else raises ``OSError``. Linux only (the project's
hosts are); ctypes releases the GIL for the duration of each call.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
from collections.abc import Sequence

import numpy as np

MSG_DONTWAIT = 0x40
MSG_TRUNC = 0x20
_SOCKADDR_IN = struct.Struct("=H2s4s8x")  # family (host order), port and address (network order)


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [
        ("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
        ("msg_iov", ctypes.POINTER(_IoVec)), ("msg_iovlen", ctypes.c_size_t),
        ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
        ("msg_flags", ctypes.c_int),
    ]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _MsgHdr), ("msg_len", ctypes.c_uint)]


_libc = ctypes.CDLL(None, use_errno=True)
_sendmmsg = _libc.sendmmsg
_sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
_sendmmsg.restype = ctypes.c_int
_recvmmsg = _libc.recvmmsg
_recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                      ctypes.c_void_p]
_recvmmsg.restype = ctypes.c_int
_SOCKADDR_LEN = 16
_MMSGHDR_SIZE = ctypes.sizeof(_MMsgHdr)
assert _MMSGHDR_SIZE == 64 and ctypes.sizeof(_IoVec) == 16  # the numpy views below rely on it
_NAME, _NAMELEN = 0, 1  # msg_name and msg_namelen as 64-bit words of a struct mmsghdr


def sockaddr_in(address: tuple[str, int]) -> bytes:
    """The 16 bytes of a ``struct sockaddr_in`` for an IPv4 (host, port)."""
    host, port = address
    return _SOCKADDR_IN.pack(socket.AF_INET, port.to_bytes(2, "big"), socket.inet_aton(host))


def source_key(address: tuple[str, int]) -> int:
    """An IPv4 (host, port) as ``BatchReceiver.source_keys`` gives a datagram's source: the
    first 8 bytes of its sockaddr_in (family, port, address) as one native uint64."""
    return int(np.frombuffer(sockaddr_in(address)[:8], dtype=np.uint64)[0])


def _address_of(raw: bytes) -> tuple[str, int]:
    _, port, addr = _SOCKADDR_IN.unpack(raw)
    return socket.inet_ntoa(addr), int.from_bytes(port, "big")


class BatchSender:
    """Sends batches of datagrams on one socket with ``sendmmsg``.

    The message headers and I/O vectors are filled with whole-array numpy writes into
    views of the ctypes arrays (a batch of 64 costs a few microseconds of Python, not
    one attribute write per field and datagram)."""

    def __init__(self, sock: socket.socket, capacity: int, lost_errors: Sequence[int]) -> None:
        self.fd = sock.fileno()
        self.capacity = capacity
        self.lost_errors = frozenset(lost_errors)
        self.errors = 0  # datagrams dropped on an error in lost_errors
        self._iov = (_IoVec * capacity)()
        self._iov_np = np.frombuffer(memoryview(self._iov).cast("B"), dtype=np.uint64).reshape(capacity, 2)
        self._msgs = (_MMsgHdr * capacity)()
        self._msgs_at = ctypes.addressof(self._msgs)
        self._msgs_np = np.frombuffer(memoryview(self._msgs).cast("B"), dtype=np.uint64).reshape(capacity, -1)
        self._names = (ctypes.c_char * (_SOCKADDR_LEN * capacity))()
        self._names_np = np.frombuffer(memoryview(self._names).cast("B"), dtype=np.uint8).reshape(capacity, -1)
        self._name_index: dict[tuple[str, int], int] = {}
        self._name_table = np.zeros((0, _SOCKADDR_LEN), dtype=np.uint8)
        self._steps = np.arange(capacity, dtype=np.uint64)
        iov_at = ctypes.addressof(self._iov)
        for i in range(capacity):
            hdr = self._msgs[i].msg_hdr
            hdr.msg_iov = ctypes.cast(iov_at + i * ctypes.sizeof(_IoVec), ctypes.POINTER(_IoVec))
            hdr.msg_iovlen = 1

    def send_rows(self, rows: memoryview | bytes | bytearray, size: int,
                  to: tuple[str, int] | None = None) -> int:
        """Send ``len(rows) // size`` back-to-back datagrams of ``size`` bytes, all to
        ``to`` (None: the connected socket's peer); returns how many went out (the rest
        hit a loss error)."""
        view = memoryview(rows).cast("B")
        count = len(view) // size
        if not count:
            return 0
        keep = (ctypes.c_char * len(view)).from_buffer_copy(view) if view.readonly else None
        base = ctypes.addressof(keep) if keep is not None else _address(view)
        if to is None:  # connected: no destination per message
            self._msgs_np[:, _NAME] = 0
            self._msgs_np[:, _NAMELEN] = 0
        else:  # every message names the same sockaddr, the first of the names buffer
            index = self._name_id(to)  # may grow the table: look it up afterwards
            self._names_np[0] = self._name_table[index]
            self._msgs_np[:, _NAME] = ctypes.addressof(self._names)
            self._msgs_np[:, _NAMELEN] = _SOCKADDR_LEN
        self._iov_np[:, 1] = size
        sent = 0
        for lo in range(0, count, self.capacity):
            n = min(self.capacity, count - lo)
            self._iov_np[:n, 0] = base + (lo + self._steps[:n]) * size
            sent += self._flush(n)
        return sent

    def send_to(self, datagrams: Sequence[tuple[bytes, tuple[str, int]]]) -> int:
        """Send ``(datagram, (host, port))`` pairs on an unconnected socket."""
        sent = 0
        names_at = ctypes.addressof(self._names)
        self._msgs_np[:, _NAME] = names_at + self._steps * _SOCKADDR_LEN
        self._msgs_np[:, _NAMELEN] = _SOCKADDR_LEN
        for lo in range(0, len(datagrams), self.capacity):
            chunk = datagrams[lo : lo + self.capacity]
            n = len(chunk)
            joined = b"".join([data for data, _ in chunk])  # one copy, contiguous
            lengths = np.fromiter((len(data) for data, _ in chunk), dtype=np.uint64, count=n)
            base = ctypes.cast(ctypes.c_char_p(joined), ctypes.c_void_p).value or 0
            self._iov_np[:n, 0] = base + np.cumsum(lengths) - lengths
            self._iov_np[:n, 1] = lengths
            ids = [self._name_id(address) for _, address in chunk]  # may grow the table
            self._names_np[:n] = self._name_table[ids]
            sent += self._flush(n)
        return sent

    def _name_id(self, address: tuple[str, int]) -> int:
        index = self._name_index.get(address)
        if index is None:
            raw = np.frombuffer(sockaddr_in(address), dtype=np.uint8)
            self._name_table = np.vstack([self._name_table, raw])
            index = self._name_index[address] = len(self._name_table) - 1
        return index

    def _flush(self, n: int) -> int:
        """sendmmsg messages 0..n-1; a message failing with a loss error is dropped.
        Returns how many were sent."""
        done = lost = 0
        while done < n:
            got = _sendmmsg(self.fd, self._msgs_at + done * _MMSGHDR_SIZE, n - done, MSG_DONTWAIT)
            if got > 0:
                done += got
                continue
            err = ctypes.get_errno()
            if err == errno.EINTR:
                continue
            if err not in self.lost_errors:
                raise OSError(err, os.strerror(err))
            self.errors += 1
            lost += 1
            done += 1  # that datagram is lost; the others still go
        return n - lost


class BatchReceiver:
    """Receives up to ``capacity`` datagrams per call with ``recvmmsg``, into ``buffer``
    at a stride of ``stride`` bytes (datagram i lands at ``i * stride``)."""

    def __init__(self, sock: socket.socket, capacity: int, stride: int,
                 with_addresses: bool = False) -> None:
        self.fd = sock.fileno()
        self.capacity = capacity
        self.stride = stride
        self.buffer = bytearray(capacity * stride)
        self.view = memoryview(self.buffer)
        self.lengths = [0] * capacity
        self.truncated = [False] * capacity
        self.more = False  # the last receive was full: more may be waiting
        self._raw = (ctypes.c_char * len(self.buffer)).from_buffer(self.buffer)
        self._iov = (_IoVec * capacity)()
        self._msgs = (_MMsgHdr * capacity)()
        self._names = ctypes.create_string_buffer(_SOCKADDR_LEN * capacity) if with_addresses else None
        self._address_cache: dict[bytes, tuple[str, int]] = {}
        base = ctypes.addressof(self._raw)
        iov_base = ctypes.addressof(self._iov)
        for i in range(capacity):
            self._iov[i].iov_base = base + i * stride
            self._iov[i].iov_len = stride
            hdr = self._msgs[i].msg_hdr
            hdr.msg_iov = ctypes.cast(iov_base + i * ctypes.sizeof(_IoVec), ctypes.POINTER(_IoVec))
            hdr.msg_iovlen = 1
            if self._names is not None:
                hdr.msg_name = ctypes.addressof(self._names) + i * _SOCKADDR_LEN

    def receive(self, limit: int | None = None) -> int:
        """Datagrams now waiting, up to ``limit`` (default: capacity), without blocking.

        Returns how many landed; ``lengths[i]`` is datagram i's true length and
        ``truncated[i]`` says it was longer than the stride. Raises OSError for an error
        other than "nothing waiting" (the caller decides what an ICMP error means)."""
        n = min(limit or self.capacity, self.capacity)
        if self._names is not None:
            for i in range(n):
                self._msgs[i].msg_hdr.msg_namelen = _SOCKADDR_LEN
        # MSG_TRUNC: a longer datagram reports its true length (UDP), not the stride
        got = _recvmmsg(self.fd, ctypes.addressof(self._msgs), n, MSG_DONTWAIT | MSG_TRUNC, None)
        self.more = got == n
        if got < 0:
            err = ctypes.get_errno()
            if err in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
                return 0
            raise OSError(err, os.strerror(err))
        for i in range(got):
            msg = self._msgs[i]
            self.lengths[i] = msg.msg_len
            self.truncated[i] = bool(msg.msg_hdr.msg_flags & MSG_TRUNC)
        return got

    def source_keys(self, n: int) -> np.ndarray:
        """The sources of datagrams 0..n-1 of the last ``receive`` as ``source_key``s
        (with_addresses only): one array operation, no per-datagram Python."""
        assert self._names is not None
        words = np.frombuffer(memoryview(self._names).cast("B"), dtype=np.uint64, count=2 * n)
        return words[::2]

    def address(self, i: int) -> tuple[str, int]:
        """Source (host, port) of datagram i of the last ``receive`` (with_addresses only)."""
        assert self._names is not None
        raw = ctypes.string_at(ctypes.addressof(self._names) + i * _SOCKADDR_LEN, _SOCKADDR_LEN)
        cached = self._address_cache.get(raw)
        if cached is None:
            cached = self._address_cache[raw] = _address_of(raw)
        return cached


def _address(view: memoryview) -> int:
    """The address of a writable buffer's first byte."""
    return ctypes.addressof(ctypes.c_char.from_buffer(view))
