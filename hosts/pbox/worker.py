"""One PBox worker process: its reuseport socket, a :class:`~hosts.pbox.core.ShardCore`
and the command pipe from the supervisor.

Datagrams move in batches (hosts/batchio.py): one ``recvmmsg`` takes up to
``RECV_BATCH`` contributions with their sources, the aggregator answers the batch, and the
batch's results go to each worker as one GSO send (hosts/gso.py), or all of them with
one ``sendmmsg`` where the path has no segmentation offload."""

from __future__ import annotations

import errno
import multiprocessing.connection
import os
import select
import signal
import socket
import time

from p4hub.hosts import gro
from p4hub.hosts.batchio import BatchReceiver
from p4hub.hosts.gro import GroReceiver
from p4hub.hosts.gso import GsoSender, local_interface_offloads
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.pbox.core import ShardCore
from p4hub.hosts.wire import MAX_PACKET_LEN

RECV_BATCH = 64  # datagrams per recvmmsg
RECV_MESSAGES = 32  # (super-)datagrams per recvmmsg with UDP_GRO: peers without GSO send
# plain datagrams, one buffer each, so as many buffers as a plain recvmmsg takes datagrams
# would be 64; 32 (2 MB of buffers) is the compromise
DRAIN_LIMIT = 256  # datagrams drained per poll wake-up before looking at the pipe
SEND_BATCH = 256  # results per sendmmsg (a batch of completions times the job's workers)
# A datagram one byte longer than the largest packet is already malformed: the
# aggregator sees its length and counts it, instead of a silently cut copy.
STRIDE = MAX_PACKET_LEN + 1
# Sends that fail like a lost packet: full buffers, ICMP errors, a firewall's DROP.
_LOST_ON_SEND = (errno.EAGAIN, errno.ENOBUFS, errno.EPERM, errno.ECONNREFUSED,
                 errno.EHOSTUNREACH, errno.ENETUNREACH)


class ShardWorker:
    """The I/O loop of one shard: datagrams from the socket, commands from the pipe."""

    def __init__(
        self, sock: socket.socket, conn: multiprocessing.connection.Connection,
        shard: tuple[int, int], max_slots: int,
    ) -> None:
        self.sock = sock
        self.conn = conn
        self.core = ShardCore(shard, max_slots, pid=os.getpid())
        # agents' super-datagrams read whole (UDP_GRO) where the PBox's own interface
        # has the offload; the same interface test as the agents' GSO probe
        self.receiver: GroReceiver | BatchReceiver = (
            gro.receiver(sock, RECV_MESSAGES, STRIDE, with_addresses=True)
            if local_interface_offloads(sock.getsockname()[0])
            else BatchReceiver(sock, RECV_BATCH, STRIDE, with_addresses=True))
        # results to each worker go as one GSO send where the path allows it
        self.sender = GsoSender(sock, SEND_BATCH, _LOST_ON_SEND)

    @property
    def aggregator(self) -> Aggregator:
        return self.core.aggregator

    @property
    def send_errors(self) -> int:
        return self.core.send_errors

    def run(self) -> None:
        poller = select.poll()
        sock_fd, conn_fd = self.sock.fileno(), self.conn.fileno()
        poller.register(sock_fd, select.POLLIN)
        poller.register(conn_fd, select.POLLIN)
        core = self.core
        while core.running:
            for fd, _ in poller.poll(1000):
                if fd == sock_fd:
                    self._drain()
                else:
                    self._command()

    def _drain(self) -> None:
        drained = 0
        while drained < DRAIN_LIMIT:
            try:
                got = self.receiver.receive()
            except OSError:
                self.core.send_errors += 1  # a queued ICMP error surfaces here; keep going
                continue
            if got:
                self._answer(got)
            drained += got
            if not self.receiver.more:
                return

    def _answer(self, n: int) -> None:
        # ShardCore.receive for the whole batch, in one call: this is the PBox's hot path,
        # and the core sums long runs of ordinary contributions as arrays (hosts/pbox/runs.py)
        rx, core = self.receiver, self.core
        replies: list = []
        try:
            replies = core.aggregator.receive_many(
                rx.view, n, STRIDE, [rx.address(i) for i in range(n)], time.monotonic(),
                rx.lengths)
        except Exception:  # never die on a packet: count and keep serving (the batch's
            core.internal_error()  # answers are lost; the agents resend)
        if replies:
            lost = self.sender.errors
            self.sender.send_to(replies)
            core.send_errors += self.sender.errors - lost

    def _command(self) -> None:
        try:
            cmd, arg = self.conn.recv()
        except (EOFError, OSError):
            self.core.running = False  # the supervisor is gone: stop too
            return
        self.conn.send(self.core.handle(cmd, arg))


def worker_main(
    sock: socket.socket, conn: multiprocessing.connection.Connection,
    shard: tuple[int, int], max_slots: int, inherited: list,
) -> None:
    """Entry point of a forked worker process."""
    # A forked child inherits the supervisor's ends of the other workers' pipes and
    # the other sockets; close them, or a dead supervisor would never look like EOF.
    for obj in inherited:
        obj.close()
    # The supervisor handles SIGINT/SIGTERM and stops the workers over the pipe; a
    # terminal's Ctrl-C reaches the whole process group, so ignore it here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ShardWorker(sock, conn, shard, max_slots).run()
