"""One PBox worker process: its reuseport socket, a :class:`~hosts.pbox.core.ShardCore`
and the command pipe from the supervisor."""

from __future__ import annotations

import multiprocessing.connection
import os
import select
import signal
import socket
import time

from hosts.aggregator import Aggregator
from hosts.pbox.core import ShardCore

RECV_BATCH = 256  # datagrams drained per poll wake-up before looking at the pipe


class ShardWorker:
    """The I/O loop of one shard: datagrams from the socket, commands from the pipe."""

    def __init__(
        self, sock: socket.socket, conn: multiprocessing.connection.Connection,
        shard: tuple[int, int], max_slots: int,
    ) -> None:
        self.sock = sock
        self.conn = conn
        self.core = ShardCore(shard, max_slots, pid=os.getpid())

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
        # ShardCore.receive, inlined: this loop is the PBox's hot path.
        sock, core, clock = self.sock, self.core, time.monotonic
        receive = core.aggregator.receive
        for _ in range(RECV_BATCH):
            try:
                data, src = sock.recvfrom(2048, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                core.send_errors += 1  # a queued ICMP error surfaces here; keep going
                continue
            try:
                replies = receive(data, src, clock())
            except Exception:  # never die on a packet; count and keep serving
                core.internal_error()
                continue
            for reply, dst in replies:
                try:
                    sock.sendto(reply, dst)
                except OSError:
                    core.send_errors += 1

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
