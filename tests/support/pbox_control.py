"""A PBox control server on loopback, served from a thread, with the controller's client
pointed at it: what the controller's PBox-client tests and the PBox core's tests share."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from p4hub.controller.core import topology
from p4hub.controller.pbox_control import PBoxControl
from p4hub.hosts.pbox.server import Controlled, ControlServer


@contextmanager
def pbox_control(handler: Controlled, *, tls: ssl.SSLContext | None = None,
                 clients: Iterable[str] = (), topo_tls: dict | None = None,
                 ) -> Iterator[tuple[PBoxControl, ControlServer]]:
    """``handler`` (anything with ``control(request) -> reply``) behind a real TCP control
    server (TLS with ``tls``, only for ``clients`` if given); yields the controller's client
    for PBox "pb1" (with the topology's ``tls`` section ``topo_tls``) and the server."""
    server = ControlServer(handler, "127.0.0.1", 0, tls=tls, clients=clients)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            server.poll(0.02)

    thread = threading.Thread(target=serve)
    thread.start()
    host, port = server.address
    topo = topology.from_dict({
        "switches": {"s1": {"grpc_addr": "127.0.0.1:1"}},
        "pboxes": {"pb1": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64", "switch": "s1",
                           "port": 9, "control": f"{host}:{port}"}},
        **({"tls": topo_tls} if topo_tls is not None else {}),
    })
    control = PBoxControl(topo, timeout=2.0)
    try:
        yield control, server
    finally:
        control.close()
        stop.set()
        thread.join()
        server.close()
