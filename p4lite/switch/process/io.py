"""Packet I/O for the switch process: raw AF_PACKET sockets, or pcap files (--use-files).

Each ``-i N@iface`` port gets an AF_PACKET socket bound to the interface,
promiscuous, with PACKET_IGNORE_OUTGOING so the switch never reads back what
it sent, a large receive buffer so bursts wait in the kernel rather than being
lost, and the NIC offloads turned off with ethtool (a veth hands over
un-checksummed, GRO-merged super-frames otherwise). ``--pcap DIR`` records
``<iface>_in.pcap`` / ``<iface>_out.pcap`` like BMv2.

With ``PacketLoop(rings=True)`` (the switch's ``--packet-io mmap``) frames move through
PACKET_MMAP rings (ring.py: TPACKET_V2, an RX and a TX ring per port in one mmap): a
drained batch costs no system call per frame, and the frames a loop turn sends to a
port leave with one ``send()`` (made by the transmit thread, so the kernel's work for
them overlaps the next batch's processing). Where the kernel refuses the rings (logged
once) a port falls back to the default path: one ``recv``/``send`` system call per
frame, the sends in order on the same thread. The default stays per frame until the
rings measure faster (docs/notes/switch-process.md).

The loop itself (``PacketLoop``) is a plain epoll loop; frames go to a
``deliver(frame, port)`` callback (the Device), and the Device calls
``send(port, frame)`` back. Nothing here raises on a bad frame or a failed send: a full
TX ring or socket buffer drops the frame and counts it, an interface that disappears
under the switch is logged once and its port goes quiet while the others go on.
"""

from __future__ import annotations

import errno
import heapq
import logging
import mmap
import os
import select
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from p4lite.switch.process.pcap import PcapWriter, read_pcap
from p4lite.switch.process.ring import (
    PACKET_RX_RING,
    PACKET_TX_RING,
    PACKET_VERSION,
    TPACKET_V2,
    RxRing,
    TxRing,
    layout_for,
)

log = logging.getLogger("p4lite.switch.io")

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4  # sll_pkttype of our own transmissions (older kernels)
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
RCVBUF_BYTES = 32 << 20
MAX_FRAME = 65535
BATCH = 64  # frames drained from one socket before looking at the others
IDLE_POLL = 0.01  # s: how often timers (digest timeouts) run when no frame arrives
# --pcap files are buffered (a flush per frame cost a quarter of the switch's CPU)
# and flushed when the loop goes idle, or at this interval under steady traffic,
# so a reader sees every frame within about this long.
PCAP_FLUSH_INTERVAL = 0.1
_OFFLOADS = ("rx", "tx", "sg", "tso", "gso", "gro", "lro", "rxvlan", "txvlan")
# Per port, 2 KiB slots at MTU 1500: the RX ring holds what the 32 MB socket buffer held
# before (a 20 000-frame burst arriving 3x faster than the switch forwards: 16 384
# slots); the TX ring 2048 frames between flushes. A full ring drops and counts.
RX_RING_BYTES = 32 << 20
TX_RING_BYTES = 4 << 20
_GONE_ERRNOS = (errno.ENETDOWN, errno.ENODEV, errno.ENXIO)
_fallback_logged = False  # "no PACKET_MMAP rings" is said once per process

Deliver = Callable[[bytes, int], None]
DeliverBatch = Callable[[list[bytes], int], None]


class PortError(OSError):
    """An interface that cannot be opened."""


def disable_offloads(iface: str) -> None:
    """Best effort: ethtool -K iface rx off tx off ... (missing ethtool or feature is fine)."""
    ethtool = shutil.which("ethtool") or "/usr/sbin/ethtool"
    if not os.path.exists(ethtool):
        return
    for feature in _OFFLOADS:
        subprocess.run([ethtool, "-K", iface, feature, "off"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)


class Port:
    """One switch port: its socket (or none, for --use-files) and its pcap recorders."""

    def __init__(self, number: int, iface: str) -> None:
        self.number = number
        self.iface = iface
        self.sock: socket.socket | None = None
        self.pcap_in: PcapWriter | None = None
        self.pcap_out: PcapWriter | None = None
        self.rx = self.tx = self.tx_errors = 0
        self.tx_dropped = 0  # frames refused by a full TX ring (or sent to a vanished port)
        self.tx_error_kinds: set[int | None] = set()
        self.rx_ring: RxRing | None = None
        self.tx_ring: TxRing | None = None
        self._map: mmap.mmap | None = None
        self.tx_lock = threading.Lock()  # TX ring puts (the Device already serializes them)
        self.flush_queued = False  # a flush of the TX ring is queued for the transmit thread
        self.gone = False  # the interface disappeared: nothing more in or out
        self.tx_full_logged = False
        # True once PACKET_IGNORE_OUTGOING took: the kernel then never hands us our own
        # transmissions, so recv (no address tuple) replaces recvfrom + the pkttype check
        self.ignores_outgoing = False

    def open_socket(self, rings: bool = True) -> None:
        sock = self._new_socket()
        if rings:
            try:
                self._map_rings(sock)
            except OSError as exc:  # an old kernel, or no room: the per-frame path
                sock.close()
                self.rx_ring = self.tx_ring = None
                _log_fallback(self.iface, exc)
                sock = self._new_socket()
        disable_offloads(self.iface)
        self.sock = sock

    def _new_socket(self) -> socket.socket:
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except OSError as exc:
            raise PortError(f"port {self.number}: cannot open a raw socket: {exc}") from None
        try:
            sock.bind((self.iface, ETH_P_ALL))
            ifindex = socket.if_nametoindex(self.iface)
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
        except OSError as exc:
            sock.close()
            raise PortError(f"port {self.number}: cannot bind to {self.iface}: {exc}") from None
        try:
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            self.ignores_outgoing = True
        except OSError:
            pass  # an old kernel: recvfrom filters outgoing frames by their pkttype instead
        for level, opt, value in ((socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES),
                                  (socket.SOL_SOCKET, SO_SNDBUFFORCE, RCVBUF_BYTES)):
            try:
                sock.setsockopt(level, opt, value)
            except OSError:
                pass  # no CAP_NET_ADMIN: the default buffer sizes
        sock.setblocking(False)
        return sock

    def _map_rings(self, sock: socket.socket) -> None:
        try:
            mtu = int(Path(f"/sys/class/net/{self.iface}/mtu").read_text())
        except (OSError, ValueError):
            mtu = 1500
        rx, tx = layout_for(mtu, RX_RING_BYTES), layout_for(mtu, TX_RING_BYTES)
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, rx.request())
        sock.setsockopt(SOL_PACKET, PACKET_TX_RING, tx.request())
        self._map = mmap.mmap(sock.fileno(), rx.size_bytes + tx.size_bytes, mmap.MAP_SHARED,
                              mmap.PROT_READ | mmap.PROT_WRITE)
        self.rx_ring = RxRing(self._map, rx, 0, skip_outgoing=not self.ignores_outgoing)
        self.tx_ring = TxRing(self._map, tx, rx.size_bytes)

    def flush(self) -> None:
        """Send every frame queued in the TX ring (one system call); errors are counted."""
        self.flush_queued = False  # first: a frame put from now on asks for a new flush
        if self.gone or self.sock is None:
            return
        try:
            self.sock.send(b"")
        except (BlockingIOError, InterruptedError):
            pass  # nothing could go now: the frames stay queued for the next flush
        except OSError as exc:
            self.tx_error(exc)

    def tx_error(self, exc: OSError) -> None:
        self.tx_errors += 1
        if exc.errno not in self.tx_error_kinds:  # once per kind: no log flood
            self.tx_error_kinds.add(exc.errno)
            log.warning("send on %s failed: %s (further such errors not logged)", self.iface, exc)

    def record(self, pcap_dir: Path) -> None:
        self.pcap_in = PcapWriter(pcap_dir / f"{self.iface}_in.pcap", flush=False)
        self.pcap_out = PcapWriter(pcap_dir / f"{self.iface}_out.pcap", flush=False)

    def flush_pcaps(self) -> None:
        for f in (self.pcap_in, self.pcap_out):
            if f is not None:
                f.flush()

    def close(self) -> None:
        for f in (self.pcap_in, self.pcap_out):
            if f is not None:
                f.close()
        if self._map is not None:
            self.rx_ring = self.tx_ring = None
            self._map.close()
            self._map = None
        if self.sock is not None:
            self.sock.close()


def _log_fallback(iface: str, exc: OSError) -> None:
    global _fallback_logged
    if not _fallback_logged:
        _fallback_logged = True
        log.warning("PACKET_MMAP rings refused on %s (%s): one recv/send system call per frame "
                    "(said once for all ports)", iface, exc)


def transmit(port: Port, frame: bytes | None) -> None:
    """Send one frame on a port without rings, or (``None``) flush a port's TX ring."""
    if frame is None:
        port.flush()
        return
    try:
        # Only ports with a socket get here (PacketLoop.send checks port.sock before it
        # submits); re-checking per frame would cost on the hot path, hence the ignore.
        port.sock.send(frame)  # type: ignore[union-attr]
        port.tx += 1
    except OSError as exc:
        port.tx_error(exc)


class Transmitter:
    """One thread sending queued frames in order (FIFO over all ports), and flushing the
    TX rings it is asked to (a ``None`` frame)."""

    def __init__(self) -> None:
        self._queue: deque[tuple[Port, bytes | None]] = deque()
        self._wake = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="p4lite-tx", daemon=True)
        self._thread.start()

    def submit(self, port: Port, frame: bytes | None) -> None:
        self._queue.append((port, frame))
        if not self._wake.is_set():
            self._wake.set()

    def request_flush(self, port: Port) -> None:
        """Flush ``port``'s TX ring soon (at most one such request queued per port)."""
        if not port.flush_queued:
            port.flush_queued = True
            self.submit(port, None)

    def _run(self) -> None:
        queue = self._queue
        while True:
            try:
                port, frame = queue.popleft()
            except IndexError:
                if self._closing:
                    return
                self._wake.clear()
                if not queue:  # re-check: a submit may have raced the clear
                    self._wake.wait(0.1)
                continue
            transmit(port, frame)

    def close(self) -> None:
        """Send what is queued, then stop."""
        self._closing = True
        self._wake.set()
        self._thread.join(timeout=5)


class PacketLoop:
    """The switch's I/O: ``run`` blocks until ``stop`` is called (from a signal handler)."""

    def __init__(self, ports: dict[int, str], deliver: Deliver, *, pcap_dir: str | None = None,
                 use_files: int | None = None, tick: Callable[[], None] | None = None,
                 next_wait: Callable[[], float | None] | None = None,
                 dump_bytes: int = 0, tx_thread: bool = True,
                 deliver_batch: DeliverBatch | None = None, rings: bool = False) -> None:
        self.ports = {n: Port(n, iface) for n, iface in ports.items()}
        self.rings = rings
        self._dirty: list[Port] = []  # ports with frames put in their TX ring since the last flush
        self._poller: select.epoll | None = None
        self._loop_thread: int | None = None
        # frames drained from one socket in one go (the Device takes its lock once for them)
        self.deliver_batch: DeliverBatch = deliver_batch or self._deliver_each
        # send() on a veth runs the peer's receive path in the caller (~20 us): a
        # transmit thread overlaps it with the next packets' processing (the GIL
        # is released during the system call).
        self.transmitter = Transmitter() if tx_thread and use_files is None else None
        self.deliver = deliver
        self.tick = tick or (lambda: None)
        # seconds until queued work is due (rate-limited egress); None: nothing queued
        self.next_wait = next_wait or (lambda: None)
        self.use_files = use_files
        self.dump_bytes = dump_bytes
        self._trace = False  # per-packet log lines, decided once at open() (-L debug/trace)
        self.pcap_dir = Path(pcap_dir) if pcap_dir is not None else None
        self.start_ns = time.monotonic_ns()
        self._stopping = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def now_us(self) -> int:
        return (time.monotonic_ns() - self.start_ns) // 1000

    def open(self) -> None:
        self._trace = log.isEnabledFor(logging.DEBUG)
        if self.pcap_dir is not None:
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
        for port in self.ports.values():
            if self.use_files is None:
                port.open_socket(self.rings)
                log.info("Adding interface %s as port %d%s", port.iface, port.number,
                         "" if port.rx_ring is not None else " (per-frame recv/send)")
            else:
                port.pcap_out = PcapWriter(Path(f"{port.iface}_out.pcap"))
            if self.pcap_dir is not None and self.use_files is None:
                port.record(self.pcap_dir)

    def send(self, port_no: int, frame: bytes) -> None:
        """Transmit on a port; a port with no interface discards silently (as BMv2 does)."""
        port = self.ports.get(port_no)
        if port is None:
            return
        if port.pcap_out is not None:
            port.pcap_out.write(frame, self.now_us())
        if self._trace:
            log.debug("packet out on port %d (%s), %d bytes%s", port_no, port.iface, len(frame),
                      ": " + frame[:self.dump_bytes].hex() if self.dump_bytes else "")
        if port.sock is None:
            port.tx += 1
        elif port.tx_ring is not None:
            self._put(port, frame)
        elif self.transmitter is not None:
            self.transmitter.submit(port, frame)
        else:
            transmit(port, frame)

    def _put(self, port: Port, frame: bytes) -> None:
        """Queue a frame in the port's TX ring; the loop flushes it at the end of its turn."""
        ring = port.tx_ring
        assert ring is not None
        if port.gone:
            port.tx_dropped += 1
            return
        with port.tx_lock:
            ok = ring.put(frame)
        if not ok:
            port.tx_dropped += 1
            if not port.tx_full_logged:
                port.tx_full_logged = True
                log.warning("TX ring of %s full (or a frame longer than its %d-byte slots): "
                            "frames dropped and counted (logged once per port)",
                            port.iface, ring.max_frame)
            return
        port.tx += 1
        if port not in self._dirty:
            self._dirty.append(port)
            if self._loop_thread is not None and threading.get_ident() != self._loop_thread:
                self._wake()  # a gRPC thread (PacketOut): do not wait for the loop's next turn

    def flush(self) -> None:
        """Send what this turn put in the TX rings: one system call per port, on the
        transmit thread when there is one."""
        dirty, self._dirty = self._dirty, []
        for port in dirty:
            if self.transmitter is not None:
                self.transmitter.request_flush(port)
            else:
                port.flush()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass  # the pipe is full: the loop is being woken anyway

    def stop(self) -> None:
        """Safe from a signal handler: sets a flag and wakes the loop."""
        self._stopping = True
        self._wake()

    def run(self) -> None:
        if self.use_files is not None:
            self._replay_files()
        self._loop_thread = threading.get_ident()
        poller = self._poller = select.epoll()
        by_fd: dict[int, Port] = {}
        for port in self.ports.values():
            if port.sock is not None:
                poller.register(port.sock.fileno(), select.EPOLLIN)
                by_fd[port.sock.fileno()] = port
        poller.register(self._wake_r, select.EPOLLIN)
        recording = self.pcap_dir is not None and self.use_files is None
        last_flush = time.monotonic()
        try:
            while not self._stopping:
                wait = self.next_wait()
                timeout = IDLE_POLL if wait is None else min(IDLE_POLL, max(0.0, wait))
                events = poller.poll(timeout)
                for fd, flags in events:
                    ready = by_fd.get(fd)
                    if ready is None:
                        self._drain_wake_pipe()
                        continue
                    if flags & (select.EPOLLERR | select.EPOLLHUP):
                        self._socket_error(ready)
                    if flags & select.EPOLLIN and not ready.gone:
                        self._drain(ready)
                        # Serve egress after each batch: a queue never holds more than
                        # one batch per port, so bursts from several ports are not tail-dropped.
                        self.tick()
                        self.flush()
                self.tick()
                self.flush()
                if recording and (not events or time.monotonic() - last_flush >= PCAP_FLUSH_INTERVAL):
                    for port in self.ports.values():
                        port.flush_pcaps()
                    last_flush = time.monotonic()
        finally:
            self._poller = None
            poller.close()

    def _drain_wake_pipe(self) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except OSError:
            pass  # empty (EAGAIN)

    def _socket_error(self, port: Port) -> None:
        """EPOLLERR: read (and so clear) the socket's error; an interface that no longer
        exists takes its port out of the loop, logged once."""
        if port.sock is None:
            return
        try:
            code = port.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        except OSError as exc:
            code = exc.errno or 0
        if code:
            self._port_failed(port, OSError(code, os.strerror(code)))

    def _port_failed(self, port: Port, exc: OSError) -> None:
        if exc.errno in _GONE_ERRNOS and not _interface_exists(port.iface):
            if not port.gone:
                port.gone = True
                log.warning("port %d: interface %s went away (%s); the other ports go on",
                            port.number, port.iface, exc.strerror)
                if self._poller is not None and port.sock is not None:
                    try:
                        self._poller.unregister(port.sock.fileno())
                    except OSError:
                        pass
            return
        if exc.errno not in port.tx_error_kinds:  # e.g. ENETDOWN of a link set down: once
            port.tx_error_kinds.add(exc.errno)
            log.warning("port %d (%s): %s (further such errors not logged)", port.number,
                        port.iface, exc)

    def _drain(self, port: Port) -> None:
        sock = port.sock
        assert sock is not None
        frames: list[bytes] = []
        try:
            if port.rx_ring is not None:
                frames = port.rx_ring.read(BATCH)
            elif port.ignores_outgoing:
                recv = sock.recv
                for _ in range(BATCH):
                    frames.append(recv(MAX_FRAME))
            else:
                recvfrom = sock.recvfrom
                for _ in range(BATCH):
                    frame, addr = recvfrom(MAX_FRAME)
                    if addr[2] != PACKET_OUTGOING:
                        frames.append(frame)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self._port_failed(port, exc)
        if not frames:
            return
        port.rx += len(frames)
        if port.pcap_in is not None or self._trace:
            for frame in frames:
                self._record_in(port, frame)
        self.deliver_batch(frames, port.number)

    def _deliver_each(self, frames: list[bytes], port_no: int) -> None:
        for frame in frames:
            self.deliver(frame, port_no)

    def _record_in(self, port: Port, frame: bytes) -> None:
        if port.pcap_in is not None:
            port.pcap_in.write(frame, self.now_us())
        if self._trace:
            log.debug("packet in on port %d (%s), %d bytes%s", port.number, port.iface, len(frame),
                      ": " + frame[:self.dump_bytes].hex() if self.dump_bytes else "")

    def _receive(self, port: Port, frame: bytes) -> None:
        port.rx += 1
        self._record_in(port, frame)
        self.deliver(frame, port.number)

    def _replay_files(self) -> None:
        """--use-files WAIT: after WAIT seconds feed every <iface>_in.pcap, oldest first.

        Frames with the same timestamp arrive together: all of them are received
        before the queues are served, so priority queueing applies among them.
        """
        deadline = time.monotonic() + (self.use_files or 0)
        while not self._stopping and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        streams = []
        for port in self.ports.values():
            path = Path(f"{port.iface}_in.pcap")
            if path.exists():
                streams.append([(ts, port.number, frame) for ts, frame in read_pcap(path)])
        last_ts = None
        for ts, port_no, frame in heapq.merge(*streams, key=lambda r: (r[0], r[1])):
            if self._stopping:
                return
            if last_ts is not None and ts != last_ts:
                self.tick()
            last_ts = ts
            self._receive(self.ports[port_no], frame)
        self.tick()

    def close(self) -> None:
        self.flush()
        if self.transmitter is not None:
            self.transmitter.close()
        for port in self.ports.values():
            port.close()
        os.close(self._wake_r)
        os.close(self._wake_w)


def _interface_exists(iface: str) -> bool:
    try:
        socket.if_nametoindex(iface)
    except OSError:
        return False
    return True
