"""The device behind the P4Runtime server: pipeline lifecycle plus the packet path.

The core is not thread-safe, so one lock guards it: the packet loop takes it
once per batch of frames drained from a socket (``receive_batch``) and once per
queue service, RPCs per request. Frames reach the core only through
``receive`` (from ports and from PacketOut, which enters on the CPU port).
Outputs to the CPU port become PacketIns for the stream layer; learned digests
become DigestLists. With ``priority_queues`` set, packets go ingress -> strict
priority queues -> egress (``service_queues``; without a rate limit every queued
packet leaves in one pass, ``EgressQueues.pop_all``); otherwise the core's one-call
``process`` path is used.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from p4lite.switch.core.packet_errors import PacketErrors
from p4lite.switch.core.queues import EgressQueues
from p4lite.switch.core.runtime_api import Queued, SwitchRuntimeError
from p4lite.switch.p4runtime.codec import struct_data
from p4lite.switch.p4runtime.errors import P4RuntimeError
from p4lite.switch.p4runtime.packetio import build_packet_out, parse_packet_in
from p4lite.switch.p4runtime.pipeline import CoreFactory, Pipeline, build_pipeline, cli_pipeline

log = logging.getLogger("p4lite.switch")

Action = p4runtime_pb2.SetForwardingPipelineConfigRequest
Transmit = Callable[[int, bytes], None]


class Device:
    def __init__(self, device_id: int, core_factory: CoreFactory, *, cpu_port: int | None = None,
                 transmit: Transmit | None = None, queues: EgressQueues | None = None,
                 clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.device_id = device_id
        self.core_factory = core_factory
        self.cpu_port = cpu_port
        self.transmit: Transmit = transmit or (lambda port, frame: None)
        self.queues = queues
        self.clock_ns = clock_ns
        self.start_ns = clock_ns()
        self.lock = threading.RLock()
        self.pipeline: Pipeline | None = None
        self.saved: Pipeline | None = None
        self.packet_in_sink: Callable[[p4runtime_pb2.PacketIn], None] | None = None
        self.digest_sink: Callable[[p4runtime_pb2.DigestList], None] | None = None
        self.stats = {"rx": 0, "tx": 0, "to_cpu": 0, "errors": 0}
        self.packet_errors = PacketErrors(log)  # per kind, rate-limited logs

    def now_us(self) -> int:
        return (self.clock_ns() - self.start_ns) // 1000

    # -- pipeline -------------------------------------------------------------
    def set_pipeline(self, action: int, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        if action == Action.VERIFY:
            build_pipeline(config, self.core_factory)
        elif action == Action.VERIFY_AND_SAVE:
            self.saved = build_pipeline(config, self.core_factory)
        elif action == Action.VERIFY_AND_COMMIT:
            self._commit(build_pipeline(config, self.core_factory))
        elif action == Action.COMMIT:
            if self.saved is None:
                raise P4RuntimeError(code_pb2.FAILED_PRECONDITION, "COMMIT without a saved config")
            if config.cookie.cookie:
                self.saved.config.cookie.cookie = config.cookie.cookie
            self._commit(self.saved)
        elif action == Action.RECONCILE_AND_COMMIT:
            self._reconcile(config)
        else:
            raise P4RuntimeError(code_pb2.INVALID_ARGUMENT, "unspecified pipeline config action")

    def _commit(self, pipeline: Pipeline) -> None:
        with self.lock:
            self.pipeline = pipeline
            self.saved = None
            if self.queues is not None:
                self.queues = EgressQueues(self.queues.priorities, self.queues.depth,
                                           self.queues.rate_pps)
        log.info("pipeline committed: %d tables, %d actions",
                 len(pipeline.index.tables), len(pipeline.index.actions))

    def _reconcile(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        current = self.pipeline
        if (current is not None and current.p4runtime_ready and config.p4info == current.config.p4info
                and config.p4_device_config == current.config.p4_device_config):
            current.config.cookie.CopyFrom(config.cookie)  # same program: keep all state
            return
        if current is None or not current.p4runtime_ready:
            self._commit(build_pipeline(config, self.core_factory))
            return
        raise P4RuntimeError(code_pb2.UNIMPLEMENTED,
                             "RECONCILE_AND_COMMIT of a different program is not supported "
                             "(use VERIFY_AND_COMMIT)")

    def require_pipeline(self) -> Pipeline:
        pipeline = self.pipeline
        if pipeline is None or not pipeline.p4runtime_ready:
            raise P4RuntimeError(code_pb2.FAILED_PRECONDITION, "no forwarding pipeline config set")
        return pipeline

    def load_json(self, bmv2_json: dict) -> None:
        """Run a program given on the command line until a controller sets a pipeline."""
        self._commit(cli_pipeline(bmv2_json, self.core_factory))

    # -- packet path ----------------------------------------------------------
    def receive(self, frame: bytes, port: int) -> None:
        """A frame arrived on ``port``. Never raises: a bad frame is counted and dropped."""
        self.receive_batch((frame,), port)

    def receive_batch(self, frames: Sequence[bytes], port: int) -> None:
        """Frames that arrived on ``port``, in order, under one lock acquisition."""
        with self.lock:
            pipeline = self.pipeline
            if pipeline is None:
                return
            self.stats["rx"] += len(frames)
            core, queues, now_us = pipeline.core, self.queues, self.now_us
            for frame in frames:
                now = now_us()
                try:
                    if queues is None:
                        self._dispatch(pipeline, core.process(frame, port, now))
                    else:
                        for item in core.ingress(frame, port, now):
                            queues.enqueue(item, now)
                        self._dispatch(pipeline, [])
                except Exception as exc:  # a switch never dies on a packet
                    self.stats["errors"] += 1
                    self.packet_errors.record("receive", exc, f"port {port}")

    def service_queues(self) -> int:
        """Run egress for every packet the queues release now; returns how many left."""
        if self.queues is None:
            return 0
        with self.lock:
            pipeline = self.pipeline
            if pipeline is None:
                return 0
            if self.queues.rate_pps is None:
                return self._serve_all(pipeline, self.queues)
            served = 0
            while True:
                now = self.now_us()
                out = self.queues.dequeue(now)
                if out is None:
                    break
                served += 1
                self._egress(pipeline, out.item, now, out.enq_timestamp, out.enq_qdepth,
                             out.deq_qdepth)
        return served

    def _serve_all(self, pipeline: Pipeline, queues: EgressQueues) -> int:
        """No rate limit: every queued packet leaves now, in the order ``dequeue`` would
        give them (popped at once: no Dequeued objects). ``queues`` is ``self.queues``."""
        ready = queues.pop_all()
        now_us = self.now_us
        for item, enq_us, enq_depth, deq_depth in ready:
            self._egress(pipeline, item, now_us(), enq_us, enq_depth, deq_depth)
        return len(ready)

    def _egress(self, pipeline: Pipeline, item: Queued, now: int, enq_us: int, enq_depth: int,
                deq_depth: int) -> None:
        try:
            frames = pipeline.core.egress(item, now, enq_timestamp=enq_us, enq_qdepth=enq_depth,
                                          deq_qdepth=deq_depth, deq_timedelta=now - enq_us)
            self._dispatch(pipeline, frames)
        except Exception as exc:  # a switch never dies on a packet
            self.stats["errors"] += 1
            self.packet_errors.record("egress", exc, f"port {item.egress_port}")

    def queue_wait(self) -> float | None:
        """Seconds until a queued packet may leave (None: nothing queued)."""
        if self.queues is None:
            return None
        with self.lock:
            ready_us = self.queues.next_ready_us()
            if ready_us is None:
                return None
            return max(0.0, (ready_us - self.now_us()) / 1e6)

    def _dispatch(self, pipeline: Pipeline, frames: list[tuple[int, bytes]]) -> None:
        for port, data in frames:
            if port == self.cpu_port:
                self.stats["to_cpu"] += 1
                sink = self.packet_in_sink
                if sink is not None:
                    sink(parse_packet_in(pipeline.index.packet_in, data))
            else:
                self.stats["tx"] += 1
                self.transmit(port, data)
        self._collect_digests(pipeline)

    def packet_out(self, msg: p4runtime_pb2.PacketOut) -> None:
        """Inject a PacketOut as if received on the CPU port (P4RuntimeError if refused)."""
        pipeline = self.require_pipeline()
        if self.cpu_port is None:
            raise P4RuntimeError(code_pb2.FAILED_PRECONDITION,
                                 "no --cpu-port: packet I/O over P4Runtime is disabled")
        frame = build_packet_out(pipeline.index.packet_out, msg)
        self.receive(frame, self.cpu_port)
        self.service_queues()  # do not wait for the packet loop's next turn

    # -- digests --------------------------------------------------------------
    def _collect_digests(self, pipeline: Pipeline) -> None:
        try:
            digests = pipeline.core.take_digests()
        except SwitchRuntimeError:
            return
        if not digests:
            return
        now_ns = self.clock_ns()
        for digest in digests:
            digest_id = pipeline.digest_id_for(digest.name, digest.list_id)
            if digest_id is not None:
                self._send_digests(pipeline.digests.add(digest_id, digest.values, now_ns))

    def poll(self) -> None:
        """Flush digest lists whose timeout expired (call every few ms)."""
        with self.lock:
            pipeline = self.pipeline
            if pipeline is not None:
                self._send_digests(pipeline.digests.poll(self.clock_ns()))

    def ack_digest(self, digest_id: int, list_id: int) -> None:
        with self.lock:
            if self.pipeline is not None:
                self.pipeline.digests.ack(digest_id, list_id)

    def _send_digests(self, ready: list) -> None:
        sink = self.digest_sink
        for batch in ready:
            if sink is None:
                continue
            msg = p4runtime_pb2.DigestList(digest_id=batch.digest_id, list_id=batch.list_id,
                                           timestamp=batch.timestamp_ns)
            for values in batch.values:
                msg.data.append(struct_data(values))
            sink(msg)
