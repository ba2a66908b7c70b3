"""UDP segmentation offload (GSO): a batch of equal-sized datagrams to one destination
as one ``sendmsg``, cut into datagrams by the kernel (``UDP_SEGMENT``, Linux >= 4.18).

One system call and one trip through the stack per up to 64 datagrams instead of one
per datagram: on loopback the receiving socket's stack runs in the sender's context,
which is where the PBox's time went with ``sendmmsg`` (docs/notes/data-path.md).

Whether GSO works is decided per destination before the first send, never learnt
from a failure mid-job: the kernel must accept ``UDP_SEGMENT`` and the interface the
route leaves by must compute checksums (``ethtool -k IF tx-checksumming``; without it
a kernel answers EIO, or (6.x) checksums and cuts the super-datagram in software, which
gains nothing; Mininet's hosts run with it off). Where it does not work the
batch goes through the ``sendmmsg`` fallback (hosts/batchio.py); an EIO that happens
anyway turns GSO off for that destination and resends the batch the other way.

:class:`GsoSender` has the :class:`~hosts.batchio.BatchSender` interface, so callers
swap one for the other; ``P4HUB_NO_GSO=1`` in the environment makes every sender use
the fallback (to compare). A loss error (a full buffer, an ICMP error, a firewall) loses
the whole super-datagram, counted as that many datagrams.
"""

from __future__ import annotations

import array
import errno
import fcntl
import ipaddress
import os
import socket
import struct
from collections.abc import Callable, Sequence

import numpy as np

from p4hub.hosts.batchio import BatchSender
from p4hub.hosts.slot_groups import group_starts

ENV_DISABLE = "P4HUB_NO_GSO"  # set (not "0"): every sender uses the sendmmsg fallback
UDP_SEGMENT = 103  # include/uapi/linux/udp.h
UDP_GRO = 104
MAX_SEGMENTS = 64  # UDP_MAX_SEGMENTS of the oldest kernels that have GSO
MAX_PAYLOAD = 65507  # one IPv4 UDP datagram's largest payload
_SIOCGIFADDR = 0x8915
_SIOCETHTOOL = 0x8946
_ETHTOOL_GTXCSUM = 0x16
_IFREQ_LEN = 40  # sizeof(struct ifreq) on 64-bit Linux
MSG_DONTWAIT = socket.MSG_DONTWAIT

_SLOT = struct.Struct("!I")  # a p4hub header's slot field, at byte 8 (hosts/wire.py)
_SLOT_END = 12
Address = tuple[str, int]
SendMsg = Callable[[list[memoryview], list[tuple[int, int, bytes]], int, Address], int]


def segments_per_send(size: int) -> int:
    """Datagrams of ``size`` bytes one GSO send may carry."""
    return max(1, min(MAX_SEGMENTS, MAX_PAYLOAD // size))


def kernel_supports_gso(sock: socket.socket) -> bool:
    """Whether the kernel knows ``UDP_SEGMENT`` (setting it to 0, "off", is harmless)."""
    try:
        sock.setsockopt(socket.SOL_UDP, UDP_SEGMENT, 0)
    except OSError:
        return False
    return True


def _interface_addresses() -> dict[str, str]:
    """IPv4 address -> interface name, for this network namespace's interfaces."""
    found: dict[str, str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            ifreq = struct.pack(f"{_IFREQ_LEN}s", name.encode()[:15])
            try:
                raw = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, ifreq)
            except OSError:
                continue  # no IPv4 address
            found[socket.inet_ntoa(raw[20:24])] = name
    return found


def egress_interface(host: str) -> str | None:
    """The interface datagrams to ``host`` leave by (``lo`` for a local address), or None
    when there is no route or it cannot be told."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))  # a route lookup; nothing is sent
            source = probe.getsockname()[0]
    except OSError:
        return None
    addresses = _interface_addresses()
    if ipaddress.IPv4Address(host).is_loopback or host in addresses:
        return next((name for addr, name in addresses.items()
                     if ipaddress.IPv4Address(addr).is_loopback), "lo")
    return addresses.get(source)


def checksum_offload(interface: str) -> bool:
    """Whether ``interface`` computes transmit checksums (``ethtool -k``'s
    tx-checksumming), which UDP GSO needs; False when it cannot be read."""
    value = array.array("I", [_ETHTOOL_GTXCSUM, 0])  # struct ethtool_value
    pointer = value.buffer_info()[0]
    ifreq = struct.pack("16sP", interface.encode()[:15], pointer).ljust(_IFREQ_LEN, b"\0")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            fcntl.ioctl(probe.fileno(), _SIOCETHTOOL, ifreq)
    except OSError:
        return False
    return bool(value[1])


def local_interface_offloads(host: str) -> bool:
    """Whether the interface that owns local address ``host`` offloads checksums (a
    wildcard or unknown address: True), i.e. whether peers on its link can send GSO."""
    name = _interface_addresses().get(host)
    return name is None or checksum_offload(name)


def path_supports_gso(host: str) -> bool:
    """Whether GSO sends to ``host`` would work: its route's interface offloads checksums."""
    interface = egress_interface(host)
    return interface is not None and checksum_offload(interface)


class GsoSender:
    """Sends runs of equal-sized datagrams to one destination with one GSO ``sendmsg``
    each where the path allows it, through ``fallback`` (sendmmsg) elsewhere.

    ``probe(host)`` says whether a destination's path takes GSO (default
    :func:`path_supports_gso`, asked once per host); ``sendmsg`` is the socket's
    (a seam for tests)."""

    def __init__(self, sock: socket.socket, capacity: int, lost_errors: Sequence[int], *,
                 probe: Callable[[str], bool] = path_supports_gso,
                 sendmsg: SendMsg | None = None) -> None:
        self.sock = sock
        self.fallback = BatchSender(sock, capacity, lost_errors)
        self.lost_errors = frozenset(lost_errors)
        self.enabled = (os.environ.get(ENV_DISABLE, "") in ("", "0")
                        and kernel_supports_gso(sock))
        self._probe = probe
        self._paths: dict[str, bool] = {}
        self._sendmsg: SendMsg = sendmsg or sock.sendmsg
        self.gso_errors = 0  # datagrams lost on a loss error of a GSO send
        self.gso_sends = 0  # GSO sendmsg calls that went out
        self.downgraded: list[str] = []  # hosts whose GSO sends failed with EIO

    @property
    def errors(self) -> int:
        """Datagrams dropped on a loss error, either way."""
        return self.gso_errors + self.fallback.errors

    def uses_gso(self, host: str) -> bool:
        """Whether sends to ``host`` go by GSO (probed on first use)."""
        if not self.enabled:
            return False
        ok = self._paths.get(host)
        if ok is None:
            ok = self._paths[host] = self._probe(host)
        return ok

    def send_rows(self, rows: memoryview | bytes | bytearray, size: int,
                  to: Address | None = None, runs: Sequence[int] = ()) -> int:
        """Send ``len(rows) // size`` back-to-back datagrams of ``size`` bytes to ``to``
        (None: the connected peer, always by the fallback); ``runs``: row indices where a
        new super-datagram must start (e.g. another PBox shard's slots). Returns how
        many went out."""
        view = memoryview(rows).cast("B")
        count = len(view) // size
        if to is None or count < 2 or not self.uses_gso(to[0]):
            return self.fallback.send_rows(view[: count * size], size, to)
        step = segments_per_send(size)
        bounds = sorted({0, count, *(r for r in runs if 0 < r < count)})
        sent = 0
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            for start in range(lo, hi, step):
                if not self._paths[to[0]]:  # an EIO turned GSO off: the rest by sendmmsg
                    return sent + self.fallback.send_rows(view[start * size : count * size],
                                                          size, to)
                end = min(hi, start + step)
                sent += self._send_run(view[start * size : end * size], size, end - start, to)
        return sent

    def send_to(self, datagrams: Sequence[tuple[bytes, Address]]) -> int:
        """Send ``(datagram, address)`` pairs: grouped by destination and size, in their
        order within each group (the PBox's results: several per worker and batch).
        Datagrams long enough to hold a p4hub header are cut into super-datagrams by
        slot group too: the destination may be another PBox (a rack's partial sums to
        its parent, the parent's results back), whose shards own slot groups."""
        groups: dict[tuple[Address, int], list[bytes]] = {}
        for data, address in datagrams:
            groups.setdefault((address, len(data)), []).append(data)
        sent = 0
        for (address, size), items in groups.items():
            if len(items) < 2 or not self.uses_gso(address[0]):
                sent += self.fallback.send_to([(data, address) for data in items])
                continue
            runs: Sequence[int] = ()
            if size >= _SLOT_END:
                runs = group_starts(np.array([_SLOT.unpack_from(d, 8)[0] for d in items]))
            sent += self.send_rows(b"".join(items), size, address, runs)
        return sent

    def _send_run(self, chunk: memoryview, size: int, n: int, to: Address) -> int:
        """One super-datagram of ``n`` segments; the fallback if the path refuses GSO."""
        control = [(socket.SOL_UDP, UDP_SEGMENT, struct.pack("=H", size))]
        while True:
            try:
                self._sendmsg([chunk], control, MSG_DONTWAIT, to)
                self.gso_sends += 1
                return n
            except InterruptedError:
                continue
            except OSError as exc:
                if exc.errno == errno.EIO:  # the path cannot checksum: never GSO there again
                    self._paths[to[0]] = False
                    self.downgraded.append(to[0])
                    return self.fallback.send_rows(chunk, size, to)
                if exc.errno in self.lost_errors:
                    self.gso_errors += n
                    return 0
                raise
