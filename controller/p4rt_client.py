"""A thin P4Runtime client: one object per switch, no globals.

``connect`` opens the StreamChannel and wins arbitration as primary (or raises);
the stream stays open for the client's lifetime because the switch demotes a
controller whose stream closes. Every failure is a ``P4RuntimeError`` carrying
the gRPC code and, for Write, the per-update errors unpacked from the
``grpc-status-details-bin`` trailer (p4.v1.Error per update, in order).

With ``tls`` (the topology's TLS section) the channel is TLS: the switch's certificate
must chain to ``tls.ca`` and name the address dialled (an IP address or DNS name in its
subject alternative names), and the client presents ``tls.cert`` where one is given
(the switch's ``--grpc-server-with-client-auth``). Without it, plaintext, as before.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4hub.controller.core.errors import UnavailableError
from p4hub.controller.core.topology import TlsConf

_DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True, slots=True)
class UpdateError:
    index: int  # position of the update in the Write request
    code: int  # google.rpc.Code (canonical_code)
    message: str

    @property
    def code_name(self) -> str:
        return code_pb2.Code.Name(self.code) if self.code in code_pb2.Code.values() else str(self.code)


class P4RuntimeError(UnavailableError):
    """A failed P4Runtime call: ``code`` is the gRPC status name, ``errors`` the
    failed updates of a Write (only those not OK)."""

    def __init__(self, code: str, message: str, errors: tuple[UpdateError, ...] = ()) -> None:
        detail = "; ".join(f"#{e.index} {e.code_name}: {e.message}" for e in errors)
        super().__init__(f"{code}: {message}" + (f" [{detail}]" if detail else ""))
        self.code = code
        self.message = message
        self.errors = errors


def channel_credentials(tls: TlsConf) -> grpc.ChannelCredentials:
    """gRPC channel credentials from the PEM files ``tls`` names; raises P4RuntimeError
    (UNAVAILABLE) naming a file that cannot be read."""
    def read(path: str) -> bytes | None:
        if not path:
            return None
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as exc:
            raise P4RuntimeError("UNAVAILABLE", f"TLS: {path}: {exc.strerror or exc}") from None

    return grpc.ssl_channel_credentials(root_certificates=read(tls.ca),
                                        private_key=read(tls.key),
                                        certificate_chain=read(tls.cert))


def _from_rpc_error(exc: grpc.RpcError) -> P4RuntimeError:
    code = exc.code().name if exc.code() is not None else "UNKNOWN"
    message = exc.details() or ""
    errors: list[UpdateError] = []
    for key, value in exc.trailing_metadata() or ():
        if key != _DETAILS_KEY:
            continue
        status = status_pb2.Status.FromString(value)
        for i, detail in enumerate(status.details):
            err = p4runtime_pb2.Error()
            if detail.Unpack(err) and err.canonical_code != code_pb2.OK:
                errors.append(UpdateError(i, err.canonical_code, err.message))
    return P4RuntimeError(code, message, tuple(errors))


RETRY_TAKEN_ELECTION_S = 0.1


def _election_id_taken(exc: P4RuntimeError) -> bool:
    """The switch refused the arbitration because a stream holds the same election id
    (p4lite's and PI's wordings)."""
    text = exc.message.lower()
    return exc.code == "INVALID_ARGUMENT" and "election id" in text and "already" in text


class P4RuntimeClient:
    def __init__(
        self, address: str, device_id: int = 0, election_id: tuple[int, int] = (0, 1),
        timeout: float = 10.0, tls: TlsConf | None = None,
    ) -> None:
        self.address = address
        self.tls = tls
        self.device_id = device_id
        self.election_id = p4runtime_pb2.Uint128(high=election_id[0], low=election_id[1])
        self.timeout = timeout
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()
        self._arbitration: queue.Queue[p4runtime_pb2.StreamMessageResponse | Exception] = queue.Queue()
        self._reader: threading.Thread | None = None
        self._closing = False
        self.stream_error: Exception | None = None

    # -- connection --------------------------------------------------------------

    def connect(self) -> None:
        """Open the channel and the stream, and become primary; raises P4RuntimeError.

        A switch that still holds a stream with this election id (this controller's own,
        closed a moment ago when it restarted: the switch drops a closed stream
        asynchronously) refuses it with INVALID_ARGUMENT; that is retried until
        ``timeout``, after which another client holding the id is the error."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self._connect_once()
                return
            except P4RuntimeError as exc:
                if not _election_id_taken(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(RETRY_TAKEN_ELECTION_S)

    def _connect_once(self) -> None:
        self._closing = False
        self.stream_error = None
        self._requests = queue.Queue()
        self._arbitration = queue.Queue()
        if self.tls is None:
            self._channel = grpc.insecure_channel(self.address)
        else:
            self._channel = grpc.secure_channel(self.address, channel_credentials(self.tls))
        try:
            grpc.channel_ready_future(self._channel).result(timeout=self.timeout)
        except grpc.FutureTimeoutError:
            self.close()
            what = "no P4Runtime server" if self.tls is None else \
                "no P4Runtime server, or a TLS handshake that failed (CA, name, client certificate),"
            raise P4RuntimeError("UNAVAILABLE", f"{what} at {self.address}") from None
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        responses = self._stub.StreamChannel(self._request_iter())
        self._reader = threading.Thread(target=self._read_stream, args=(responses,),
                                        name=f"p4rt-stream-{self.address}", daemon=True)
        self._reader.start()
        request = p4runtime_pb2.StreamMessageRequest()
        request.arbitration.device_id = self.device_id
        request.arbitration.election_id.CopyFrom(self.election_id)
        self._requests.put(request)
        self._await_primary()

    def _await_primary(self) -> None:
        try:
            reply = self._arbitration.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise P4RuntimeError("DEADLINE_EXCEEDED", "no arbitration reply") from None
        if isinstance(reply, Exception):
            self.close()
            raise reply
        status = reply.arbitration.status
        if status.code != code_pb2.OK:
            self.close()
            name = code_pb2.Code.Name(status.code) if status.code in code_pb2.Code.values() else status.code
            raise P4RuntimeError(str(name), f"not primary for device {self.device_id}: "
                                 f"{status.message}")

    def _request_iter(self) -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        while True:
            request = self._requests.get()
            if request is None:
                return
            yield request

    def _read_stream(self, responses: Iterable[p4runtime_pb2.StreamMessageResponse]) -> None:
        try:
            for response in responses:
                if response.WhichOneof("update") == "arbitration":
                    self._arbitration.put(response)
            error = P4RuntimeError("UNAVAILABLE", "the switch closed the stream")
        except grpc.RpcError as exc:
            error = _from_rpc_error(exc)
        if not self._closing:  # the switch went away, or dropped us: we are no longer primary
            self.stream_error = error
            self._arbitration.put(error)

    @property
    def alive(self) -> bool:
        """Connected, and the stream (hence primary status) has not been lost."""
        return self._stub is not None and self.stream_error is None

    def close(self) -> None:
        self._closing = True
        self._requests.put(None)
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._reader is not None:
            self._reader.join(timeout=self.timeout)
            self._reader = None

    def __enter__(self) -> P4RuntimeClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- RPCs --------------------------------------------------------------------

    @property
    def stub(self) -> p4runtime_pb2_grpc.P4RuntimeStub:
        if self._stub is None:
            raise P4RuntimeError("FAILED_PRECONDITION", "not connected")
        return self._stub

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise _from_rpc_error(exc) from None

    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_config: bytes,
                     cookie: int = 0) -> None:
        """VERIFY_AND_COMMIT the P4Info and the raw BMv2 JSON (what p4runtime-shell sends)."""
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=self.election_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
        request.config.p4info.CopyFrom(p4info)
        request.config.p4_device_config = device_config
        request.config.cookie.cookie = cookie
        self._call(self.stub.SetForwardingPipelineConfig, request)

    def get_pipeline(self) -> tuple[p4info_pb2.P4Info, int] | None:
        """(installed P4Info, cookie), or None when the switch has no pipeline yet."""
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE,
        )
        try:
            reply = self._call(self.stub.GetForwardingPipelineConfig, request)
        except P4RuntimeError as exc:
            if exc.code == "FAILED_PRECONDITION":
                return None
            raise
        if not reply.config.HasField("p4info"):
            return None
        return reply.config.p4info, reply.config.cookie.cookie

    def get_p4info(self) -> p4info_pb2.P4Info | None:
        """The installed P4Info, or None when the switch has no pipeline yet."""
        installed = self.get_pipeline()
        return installed[0] if installed else None

    def write(self, updates: list[p4runtime_pb2.Update]) -> None:
        """One Write with all updates; raises P4RuntimeError listing the failed ones."""
        if not updates:
            return
        request = p4runtime_pb2.WriteRequest(device_id=self.device_id, election_id=self.election_id)
        request.updates.extend(updates)
        self._call(self.stub.Write, request)

    def read(self, entities: list[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        request.entities.extend(entities)
        try:
            return [e for reply in self.stub.Read(request, timeout=self.timeout)
                    for e in reply.entities]
        except grpc.RpcError as exc:
            raise _from_rpc_error(exc) from None

    def read_table_entries(self, table_id: int = 0) -> list[p4runtime_pb2.TableEntry]:
        entity = p4runtime_pb2.Entity()
        entity.table_entry.table_id = table_id
        return [e.table_entry for e in self.read([entity])]

    def read_counters(self, counter_id: int, index: int | None = None) -> list[p4runtime_pb2.CounterEntry]:
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = counter_id
        if index is not None:
            entity.counter_entry.index.index = index
        return [e.counter_entry for e in self.read([entity])]
