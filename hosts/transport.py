"""The UDP adapter around a Session: one socket, one thread, nothing else.

The thread owns the session (no locks on the hot path): it runs the commands other
threads submit (``submit``), sends the packet arrays the session wants to send (the
rows of the array are the datagrams, no copies) as segmentation-offload super-datagrams
of one slot group each where the path to the aggregator has the offload (hosts/gso.py,
hosts/slot_groups.py), else with one ``sendmmsg`` per batch (hosts/batchio.py), drains the datagrams waiting on the socket with ``recvmmsg`` into a
preallocated buffer and hands each batch to ``Session.receive_batch``, fires timers, and
sleeps in ``select`` until the session's next timer, a datagram or a wake-up. Events go
to the ``on_event`` callback, on this thread.

The socket is not connected: a job split over several aggregators (hosts/routes.py)
sends each batch to its route's aggregator (``aggregator`` is the default one, a
route's ``None``) and gets results from all of them; the session checks every result's
header. Send failures (a full socket buffer, a firewall) count as losses: the session's
retransmission and deadline handle them like any other loss.

Results are taken only from an address the agent sends to (the default aggregator and
every route's, as it has sent to them): a datagram from anywhere else is counted foreign
and never reaches the session, so a host on the data network cannot hand a worker a
forged sum (the switch already drops anything claiming an aggregator's address from
another port: docs/DESIGN.md §8).
"""

from __future__ import annotations

import errno
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable, Hashable

import numpy as np

from p4hub.hosts import gro
from p4hub.hosts.batchio import BatchReceiver, source_key
from p4hub.hosts.errors import AllreduceError, TransportError
from p4hub.hosts.events import Event
from p4hub.hosts.gro import GroReceiver
from p4hub.hosts.gso import GsoSender
from p4hub.hosts.session import Session
from p4hub.hosts.slot_groups import group_starts
from p4hub.hosts.wire import HEADER_LEN

BATCH = 512  # datagrams read per wake-up at most
RECV_BATCH = 64  # datagrams per recvmmsg call
RECV_MESSAGES = 16  # super-datagrams per recvmmsg call with UDP_GRO (hosts/gro.py)
SEND_BATCH = 64  # datagrams per sendmmsg call
# Interrupt moderation: a wake-up that found only a few results while many are in flight
# waits once and drains again. Every loop turn costs ~100-200 us of numpy bookkeeping
# whatever its batch, and on a paced link results arrive one by one, so turns of one
# result made that the agent's main cost. The wait is a quarter of the smoothed round
# trip (clamped): a window's results spread over a round trip, so it gathers about
# W/4 of them, and the 3/4 of the window still queued on the links keeps them busy.
# Measured (256 lanes, 2 MB): 8 workers at 5 Mbit/s 1.36 -> 1.24x the floor, 4 workers
# at 20 Mbit/s 2.5 -> 1.6x (an eighth and 2 ms at most before).
COALESCE_BELOW = 8
COALESCE_WAIT_MIN = 0.0002
COALESCE_WAIT_MAX = 0.008
SOCKET_BUFFER = 4 << 20  # absorbs a window of results from every slot at once
_ICMP_ERRORS = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)
# A netfilter DROP on OUTPUT (how a lossy link is emulated, or a host firewall)
# answers EPERM: to the protocol that is a packet lost on the wire.
_LOST_ON_SEND = (errno.EAGAIN, errno.ENOBUFS, errno.EPERM, *_ICMP_ERRORS)


class UdpTransport:
    """Drive ``session`` over UDP to ``aggregator`` from a background thread."""

    def __init__(
        self,
        session: Session,
        aggregator: tuple[str, int],
        on_event: Callable[[Event], None],
        *,
        bind: tuple[str, int] = ("0.0.0.0", 0),
        on_crash: Callable[[str], None] | None = None,
        name: str = "p4hub-agent",
    ) -> None:
        self.session = session
        self._on_event = on_event
        self._on_crash = on_crash
        self._sock, self._default = _open_socket(aggregator, bind)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._commands: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._sender = GsoSender(self._sock, SEND_BATCH, _LOST_ON_SEND)
        # results come back whole from a PBox over a path with the offload: read them so
        self._receiver: GroReceiver | BatchReceiver = (
            gro.receiver(self._sock, RECV_MESSAGES, session.packet_len, with_addresses=True)
            if self._sender.uses_gso(self._default[0])
            else BatchReceiver(self._sock, RECV_BATCH, session.packet_len,
                               with_addresses=True))
        self._sent_to: set[tuple[str, int]] = {self._default}  # where results may come from
        self._aggregators = np.array([source_key(self._default)], dtype=np.uint64)
        self.foreign_sources = 0  # datagrams dropped for their source address
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def send_errors(self) -> int:
        """Datagrams lost on send (a full buffer, an ICMP error, a firewall)."""
        return self._sender.errors

    @property
    def local_address(self) -> tuple[str, int]:
        return self._sock.getsockname()

    def submit(self, command: Callable[[], None]) -> None:
        """Run ``command`` on the transport thread (commands run in submission order)."""
        if self._stopping:
            raise AllreduceError("the agent is closed")
        self._commands.put(command)
        self._wake()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread and close the socket; pending work is abandoned."""
        self._stopping = True
        self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        for s in (self._sock, self._wake_r, self._wake_w):
            s.close()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # already awake (buffer full) or closing

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # a bug must fail the callers, not hang them
            self._stopping = True
            if self._on_crash is not None:
                self._on_crash(f"transport thread crashed: {exc!r}")
            raise

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._sock, selectors.EVENT_READ, "udp")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        session = self.session
        while not self._stopping:
            now = time.monotonic()
            self._run_commands()
            self._send(session.routed_packets(now))
            self._dispatch_events()
            timer = session.get_timer()
            wait = None if timer is None else max(0.0, timer - time.monotonic())
            for key, _ in sel.select(wait):
                if key.data == "udp":
                    got = self._drain_socket()
                    if got < COALESCE_BELOW <= session.in_flight:
                        time.sleep(self._coalesce_wait())
                        self._drain_socket()
                else:
                    self._drain_wake()
            timer = session.get_timer()
            now = time.monotonic()
            if timer is not None and now >= timer:
                session.handle_timer(now)
        sel.close()

    def _run_commands(self) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            command()

    def _dispatch_events(self) -> None:
        while (event := self.session.next_event()) is not None:
            self._on_event(event)

    def _send(self, batches: list[tuple[Hashable, np.ndarray]]) -> None:
        sender = self._sender
        for to, batch in batches:
            address: tuple[str, int] = self._default if to is None else to  # type: ignore[assignment]
            if address not in self._sent_to:  # a new route's aggregator (rare)
                self._sent_to.add(address)
                self._aggregators = np.array([source_key(a) for a in self._sent_to],
                                             dtype=np.uint64)
            # a super-datagram never spans two slot groups: a PBox shards by group
            runs = (group_starts(batch["hdr"]["slot"])
                    if batch.size > 1 and sender.uses_gso(address[0]) else ())
            sender.send_rows(batch.data, batch.dtype.itemsize, address, runs)

    def _coalesce_wait(self) -> float:
        srtt = self.session.smoothed_rtt
        wait = COALESCE_WAIT_MIN if srtt is None else srtt / 4
        return min(max(wait, COALESCE_WAIT_MIN), COALESCE_WAIT_MAX)

    def _drain_socket(self) -> int:
        """Read every waiting datagram (up to BATCH), a recvmmsg batch at a time, and hand
        each batch over at once; returns how many were read."""
        total = 0
        while total < BATCH:
            try:
                got = self._receiver.receive()
            except OSError as exc:  # an ICMP error for an earlier send: a loss like any other
                if exc.errno not in _ICMP_ERRORS:
                    raise
                continue
            if got:
                self._deliver(got)
            total += got
            if not self._receiver.more:
                break
        return total

    def _deliver(self, n: int) -> None:
        """Datagrams 0..n-1 of the receiver's buffer to the session: runs of well-sized
        ones as one batch each, the header-only DONEs (wire version 3) as one batch; any
        other size alone (the session counts it foreign)."""
        rx, size, now = self._receiver, self.session.packet_len, time.monotonic()
        trusted = np.isin(rx.source_keys(n), self._aggregators).tolist()
        good = [rx.lengths[i] == size and not rx.truncated[i] and trusted[i] for i in range(n)]
        if all(good):
            self.session.receive_batch(rx.view, n, now)
            return
        dones = [i for i in range(n) if rx.lengths[i] == HEADER_LEN and trusted[i]]
        if dones:
            self.session.receive_dones(b"".join(rx.view[i * size : i * size + HEADER_LEN]
                                                for i in dones), len(dones), now)
        done = set(dones)
        start = 0
        for i in range(n + 1):
            if i < n and good[i]:
                continue
            if i > start:
                self.session.receive_batch(rx.view[start * size :], i - start, now)
            if i < n and not trusted[i]:
                self.foreign_sources += 1
                self.session.stats.foreign += 1
            elif i < n and i not in done:
                self.session.receive(rx.view[i * size : i * size + min(rx.lengths[i], size)], now)
            start = i + 1

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass


def _open_socket(aggregator: tuple[str, int],
                 bind: tuple[str, int]) -> tuple[socket.socket, tuple[str, int]]:
    """The agent's socket and the default aggregator's numeric (IPv4, port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
        sock.bind(bind)
        host, port = aggregator
        resolved = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)[0][4]
        sock.setblocking(False)
    except (OSError, TypeError, ValueError) as exc:
        sock.close()
        raise TransportError(f"cannot open a UDP socket from {bind} to {aggregator}: {exc}") from exc
    return sock, (str(resolved[0]), int(resolved[1]))
