"""The PBox's control channel (newline-delimited JSON over TCP, TLS by default) and main loop.

With a TLS context (``control_tls_context``: the PBox's certificate, and the CA every
client must present a certificate from) a connection is served only once its handshake
has verified the client's certificate, and, with ``clients``, only if that certificate's
common name is one of them: anyone else gets no byte of the JSON channel and changes
nothing. Handshakes run in the select loop (non-blocking), so a client that connects
and says nothing never stalls the PBox; one that has not finished in
``HANDSHAKE_TIMEOUT`` seconds is dropped. Without a context the channel is plaintext
(``p4hub-pbox --control-insecure``).
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import socket
import ssl
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from p4hub.hosts.pbox.core import TOO_LONG, LineBuffer, answer_line, encode_reply
from p4hub.hosts.pbox.job_config import JobConfig
from p4hub.hosts.pbox.supervisor import PBox, PBoxConfig

log = logging.getLogger("p4hub-pbox")

HANDSHAKE_TIMEOUT = 5.0
SEND_TIMEOUT = 5.0  # a client that stops reading must not stall the PBox


def control_tls_context(cert: str, key: str, ca: str) -> ssl.SSLContext:
    """A server context that requires a client certificate from ``ca`` (TLS 1.2 or later);
    raises OSError / ssl.SSLError for files that cannot be read or do not match."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def common_name(cert: dict | None) -> str | None:
    """The subject common name of a verified peer certificate (ssl's getpeercert())."""
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


@dataclass
class _Conn:
    buffer: LineBuffer = field(default_factory=LineBuffer)
    deadline: float = 0.0  # TLS: the handshake must be done by then
    ready: bool = True  # False until the TLS handshake has verified the client


class Controlled(Protocol):
    def control(self, request: object) -> dict: ...


class ControlServer:
    """Newline-delimited JSON over TCP, served from the supervisor's select loop; the
    answers come from ``pbox.control`` (a :class:`PBox`, or anything with that method)."""

    def __init__(self, pbox: Controlled, host: str, port: int, *,
                 tls: ssl.SSLContext | None = None, clients: Iterable[str] = ()) -> None:
        self.pbox = pbox
        self.tls = tls
        self.clients = frozenset(clients)  # allowed certificate common names; empty: any
        self.refused = 0  # connections dropped: failed handshake, unknown client, time-out
        self.selector = selectors.DefaultSelector()
        self.listener = socket.create_server((host, port), reuse_port=False)
        self.listener.setblocking(False)
        self.address = self.listener.getsockname()[:2]
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self._conns: dict[socket.socket, _Conn] = {}

    def poll(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            if key.fileobj is self.listener:
                self._accept()
            else:
                assert isinstance(key.fileobj, socket.socket)  # only sockets are registered
                if key.fileobj in self._conns:  # (not closed earlier in this round)
                    self._read(key.fileobj)
        now = time.monotonic()
        for conn, state in list(self._conns.items()):
            if not state.ready and now > state.deadline:
                self._refuse(conn, "no TLS handshake in time")

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        state = _Conn()
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
            except (OSError, ValueError):
                conn.close()
                return
            state.ready = False
            state.deadline = time.monotonic() + HANDSHAKE_TIMEOUT
        conn.setblocking(False)
        self.selector.register(conn, selectors.EVENT_READ, None)
        self._conns[conn] = state

    def _handshake(self, conn: ssl.SSLSocket, state: _Conn) -> bool:
        """Advance the handshake; True once the client is verified and allowed."""
        try:
            conn.do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return False
        except (OSError, ValueError) as exc:
            self._refuse(conn, f"TLS handshake failed: {exc}")
            return False
        name = common_name(conn.getpeercert())
        if self.clients and name not in self.clients:
            self._refuse(conn, f"client certificate {name!r} is not one of the allowed")
            return False
        state.ready = True
        return True

    def _refuse(self, conn: socket.socket, why: str) -> None:
        self.refused += 1
        try:
            host, port = conn.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        log.warning("control channel: refused %s: %s", peer, why)
        self._close(conn)

    def _read(self, conn: socket.socket) -> None:
        state = self._conns[conn]
        if not state.ready:
            assert isinstance(conn, ssl.SSLSocket)  # only TLS connections start not ready
            if not self._handshake(conn, state):
                return
        while True:
            try:
                data = conn.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                return
            except OSError:
                data = b""
            if not data:
                self._close(conn)
                return
            for line in state.buffer.feed(data):
                if not self._send(conn, answer_line(self.pbox.control, line)):
                    return
            if state.buffer.too_long:
                if self._send(conn, encode_reply(TOO_LONG)):
                    self._close(conn)  # (a failed send has closed it already)
                return
            # TLS may hold decrypted bytes the selector cannot see: read them now
            if not isinstance(conn, ssl.SSLSocket) or not conn.pending():
                return

    def _send(self, conn: socket.socket, data: bytes) -> bool:
        try:
            conn.settimeout(SEND_TIMEOUT)
            conn.sendall(data)
            conn.setblocking(False)
            return True
        except OSError:
            self._close(conn)
            return False

    def _close(self, conn: socket.socket) -> None:
        if self._conns.pop(conn, None) is None:
            return
        self.selector.unregister(conn)
        conn.close()

    def close(self) -> None:
        for conn in list(self._conns):
            self._close(conn)
        self.selector.close()
        self.listener.close()


def serve(
    config: PBoxConfig,
    jobs: Iterable[JobConfig] = (),
    control: tuple[str, int] | None = None,
    stats_interval: float = 0.0,
    out=sys.stdout,
    control_tls: ssl.SSLContext | None = None,
    control_clients: Iterable[str] = (),
) -> int:
    """Run the PBox until SIGTERM/SIGINT; prints a ready line and the final counters as JSON.
    ``control_tls``/``control_clients``: the control channel's TLS (ControlServer)."""
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
            server = ControlServer(pbox, *control, tls=control_tls, clients=control_clients)
        _emit(out, {
            "event": "ready", "listen": list(pbox.address), "workers": pbox.workers,
            "steering": pbox.steering, "pid": os.getpid(),
            "control": list(server.address) if server else None,
            "control_tls": server is not None and server.tls is not None,
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
