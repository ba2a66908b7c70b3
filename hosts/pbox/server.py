"""The PBox's control channel (newline-delimited JSON over TCP) and main loop."""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import socket
import sys
import time
from collections.abc import Iterable
from typing import Protocol

from p4hub.hosts.pbox.aggregator import JobConfig
from p4hub.hosts.pbox.core import TOO_LONG, LineBuffer, answer_line, encode_reply
from p4hub.hosts.pbox.supervisor import PBox, PBoxConfig

log = logging.getLogger("p4hub-pbox")


class Controlled(Protocol):
    def control(self, request: object) -> dict: ...


class ControlServer:
    """Newline-delimited JSON over TCP, served from the supervisor's select loop; the
    answers come from ``pbox.control`` (a :class:`PBox`, or anything with that method)."""

    def __init__(self, pbox: Controlled, host: str, port: int) -> None:
        self.pbox = pbox
        self.selector = selectors.DefaultSelector()
        self.listener = socket.create_server((host, port), reuse_port=False)
        self.listener.setblocking(False)
        self.address = self.listener.getsockname()[:2]
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self._buffers: dict[socket.socket, LineBuffer] = {}

    def poll(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            if key.fileobj is self.listener:
                self._accept()
            else:
                assert isinstance(key.fileobj, socket.socket)  # only sockets are registered
                self._read(key.fileobj)

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        conn.setblocking(True)
        conn.settimeout(5.0)  # a client that stops reading must not stall the PBox
        self.selector.register(conn, selectors.EVENT_READ, None)
        self._buffers[conn] = LineBuffer()

    def _read(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        buffer = self._buffers[conn]
        for line in buffer.feed(data):
            if not self._send(conn, answer_line(self.pbox.control, line)):
                return
        if buffer.too_long and self._send(conn, encode_reply(TOO_LONG)):
            self._close(conn)  # (a failed send has closed it already)

    def _send(self, conn: socket.socket, data: bytes) -> bool:
        try:
            conn.sendall(data)
            return True
        except OSError:
            self._close(conn)
            return False

    def _close(self, conn: socket.socket) -> None:
        self.selector.unregister(conn)
        self._buffers.pop(conn, None)
        conn.close()

    def close(self) -> None:
        for conn in list(self._buffers):
            self._close(conn)
        self.selector.close()
        self.listener.close()


def serve(
    config: PBoxConfig,
    jobs: Iterable[JobConfig] = (),
    control: tuple[str, int] | None = None,
    stats_interval: float = 0.0,
    out=sys.stdout,
) -> int:
    """Run the PBox until SIGTERM/SIGINT; prints a ready line and the final counters as JSON."""
    stopping = []
    previous = {
        sig: signal.signal(sig, lambda *_: stopping.append(True))
        for sig in (signal.SIGTERM, signal.SIGINT)
    }
    pbox = PBox(config)
    server = None
    status = 0
    try:
        pbox.start()
        for job in jobs:
            pbox.add_job(job.job_id, job.world_size, job.slot_base, job.slot_count, job.lanes)
        if control is not None:
            server = ControlServer(pbox, *control)
        _emit(out, {
            "event": "ready", "listen": list(pbox.address), "workers": pbox.workers,
            "steering": pbox.steering, "pid": os.getpid(),
            "control": list(server.address) if server else None,
        })
        log.info("listening on %s:%d with %d worker process(es), steering %s",
                 *pbox.address, pbox.workers, pbox.steering)
        status = _main_loop(pbox, server, stopping, stats_interval, out)
    finally:
        final = pbox.stop()
        if server is not None:
            server.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _emit(out, {"event": "exit", "jobs": final.get("jobs", {}), "global": final.get("global", {})})
    return status


def _main_loop(pbox: PBox, server: ControlServer | None, stopping: list, interval: float,
               out) -> int:
    next_report = time.monotonic() + interval if interval > 0 else float("inf")
    while not stopping:
        if server is not None:
            server.poll(0.2)
        else:
            time.sleep(0.2)
        if not pbox.alive():
            log.error("a worker process died; stopping")
            return 1
        if time.monotonic() >= next_report:
            stats = pbox.stats()
            _emit(out, {"event": "stats", "jobs": stats["jobs"], "global": stats["global"]})
            next_report += interval
    return 0


def _emit(out, record: dict) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()
