"""UDP receive offload (``UDP_GRO``): super-datagrams read whole, cut into datagrams here.

With ``UDP_GRO`` on, a socket is handed a GSO super-datagram (hosts/gso.py) as it was
sent, one buffer plus a control message giving the segment size, instead of the kernel
cutting it into one buffer per datagram in the *sender's* context (on loopback the
receive path runs there: that cutting was most of what a GSO send still cost the
PBox). :class:`GroReceiver` reads up to ``messages`` such buffers with one
``recvmmsg`` and lays their datagrams out at a fixed stride, like
:class:`~hosts.batchio.BatchReceiver` (same attributes: ``view``, ``stride``,
``lengths``, ``truncated``, ``address``), so a caller takes either.

Datagrams that were not coalesced (a peer without GSO, single results) arrive one per
buffer and cost a buffer each; :func:`receiver` picks GRO only where the kernel has it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket

import numpy as np

from p4hub.hosts.batchio import (
    _MMSGHDR_SIZE,
    _SOCKADDR_LEN,
    MSG_DONTWAIT,
    BatchReceiver,
    _address_of,
    _IoVec,
    _MMsgHdr,
    _recvmmsg,
)
from p4hub.hosts.gso import ENV_DISABLE, UDP_GRO

BUFFER = 65536  # one super-datagram: at most an IPv4 datagram's 65535 bytes
_CONTROL = 32  # CMSG_SPACE(sizeof(int)): one UDP_GRO control message
_MSG_CONTROLLEN = 5  # msg_controllen as the 5th 64-bit word of a struct mmsghdr
_MSG_LEN = 14  # msg_len as the 14th 32-bit word (byte 56)
MAX_SEGMENTS = 64  # segments of one super-datagram kept (the kernel's GRO limit)


class GroReceiver:
    """Receives up to ``messages`` (super-)datagrams per ``recvmmsg`` with UDP_GRO on,
    and presents their datagrams at ``stride`` bytes apart. ``setsockopt`` raises
    OSError where the kernel lacks UDP_GRO (use :func:`receiver`)."""

    def __init__(self, sock: socket.socket, messages: int, stride: int,
                 with_addresses: bool = False) -> None:
        sock.setsockopt(socket.SOL_UDP, UDP_GRO, 1)
        self.fd = sock.fileno()
        self.messages = messages
        self.stride = stride
        self.capacity = messages * MAX_SEGMENTS
        self.buffer = bytearray(self.capacity * stride)
        self.view = memoryview(self.buffer)
        self.lengths = [0] * self.capacity
        self.truncated = [False] * self.capacity
        self.more = False  # the last receive filled every buffer: more may be waiting
        self.dropped = 0  # segments past MAX_SEGMENTS of one super-datagram (not ours)
        self._from = [0] * self.capacity  # datagram -> the buffer it came in
        self._raw = bytearray(messages * BUFFER)
        self._raw_view = memoryview(self._raw)
        self._raw_c = (ctypes.c_char * len(self._raw)).from_buffer(self._raw)
        self._control = ctypes.create_string_buffer(messages * _CONTROL)
        self._control_np = np.frombuffer(memoryview(self._control).cast("B"),
                                         dtype=np.int32).reshape(messages, -1)
        self._iov = (_IoVec * messages)()
        self._msgs = (_MMsgHdr * messages)()
        self._msgs_np = np.frombuffer(memoryview(self._msgs).cast("B"), dtype=np.uint64)
        self._names = ctypes.create_string_buffer(_SOCKADDR_LEN * messages) if with_addresses else None
        self._address_cache: dict[bytes, tuple[str, int]] = {}
        base, iov_at = ctypes.addressof(self._raw_c), ctypes.addressof(self._iov)
        for j in range(messages):
            self._iov[j].iov_base = base + j * BUFFER
            self._iov[j].iov_len = BUFFER
            hdr = self._msgs[j].msg_hdr
            hdr.msg_iov = ctypes.cast(iov_at + j * ctypes.sizeof(_IoVec), ctypes.POINTER(_IoVec))
            hdr.msg_iovlen = 1
            hdr.msg_control = ctypes.addressof(self._control) + j * _CONTROL
            if self._names is not None:
                hdr.msg_name = ctypes.addressof(self._names) + j * _SOCKADDR_LEN

    def receive(self, limit: int | None = None) -> int:
        """Datagrams now waiting (whole buffers, so possibly more than ``limit``, at most
        ``capacity``), without blocking; as BatchReceiver.receive."""
        m = self.messages if limit is None else max(1, min(self.messages, limit))
        words = self._msgs_np.reshape(self.messages, _MMSGHDR_SIZE // 8)
        words[:m, _MSG_CONTROLLEN] = _CONTROL
        if self._names is not None:
            words[:m, 1] = _SOCKADDR_LEN  # msg_namelen (the upper half is padding)
        got = _recvmmsg(self.fd, ctypes.addressof(self._msgs), m, MSG_DONTWAIT, None)
        if got < 0:
            err = ctypes.get_errno()
            self.more = False
            if err in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
                return 0
            raise OSError(err, os.strerror(err))
        self.more = got == m
        sizes = self._msgs_np.view(np.uint32).reshape(self.messages, -1)[:got, _MSG_LEN].tolist()
        control = self._control_np[:got]
        gro = ((words[:got, _MSG_CONTROLLEN] >= 20) & (control[:, 2] == socket.SOL_UDP)
               & (control[:, 3] == UDP_GRO))
        segs = np.where(gro, control[:, 4], 0).tolist()
        n, stride, raw, out = 0, self.stride, self._raw_view, self.view
        for j, (size, seg) in enumerate(zip(sizes, segs, strict=True)):
            src = raw[j * BUFFER : j * BUFFER + size]
            if not seg or seg >= size:  # one datagram
                keep = min(size, stride)
                out[n * stride : n * stride + keep] = src[:keep]
                self.lengths[n], self.truncated[n], self._from[n] = size, size > stride, j
                n += 1
                continue
            k = -(-size // seg)
            if k > MAX_SEGMENTS:
                self.dropped += k - MAX_SEGMENTS
                k, size = MAX_SEGMENTS, MAX_SEGMENTS * seg
            if seg == stride:  # the common case: already laid out at the stride
                out[n * stride : n * stride + size] = src
                for i in range(n, n + k):
                    self.lengths[i], self.truncated[i], self._from[i] = seg, False, j
                self.lengths[n + k - 1] = size - (k - 1) * seg
            else:
                for i in range(k):
                    part = min(seg, size - i * seg)
                    keep = min(part, stride)
                    at = (n + i) * stride
                    out[at : at + keep] = src[i * seg : i * seg + keep]
                    self.lengths[n + i], self.truncated[n + i] = part, part > stride
                    self._from[n + i] = j
            n += k
        return n

    def source_keys(self, n: int) -> np.ndarray:
        """The sources of datagrams 0..n-1 of the last ``receive`` as ``source_key``s
        (with_addresses only), as BatchReceiver.source_keys: each datagram's is its
        buffer's (a super-datagram's segments share one sender)."""
        assert self._names is not None
        words = np.frombuffer(memoryview(self._names).cast("B"), dtype=np.uint64,
                              count=2 * self.messages)
        return words[::2][np.asarray(self._from[:n], dtype=np.intp)]

    def address(self, i: int) -> tuple[str, int]:
        """Source (host, port) of datagram i of the last ``receive`` (with_addresses only)."""
        assert self._names is not None
        j = self._from[i]
        raw = ctypes.string_at(ctypes.addressof(self._names) + j * _SOCKADDR_LEN, _SOCKADDR_LEN)
        cached = self._address_cache.get(raw)
        if cached is None:
            cached = self._address_cache[raw] = _address_of(raw)
        return cached


def receiver(sock: socket.socket, capacity: int, stride: int,
             with_addresses: bool = False) -> GroReceiver | BatchReceiver:
    """A GroReceiver of ``capacity`` buffers where the kernel has UDP_GRO (and
    ``P4HUB_NO_GSO`` is not set), else a BatchReceiver of ``capacity`` datagrams."""
    if os.environ.get(ENV_DISABLE, "") in ("", "0"):
        try:
            return GroReceiver(sock, capacity, stride, with_addresses)
        except OSError:
            pass
    return BatchReceiver(sock, capacity, stride, with_addresses)
