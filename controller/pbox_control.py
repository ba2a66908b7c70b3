"""Jobs placed on a PBox: the client side of the PBox's JSON control channel.

The PBox (hosts/pbox.py) serves newline-delimited JSON over TCP:
``{"cmd": "add_job", "job", "world_size", "slot_base", "slot_count", "lanes"}`` (and
``parent``, ``precision``, ``floats`` where the job has them),
``{"cmd": "remove_job", "job"}``, ``{"cmd": "list_jobs"}``, ``{"cmd": "stats"}``,
``{"cmd": "open_cells", "job"}`` (the last two for ``p4hub doctor``); each answer is one
line, ``{"ok": true, ...}`` or ``{"error": "..."}``. ``PBoxControl`` is the
``pbox_sink`` of controller.driver: it turns PBoxJobWrites into those requests
(INSERT: add_job, DELETE: remove_job, MODIFY: add the job unless the PBox
already has it exactly so, which is what a rebuilt controller sends).

With the topology's ``tls`` section the channel is TLS: the PBox's certificate must chain
to its CA and name the control address's host, and the controller presents its client
certificate (the PBox refuses a connection without one). Without it, plaintext (a PBox
run with ``--control-insecure``).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from typing import BinaryIO

from p4hub.controller.core.errors import UnavailableError
from p4hub.controller.core.topology import TlsConf, Topology
from p4hub.controller.core.updates import DELETE, INSERT, MODIFY, PBoxJobWrite


class PBoxControlError(UnavailableError):
    """A PBox could not be reached or refused a request."""


def client_context(tls: TlsConf) -> ssl.SSLContext:
    """Verify the PBox against ``tls.ca`` and present ``tls.cert`` where given; raises
    PBoxControlError naming a file that cannot be read."""
    try:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if tls.cert:
            ctx.load_cert_chain(tls.cert, tls.key)
    except (OSError, ssl.SSLError) as exc:
        raise PBoxControlError(f"PBox control TLS: {exc}") from None
    return ctx


class PBoxChannel:
    """One TCP (or TLS) connection to one PBox, reopened on demand."""

    def __init__(self, address: str, timeout: float = 5.0, tls: TlsConf | None = None) -> None:
        host, _, port = address.rpartition(":")
        self.address = (host, int(port))
        self.timeout = timeout
        self.tls = client_context(tls) if tls is not None else None
        self._sock: socket.socket | None = None
        self._file: BinaryIO | None = None
        self._lock = threading.Lock()

    def request(self, request: dict) -> dict:
        with self._lock:
            try:
                return self._exchange(request)
            except OSError:
                self.close()  # one retry on a fresh connection (the PBox may have restarted)
                try:
                    return self._exchange(request)
                except OSError as exc:
                    self.close()
                    raise PBoxControlError(f"PBox at {self.address[0]}:{self.address[1]}: {exc}") \
                        from None

    def _exchange(self, request: dict) -> dict:
        if self._sock is None:
            sock = socket.create_connection(self.address, timeout=self.timeout)
            if self.tls is not None:
                try:
                    sock = self.tls.wrap_socket(sock, server_hostname=self.address[0])
                except OSError:
                    sock.close()
                    raise
            self._sock = sock
            self._file = self._sock.makefile("rb")
        self._sock.sendall(json.dumps(request).encode() + b"\n")
        assert self._file is not None  # made with the socket
        line = self._file.readline()
        if not line:
            raise ConnectionResetError("connection closed by the PBox")
        try:
            reply = json.loads(line)
        except ValueError:
            raise PBoxControlError(f"PBox answered something that is not JSON: {line[:80]!r}") from None
        if not isinstance(reply, dict) or "error" in reply:
            raise PBoxControlError(f"PBox refused {request.get('cmd')}: "
                                   f"{reply.get('error') if isinstance(reply, dict) else reply}")
        return reply

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class PBoxControl:
    """Applies PBoxJobWrites to the PBoxes of a topology (a ``pbox_sink``)."""

    def __init__(self, topo: Topology, timeout: float = 5.0) -> None:
        self.channels = {
            name: PBoxChannel(pbox.control, timeout, topo.tls)
            for name, pbox in topo.pboxes.items() if pbox.control
        }

    def __call__(self, write: PBoxJobWrite) -> bool:
        """Apply ``write``; True when a MODIFY found the job missing or different and
        had to (re)create it (its state is then fresh)."""
        channel = self.channels.get(write.pbox)
        if channel is None:
            raise PBoxControlError(f"PBox {write.pbox} has no control address in the topology")
        add: dict = {"cmd": "add_job", "job": write.job_id, "world_size": write.world_size,
                     "slot_base": write.slot_base, "slot_count": write.slot_count,
                     "lanes": write.lanes}
        parent = None
        if write.parent:
            host, _, port = write.parent.rpartition(":")
            parent = {"address": [host, int(port)], "child": write.child,
                      "rack_size": write.rack_size,
                      **({"ranks": list(write.ranks)} if write.ranks else {})}
            add["parent"] = {**parent, "address": write.parent}
        if write.precision is not None:
            add["precision"] = write.precision
        if write.floats:
            add["floats"] = write.floats
        if write.op == INSERT:
            channel.request(add)
            return True
        if write.op == MODIFY:  # make sure the PBox has the job as described (after a rebuild)
            want = {"job_id": write.job_id, "world_size": write.world_size,
                    "slot_base": write.slot_base, "slot_count": write.slot_count,
                    "lanes": write.lanes, **({"parent": parent} if parent else {}),
                    **({"precision": write.precision} if write.precision is not None else {}),
                    **({"floats": write.floats} if write.floats else {})}
            have = [job for job in self.jobs(write.pbox) if job.get("job_id") == write.job_id]
            if have and have[0] == want:
                return False
            if have:
                channel.request({"cmd": "remove_job", "job": write.job_id})
            channel.request(add)
            return True
        if write.op == DELETE:
            channel.request({"cmd": "remove_job", "job": write.job_id})
            return False
        raise PBoxControlError(f"unsupported PBox job op {write.op!r}")

    def jobs(self, pbox: str) -> list[dict]:
        return list(self._channel(pbox).request({"cmd": "list_jobs"}).get("jobs", []))

    def stats(self, pbox: str) -> dict[str, dict]:
        """Per-job counters summed over the PBox's shards: job id (a string) -> counters."""
        return dict(self._channel(pbox).request({"cmd": "stats"}).get("jobs", {}))

    def open_cells(self, pbox: str, job_id: int) -> list[tuple[int, int, int, int]]:
        """(slot, shadow set, bitmap, counter) of the job's rounds in progress."""
        reply = self._channel(pbox).request({"cmd": "open_cells", "job": job_id})
        return [(int(s), int(sh), int(b), int(c)) for s, sh, b, c in reply.get("cells", [])]

    def _channel(self, pbox: str) -> PBoxChannel:
        channel = self.channels.get(pbox)
        if channel is None:
            raise PBoxControlError(f"PBox {pbox} has no control address in the topology")
        return channel

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()
