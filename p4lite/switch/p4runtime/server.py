"""The gRPC adapter: a ``p4.v1.P4Runtime`` servicer in front of a ``Device``.

Check order for every RPC (PI pi_server.cpp, reference 4.3): device id
(NOT_FOUND) -> primary (PERMISSION_DENIED, writes only) -> pipeline
(FAILED_PRECONDITION). Write applies updates one by one (CONTINUE_ON_ERROR,
the only atomicity PI implements) and, if any failed, answers UNKNOWN with one
p4.v1.Error per update in the ``grpc-status-details-bin`` trailer.

StreamChannel: one reader thread per stream feeds the sans-I/O Arbitration;
everything sent to a stream goes through its queue, so arbitration replies,
PacketIns and DigestLists never wait on the packet path.

TLS (``serve(credentials=...)``) is gRPC's own. With ``writers`` (certificate common
names; needs client authentication) only those clients take part in arbitration and
may write: any other authenticated client is answered as a backup whatever election
id it sends (PERMISSION_DENIED on Write, SetForwardingPipelineConfig and PacketOut),
so an operator's p4runtime-shell can read the tables but never demote the controller.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterable, Iterator
from concurrent import futures

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4lite.switch.p4runtime.arbitration import Arbitration, Notice
from p4lite.switch.p4runtime.device import Device
from p4lite.switch.p4runtime.errors import (
    DETAILS_KEY,
    P4RuntimeError,
    grpc_status_code,
    write_error_details,
)
from p4lite.switch.p4runtime.read import read_entity
from p4lite.switch.p4runtime.write import apply_update

log = logging.getLogger("p4lite.p4runtime")

API_VERSION = "1.3.0"  # what PI's server reports
READ_BATCH = 100  # entities per ReadResponse
MAX_MESSAGE = 256 << 20  # a BMv2 JSON can exceed gRPC's 4 MB default (PI allows 256 MB)
MAX_PENDING = 10_000  # PacketIns / DigestLists queued for one slow client before dropping
_CLOSE = object()


def election_id_of(msg) -> int | None:  # noqa: ANN001 - any message with an election_id
    if not msg.HasField("election_id"):
        return None
    return (msg.election_id.high << 64) | msg.election_id.low


def peer_name(context: grpc.ServicerContext) -> str | None:
    """The common name of the client's verified certificate, or None (no TLS client auth)."""
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode(errors="replace") if names else None


class _Stream:
    """One StreamChannel: its outbound queue and what it told us about itself."""

    def __init__(self, may_write: bool = True) -> None:
        self.may_write = may_write  # False: a reader, never primary
        self.out: queue.Queue = queue.Queue()
        self.device_id: int | None = None
        self.role = ""
        self.dropped = 0

    def send(self, item: object) -> None:
        self.out.put(item)

    def offer(self, item: object) -> bool:
        """Queue a PacketIn / DigestList unless the client is that far behind (then drop it)."""
        if self.out.qsize() >= MAX_PENDING:
            self.dropped += 1
            return False
        self.out.put(item)
        return True


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, device: Device, writers: Iterable[str] = ()) -> None:
        self.device = device
        self.writers = frozenset(writers)  # empty: every client may write
        self._arb_lock = threading.Lock()
        self._arbitrations: dict[str, Arbitration[_Stream]] = {}
        device.packet_in_sink = self._to_primaries
        device.digest_sink = self._to_primaries

    # -- checks ---------------------------------------------------------------
    def _arbitration(self, role: str) -> Arbitration[_Stream]:
        arb = self._arbitrations.get(role)
        if arb is None:
            arb = self._arbitrations[role] = Arbitration(self.device.device_id)
        return arb

    def _check_device(self, device_id: int) -> None:
        if device_id != self.device.device_id:
            raise P4RuntimeError(code_pb2.NOT_FOUND, f"unknown device id {device_id}")

    def _may_write(self, context: grpc.ServicerContext) -> bool:
        return not self.writers or peer_name(context) in self.writers

    def _check_primary(self, request, context: grpc.ServicerContext) -> None:  # noqa: ANN001
        if not self._may_write(context):
            raise P4RuntimeError(code_pb2.PERMISSION_DENIED,
                                 f"client {peer_name(context)!r} may only read")
        with self._arb_lock:
            allowed = self._arbitration(request.role).allows_write(election_id_of(request))
        if not allowed:
            raise P4RuntimeError(code_pb2.PERMISSION_DENIED, "Not primary")

    @staticmethod
    def _abort(context: grpc.ServicerContext, err: P4RuntimeError) -> None:
        context.abort(grpc_status_code(err.code), err.message)

    # -- unary RPCs -----------------------------------------------------------
    def Write(self, request, context):  # noqa: N802, ANN001, ANN201
        try:
            self._check_device(request.device_id)
            self._check_primary(request, context)
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RuntimeError(code_pb2.UNIMPLEMENTED, "only CONTINUE_ON_ERROR atomicity")
            pipeline = self.device.require_pipeline()
        except P4RuntimeError as err:
            self._abort(context, err)
        results: list[P4RuntimeError | None] = []
        with self.device.lock:
            pipeline = self.device.pipeline or pipeline  # a commit may have raced us
            for update in request.updates:
                try:
                    apply_update(pipeline, update)
                    results.append(None)
                except P4RuntimeError as err:
                    log.info("write update refused: %s", err)
                    results.append(err)
        if any(r is not None for r in results):
            context.set_trailing_metadata([(DETAILS_KEY, write_error_details(results))])
            failed = next(r for r in results if r is not None)
            context.abort(grpc.StatusCode.UNKNOWN, failed.message)
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context) -> Iterator[p4runtime_pb2.ReadResponse]:  # noqa: N802, ANN001
        try:
            self._check_device(request.device_id)
            pipeline = self.device.require_pipeline()
            entities: list[p4runtime_pb2.Entity] = []
            with self.device.lock:
                for entity in request.entities:
                    entities.extend(read_entity(pipeline, entity))
        except P4RuntimeError as err:
            self._abort(context, err)
        # Built under the lock, sent after releasing it: a slow reader never stalls packets.
        for start in range(0, max(len(entities), 1), READ_BATCH):
            yield p4runtime_pb2.ReadResponse(entities=entities[start:start + READ_BATCH])

    def SetForwardingPipelineConfig(self, request, context):  # noqa: N802, ANN001, ANN201
        try:
            self._check_device(request.device_id)
            self._check_primary(request, context)
            self.device.set_pipeline(request.action, request.config)
        except P4RuntimeError as err:
            log.info("pipeline config refused: %s", err)
            self._abort(context, err)
        except Exception as exc:  # a bug, not the client's input: INTERNAL, with the traceback
            log.exception("SetForwardingPipelineConfig failed")
            context.abort(grpc.StatusCode.INTERNAL, f"internal error: {exc!r}")
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):  # noqa: N802, ANN001, ANN201
        try:
            self._check_device(request.device_id)
            pipeline = self.device.require_pipeline()
        except P4RuntimeError as err:
            self._abort(context, err)
        kind = p4runtime_pb2.GetForwardingPipelineConfigRequest
        response = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        saved = pipeline.config
        config = response.config
        if saved.HasField("cookie"):
            config.cookie.CopyFrom(saved.cookie)
        if request.response_type in (kind.ALL, kind.P4INFO_AND_COOKIE):
            config.p4info.CopyFrom(saved.p4info)
        if request.response_type in (kind.ALL, kind.DEVICE_CONFIG_AND_COOKIE):
            config.p4_device_config = saved.p4_device_config
        return response

    def Capabilities(self, request, context):  # noqa: N802, ANN001, ANN201
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # -- StreamChannel ----------------------------------------------------------
    def StreamChannel(self, request_iterator, context):  # noqa: N802, ANN001, ANN201
        stream = _Stream(self._may_write(context))
        reader = threading.Thread(target=self._read_stream, args=(stream, request_iterator),
                                  name="p4rt-stream", daemon=True)
        reader.start()
        context.add_callback(lambda: stream.send(_CLOSE))
        try:
            while True:
                item = stream.out.get()
                if item is _CLOSE:
                    return
                if isinstance(item, P4RuntimeError):
                    self._abort(context, item)
                yield item
        finally:
            self._close_stream(stream)

    def _read_stream(self, stream: _Stream, request_iterator) -> None:  # noqa: ANN001
        try:
            for msg in request_iterator:
                self._on_stream_message(stream, msg)
        except grpc.RpcError:
            pass  # the client went away
        except Exception:
            log.exception("StreamChannel reader failed")
        stream.send(_CLOSE)

    def _on_stream_message(self, stream: _Stream, msg: p4runtime_pb2.StreamMessageRequest) -> None:
        which = msg.WhichOneof("update")
        if which == "arbitration":
            self._on_arbitration(stream, msg.arbitration)
        elif which == "packet":
            self._on_packet_out(stream, msg.packet)
        elif which == "digest_ack":
            self.device.ack_digest(msg.digest_ack.digest_id, msg.digest_ack.list_id)
        else:
            self._stream_error(stream, P4RuntimeError(code_pb2.UNIMPLEMENTED,
                                                      f"stream message {which} not supported"))

    def _on_arbitration(self, stream: _Stream, update: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        role = update.role.name if update.HasField("role") else ""
        with self._arb_lock:
            if stream.device_id is not None and role != stream.role:
                self._arbitration(stream.role).close(stream)
            try:
                # a reader's election id is disregarded: it stays a backup
                election_id = election_id_of(update) if stream.may_write else None
                notices = self._arbitration(role).update(
                    stream, update.device_id, election_id, stream.device_id)
            except P4RuntimeError as err:
                log.info("arbitration refused: %s", err)
                stream.send(err)
                return
            stream.device_id = update.device_id
            stream.role = role
            self._send_notices(notices, update)

    @staticmethod
    def _send_notices(notices: list[Notice[_Stream]], update: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        for notice in notices:
            reply = p4runtime_pb2.StreamMessageResponse()
            arb = reply.arbitration
            arb.device_id = update.device_id
            if update.HasField("role"):
                arb.role.CopyFrom(update.role)
            if notice.election_id is not None:
                arb.election_id.high = notice.election_id >> 64
                arb.election_id.low = notice.election_id & ((1 << 64) - 1)
            arb.status.code = notice.status
            arb.status.message = {code_pb2.OK: "Is primary",
                                  code_pb2.ALREADY_EXISTS: "Is backup",
                                  }.get(notice.status, "No primary")
            notice.stream.send(reply)

    def _on_packet_out(self, stream: _Stream, packet: p4runtime_pb2.PacketOut) -> None:
        with self._arb_lock:
            primary = stream.device_id is not None and self._arbitration(stream.role).is_primary(stream)
        try:
            if not primary:
                raise P4RuntimeError(code_pb2.PERMISSION_DENIED, "PacketOut from a non-primary client")
            self.device.packet_out(packet)
        except P4RuntimeError as err:
            self._stream_error(stream, err, packet)

    @staticmethod
    def _stream_error(stream: _Stream, err: P4RuntimeError,
                      packet: p4runtime_pb2.PacketOut | None = None) -> None:
        reply = p4runtime_pb2.StreamMessageResponse()
        reply.error.canonical_code = err.code
        reply.error.message = err.message
        if packet is not None:
            reply.error.packet_out.packet_out.CopyFrom(packet)
        stream.send(reply)

    def _close_stream(self, stream: _Stream) -> None:
        if stream.device_id is None:
            return
        with self._arb_lock:
            notices = self._arbitration(stream.role).close(stream)
            stream.device_id = None
            update = p4runtime_pb2.MasterArbitrationUpdate(device_id=self.device.device_id)
            if stream.role:
                update.role.name = stream.role
            self._send_notices(notices, update)

    def _to_primaries(self, msg) -> None:  # noqa: ANN001 - PacketIn or DigestList
        """Stream a PacketIn / DigestList to the primary of each role (as PI does)."""
        reply = p4runtime_pb2.StreamMessageResponse()
        if isinstance(msg, p4runtime_pb2.PacketIn):
            reply.packet.CopyFrom(msg)
        else:
            reply.digest.CopyFrom(msg)
        with self._arb_lock:
            primaries = [arb.primary() for arb in self._arbitrations.values()]
        for primary in primaries:
            if isinstance(primary, _Stream) and not primary.offer(reply) and primary.dropped == 1:
                log.warning("a slow P4Runtime client: dropping PacketIn/DigestList messages")


def serve(device: Device, address: str, max_workers: int = 32, *,
          credentials: grpc.ServerCredentials | None = None,
          writers: Iterable[str] = ()) -> tuple[grpc.Server, int]:
    """Start a P4Runtime server on ``address`` ("host:port", port 0 picks one); returns it
    and the port. ``credentials``: TLS (None: plaintext); ``writers``: see the module doc."""
    if writers and credentials is None:
        raise ValueError("writers are known by their client certificates: TLS is needed")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="p4rt"),
                         options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                                  ("grpc.max_send_message_length", MAX_MESSAGE),
                                  # never share the port with a stray switch (grpc's default)
                                  ("grpc.so_reuseport", 0)])
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(P4RuntimeServicer(device, writers), server)
    try:
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
    except RuntimeError as exc:  # grpcio raises when the port is taken
        raise OSError(f"cannot listen on {address}: {exc}") from None
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    return server, port
