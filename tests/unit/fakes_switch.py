"""A fake switch core (runtime_api.RuntimeOps), a matching P4Info and a P4Runtime test harness.

The fake keeps state in plain dicts with the contract's error codes; its packet
path is a settable function, so tests decide what comes out of which port.
The P4Info text is hand-written (ids chosen by hand) to cover every match kind,
const tables, direct and indexed counters, meters, a register, a digest and
the controller headers.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable

import grpc
from google.protobuf import text_format
from google.rpc import status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4lite.switch.core.errors import SwitchLoadError
from p4lite.switch.core.runtime_api import (
    CODE_ALREADY_EXISTS,
    CODE_INVALID_ARGUMENT,
    CODE_NOT_FOUND,
    CODE_OUT_OF_RANGE,
    ActionCall,
    Digest,
    MatchField,
    Queued,
    Replica,
    SwitchRuntimeError,
    TableEntry,
)
from p4lite.switch.p4runtime.device import Device
from p4lite.switch.p4runtime.errors import DETAILS_KEY
from p4lite.switch.p4runtime.server import serve
from tests.unit.fake_runtime import UnimplementedRuntime

T_EXACT, T_LPM, T_TERNARY, T_RANGE, T_OPTIONAL, T_CONST, T_CONSTDEF = (
    0x02000001, 0x02000002, 0x02000003, 0x02000004, 0x02000005, 0x02000006, 0x02000007)
A_FORWARD, A_DROP, A_NOACTION, A_SETPRIO = 0x01000001, 0x01000002, 0x01000003, 0x01000004
C_COUNTER, DC_TERNARY, M_METER, R_REG, D_LEARN = 0x12000001, 0x13000001, 0x14000001, 0x16000001, 0x17000001

P4INFO_TEXT = """
pkg_info { arch: "v1model" }
tables {
  preamble { id: 0x02000001 name: "MyIngress.t_exact" alias: "t_exact" }
  match_fields { id: 1 name: "hdr.ethernet.dstAddr" bitwidth: 48 match_type: EXACT }
  action_refs { id: 0x01000001 } action_refs { id: 0x01000002 }
  action_refs { id: 0x01000003 scope: DEFAULT_ONLY }
  size: 1024
}
tables {
  preamble { id: 0x02000002 name: "MyIngress.t_lpm" alias: "t_lpm" }
  match_fields { id: 1 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: LPM }
  action_refs { id: 0x01000001 } action_refs { id: 0x01000002 scope: TABLE_ONLY }
  action_refs { id: 0x01000003 }
  size: 1024
}
tables {
  preamble { id: 0x02000003 name: "MyIngress.t_ternary" alias: "t_ternary" }
  match_fields { id: 1 name: "hdr.ethernet.etherType" bitwidth: 16 match_type: TERNARY }
  action_refs { id: 0x01000001 } action_refs { id: 0x01000003 }
  direct_resource_ids: 0x13000001
  size: 1024
}
tables {
  preamble { id: 0x02000004 name: "MyIngress.t_range" alias: "t_range" }
  match_fields { id: 1 name: "hdr.tcp.dstPort" bitwidth: 16 match_type: RANGE }
  action_refs { id: 0x01000004 } action_refs { id: 0x01000003 }
  size: 1024
}
tables {
  preamble { id: 0x02000005 name: "MyIngress.t_optional" alias: "t_optional" }
  match_fields { id: 1 name: "hdr.ipv4.protocol" bitwidth: 8 match_type: OPTIONAL }
  match_fields { id: 2 name: "meta.valid" bitwidth: 1 match_type: EXACT }
  action_refs { id: 0x01000001 } action_refs { id: 0x01000003 }
  size: 1024
}
tables {
  preamble { id: 0x02000006 name: "MyIngress.t_const" alias: "t_const" }
  match_fields { id: 1 name: "x" bitwidth: 8 match_type: EXACT }
  action_refs { id: 0x01000001 } action_refs { id: 0x01000003 }
  is_const_table: true
  size: 4
}
tables {
  preamble { id: 0x02000007 name: "MyIngress.t_constdef" alias: "t_constdef" }
  match_fields { id: 1 name: "y" bitwidth: 8 match_type: EXACT }
  action_refs { id: 0x01000001 } action_refs { id: 0x01000002 }
  const_default_action_id: 0x01000002
  size: 4
}
actions {
  preamble { id: 0x01000001 name: "MyIngress.forward" alias: "forward" }
  params { id: 1 name: "port" bitwidth: 9 }
}
actions { preamble { id: 0x01000002 name: "MyIngress.drop" alias: "drop" } }
actions { preamble { id: 0x01000003 name: "NoAction" alias: "NoAction" } }
actions {
  preamble { id: 0x01000004 name: "MyIngress.set_prio" alias: "set_prio" }
  params { id: 1 name: "prio" bitwidth: 3 }
  params { id: 2 name: "tag" bitwidth: 12 }
}
counters {
  preamble { id: 0x12000001 name: "MyIngress.c" alias: "c" }
  spec { unit: BOTH } size: 8
}
direct_counters {
  preamble { id: 0x13000001 name: "MyIngress.t_ternary_counter" alias: "t_ternary_counter" }
  spec { unit: BOTH } direct_table_id: 0x02000003
}
meters {
  preamble { id: 0x14000001 name: "MyIngress.m" alias: "m" }
  spec { unit: BYTES } size: 4
}
registers {
  preamble { id: 0x16000001 name: "MyIngress.r" alias: "r" }
  type_spec { bitstring { bit { bitwidth: 32 } } } size: 4
}
digests {
  preamble { id: 0x17000001 name: "learn_t" alias: "learn_t" }
  type_spec { struct { name: "learn_t" } }
}
controller_packet_metadata {
  preamble { id: 0x04000001 name: "packet_in" alias: "packet_in" }
  metadata { id: 1 name: "ingress_port" bitwidth: 9 }
  metadata { id: 2 name: "_pad" bitwidth: 7 }
}
controller_packet_metadata {
  preamble { id: 0x04000002 name: "packet_out" alias: "packet_out" }
  metadata { id: 1 name: "egress_port" bitwidth: 9 }
  metadata { id: 2 name: "_pad" bitwidth: 7 }
}
type_info {
  structs {
    key: "learn_t"
    value {
      members { name: "src" type_spec { bitstring { bit { bitwidth: 48 } } } }
      members { name: "port" type_spec { bitstring { bit { bitwidth: 9 } } } }
    }
  }
}
"""


def p4info() -> p4info_pb2.P4Info:
    return text_format.Parse(P4INFO_TEXT, p4info_pb2.P4Info())


def _table(name: str, *kinds: str) -> dict:
    return {"name": name, "key": [{"match_type": k, "name": f"k{i}"} for i, k in enumerate(kinds)]}


BMV2_JSON = {
    "pipelines": [{"name": "ingress", "tables": [
        _table("MyIngress.t_exact", "exact"), _table("MyIngress.t_lpm", "lpm"),
        _table("MyIngress.t_ternary", "ternary"), _table("MyIngress.t_range", "range"),
        _table("MyIngress.t_optional", "optional", "valid"), _table("MyIngress.t_const", "exact"),
        _table("MyIngress.t_constdef", "exact"),
    ]}],
    "counter_arrays": [{"name": "MyIngress.c", "size": 8}],
    "register_arrays": [{"name": "MyIngress.r", "size": 4, "bitwidth": 32}],
    "meter_arrays": [{"name": "MyIngress.m", "size": 4}],
    "learn_lists": [{"id": 1, "name": "learn_t"}],
}


def bmv2_json_bytes() -> bytes:
    return json.dumps(BMV2_JSON).encode()


Handler = Callable[[bytes, int], list[tuple[int, bytes]]]


class FakeSwitch(UnimplementedRuntime):
    """RuntimeOps over dicts. ``handler(packet, port)`` decides the outputs of ``process``.

    Typed against the contract through ``UnimplementedRuntime`` (a ``RuntimeOps``
    subclass): mypy checks every method here against the Protocol. Its tables, extern
    sizes, register widths and default actions come from the BMv2 JSON, and its state
    errors carry the real core's codes (tests/unit/test_fake_contracts.py holds both to
    the same assertions); it does not check entries against the actions they name.
    """

    def __init__(self, json_dict: dict, drop_port: int = 511, cpu_port: int | None = None) -> None:
        if "pipelines" not in json_dict:
            raise SwitchLoadError("not a BMv2 JSON: no pipelines")
        tables = [t for p in json_dict["pipelines"] for t in p.get("tables", [])]
        self.tables = {t["name"] for t in tables}
        actions = {a["id"]: a["name"] for a in json_dict.get("actions", [])}
        self.program_defaults = {  # what the program sets, absent a runtime default
            t["name"]: ActionCall(actions[t["default_entry"]["action_id"]],
                                  tuple(int(v, 16) for v in t["default_entry"].get("action_data", [])))
            for t in tables if "default_entry" in t and t["default_entry"]["action_id"] in actions}
        self.counter_sizes = {c["name"]: c["size"] for c in json_dict.get("counter_arrays", [])}
        registers = json_dict.get("register_arrays", [])
        self.register_sizes = {r["name"]: r["size"] for r in registers}
        self.register_bits = {r["name"]: r["bitwidth"] for r in registers}
        self.drop_port = drop_port
        self.cpu_port = cpu_port
        self.handler: Handler = lambda packet, port: []
        self._clear()

    def _clear(self) -> None:
        """Every table, extern and replication entry back to the program's start."""
        self.entries: dict[str, dict[tuple, TableEntry]] = {t: {} for t in self.tables}
        self.defaults: dict[str, ActionCall] = {}
        self.direct: dict[tuple, tuple[int, int]] = {}
        self.counters: dict[tuple[str, int], tuple[int, int]] = {}
        self.meters: dict[tuple[str, int], tuple[tuple[int, int], ...] | None] = {}
        self.registers: dict[tuple[str, int], int] = {}
        self.groups: dict[int, list[Replica]] = {}
        self.sessions: dict[int, tuple[list[Replica], int]] = {}
        self.digests: list[Digest] = []
        self.received: list[tuple[bytes, int]] = []

    # packet path
    def process(self, packet: bytes, port: int, now_us: int = 0) -> list[tuple[int, bytes]]:
        self.received.append((packet, port))
        return self.handler(packet, port)

    def ingress(self, packet: bytes, port: int, now_us: int = 0) -> list[Queued]:
        self.received.append((packet, port))
        return [Queued(p, packet[0] & 7 if packet else 0, len(data), data)
                for p, data in self.handler(packet, port)]

    def egress(
        self, item: Queued, now_us: int = 0, *, enq_timestamp: int = 0, enq_qdepth: int = 0,
        deq_qdepth: int = 0, deq_timedelta: int = 0,
    ) -> list[tuple[int, bytes]]:
        assert isinstance(item.state, bytes)  # ingress() above queues the packet itself
        return [(item.egress_port, item.state)]

    def take_digests(self) -> list[Digest]:
        out, self.digests = self.digests, []
        return out

    # tables
    def _table(self, name: str) -> dict[tuple, TableEntry]:
        if name not in self.entries:
            raise SwitchRuntimeError(CODE_NOT_FOUND, f"no table {name}")
        return self.entries[name]

    def table_add(self, entry: TableEntry) -> None:
        table = self._table(entry.table)
        key = (entry.match, entry.priority)
        if key in table:
            raise SwitchRuntimeError(CODE_ALREADY_EXISTS, "duplicate entry")
        table[key] = entry

    def table_modify(self, entry: TableEntry) -> None:
        table = self._table(entry.table)
        key = (entry.match, entry.priority)
        if key not in table:
            raise SwitchRuntimeError(CODE_NOT_FOUND, "no such entry")
        table[key] = entry

    def table_delete(self, table: str, match: tuple[MatchField, ...], priority: int = 0) -> None:
        entries = self._table(table)
        if entries.pop((match, priority), None) is None:
            raise SwitchRuntimeError(CODE_NOT_FOUND, "no such entry")
        self.direct.pop((table, match, priority), None)

    def table_entries(self, table: str) -> list[TableEntry]:
        out = []
        for (match, priority), entry in self._table(table).items():
            nbytes, npackets = self.direct.get((table, match, priority), (0, 0))
            out.append(TableEntry(entry.table, entry.match, entry.action, entry.priority,
                                  nbytes, npackets))
        return out

    def table_clear(self, table: str) -> None:
        self._table(table).clear()

    def table_set_default(self, table: str, action: ActionCall) -> None:
        self._table(table)
        self.defaults[table] = action

    def table_get_default(self, table: str) -> ActionCall:
        self._table(table)
        return self.defaults.get(table, self.program_defaults.get(table, ActionCall("NoAction")))

    def table_reset_default(self, table: str) -> None:
        self._table(table)
        self.defaults.pop(table, None)

    def direct_counter_write(self, table: str, match: tuple[MatchField, ...], priority: int,
                             byte_count: int, packet_count: int) -> None:
        if (match, priority) not in self._table(table):
            raise SwitchRuntimeError(CODE_NOT_FOUND, "no such entry")
        self.direct[(table, match, priority)] = (byte_count, packet_count)

    def direct_meter_set(self, table: str, match: tuple[MatchField, ...], priority: int,
                         rates: tuple[tuple[int, int], ...] | None) -> None:
        if (match, priority) not in self._table(table):
            raise SwitchRuntimeError(CODE_NOT_FOUND, "no such entry")

    # indexed externs
    @staticmethod
    def _check_index(kind: str, sizes: dict[str, int], name: str, index: int) -> None:
        if name not in sizes:
            raise SwitchRuntimeError(CODE_NOT_FOUND, f"no {kind} named {name!r}")
        if not 0 <= index < sizes[name]:
            raise SwitchRuntimeError(CODE_OUT_OF_RANGE, f"{kind} {name!r}: index {index} out of range")

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        self._check_index("counter", self.counter_sizes, name, index)
        return self.counters.get((name, index), (0, 0))

    def counter_write(self, name: str, index: int, byte_count: int, packet_count: int) -> None:
        self._check_index("counter", self.counter_sizes, name, index)
        self.counters[(name, index)] = (byte_count, packet_count)

    def counter_size(self, name: str) -> int:
        self._check_index("counter", self.counter_sizes, name, 0)
        return self.counter_sizes[name]

    def meter_set(self, name: str, index: int, rates: tuple[tuple[int, int], ...] | None) -> None:
        self.meters[(name, index)] = rates

    def meter_get(self, name: str, index: int) -> tuple[tuple[int, int], ...] | None:
        return self.meters.get((name, index))

    def _check_register(self, name: str, index: int) -> None:
        self._check_index("register", self.register_sizes, name, index)

    def register_read(self, name: str, index: int) -> int:
        self._check_register(name, index)
        return self.registers.get((name, index), 0)

    def register_write(self, name: str, index: int, value: int) -> None:
        self._check_register(name, index)
        if not 0 <= value < 1 << self.register_bits[name]:
            raise SwitchRuntimeError(CODE_INVALID_ARGUMENT, f"{value:#x} does not fit {name!r}")
        self.registers[(name, index)] = value

    def register_reset(self, name: str) -> None:
        self._check_register(name, 0)
        for key in [k for k in self.registers if k[0] == name]:
            del self.registers[key]

    def register_size(self, name: str) -> int:
        self._check_register(name, 0)
        return self.register_sizes[name]

    # packet replication engine
    def mc_group_set(self, group: int, replicas: list[Replica]) -> None:
        self.groups[group] = list(replicas)

    def mc_group_delete(self, group: int) -> None:
        if self.groups.pop(group, None) is None:
            raise SwitchRuntimeError(CODE_NOT_FOUND, "no such group")

    def mc_groups(self) -> dict[int, list[Replica]]:
        return dict(self.groups)

    def clone_session_set(self, session: int, replicas: list[Replica], packet_length: int = 0) -> None:
        self.sessions[session] = (list(replicas), packet_length)

    def clone_session_delete(self, session: int) -> None:
        if self.sessions.pop(session, None) is None:
            raise SwitchRuntimeError(CODE_NOT_FOUND, "no such session")

    def clone_sessions(self) -> dict[int, tuple[list[Replica], int]]:
        return dict(self.sessions)

    # the simple_switch_CLI-style PRE calls (mc_mgrp_create ...) stay unimplemented: only
    # the STF runner uses them, never the P4Runtime server

    def reset_state(self) -> None:
        self._clear()  # the program stays loaded, as in the real core


# -- harness: an in-process P4Runtime server on port 0 over the fake core, and a client --

DEVICE_ID = 0
CPU_PORT = 510


class Stream:
    """A StreamChannel client: send() requests, next(kind) waits for a response of that kind."""

    def __init__(self, stub: p4runtime_pb2_grpc.P4RuntimeStub) -> None:
        self._out: queue.Queue = queue.Queue()
        self.responses: queue.Queue = queue.Queue()
        self.error: grpc.RpcError | None = None
        self._call = stub.StreamChannel(iter(self._out.get, None))
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            for msg in self._call:
                self.responses.put(msg)
        except grpc.RpcError as err:
            self.error = err
        self.responses.put(None)

    def send(self, msg: p4runtime_pb2.StreamMessageRequest) -> None:
        self._out.put(msg)

    def arbitrate(self, election_id: int, device_id: int = DEVICE_ID) -> None:
        msg = p4runtime_pb2.StreamMessageRequest()
        msg.arbitration.device_id = device_id
        msg.arbitration.election_id.high = election_id >> 64
        msg.arbitration.election_id.low = election_id & ((1 << 64) - 1)
        self.send(msg)

    def next(self, kind: str, timeout: float = 2.0) -> p4runtime_pb2.StreamMessageResponse | None:
        while True:
            try:
                msg = self.responses.get(timeout=timeout)
            except queue.Empty:
                return None
            if msg is None:
                self.responses.put(None)
                return None
            if msg.WhichOneof("update") == kind:
                return msg

    def close(self) -> None:
        self._out.put(None)
        self._thread.join(timeout=5)


class Harness:
    def __init__(self, cpu_port: int | None = CPU_PORT) -> None:
        self.cores: list[FakeSwitch] = []
        self.sent: list[tuple[int, bytes]] = []
        self.device = Device(DEVICE_ID, self._make_core, cpu_port=cpu_port,
                             transmit=lambda port, data: self.sent.append((port, data)))
        self.server, self.port = serve(self.device, "127.0.0.1:0")
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.streams: list[Stream] = []

    def _make_core(self, json_dict: dict) -> FakeSwitch:
        core = FakeSwitch(json_dict, cpu_port=CPU_PORT)
        self.cores.append(core)
        return core

    @property
    def core(self) -> FakeSwitch:
        return self.cores[-1]

    def stream(self, election_id: int | None = None) -> Stream:
        s = Stream(self.stub)
        self.streams.append(s)
        if election_id is not None:
            s.arbitrate(election_id)
            assert s.next("arbitration") is not None
        return s

    def set_pipeline(self, election_id: int = 1, device_config: bytes | None = None,
                     action: int = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     cookie: int = 0) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=DEVICE_ID, action=action)
        _set_election(req, election_id)
        req.config.p4info.CopyFrom(p4info())
        req.config.p4_device_config = bmv2_json_bytes() if device_config is None else device_config
        if cookie:
            req.config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(req, timeout=5)

    def write(self, *updates: p4runtime_pb2.Update, election_id: int = 1,
              device_id: int = DEVICE_ID) -> None:
        req = p4runtime_pb2.WriteRequest(device_id=device_id)
        _set_election(req, election_id)
        req.updates.extend(updates)
        self.stub.Write(req, timeout=5)

    def read(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=DEVICE_ID)
        req.entities.extend(entities)
        return [e for resp in self.stub.Read(req, timeout=5) for e in resp.entities]

    def close(self) -> None:
        for s in self.streams:
            s.close()
        self.channel.close()
        self.server.stop(None)


def _set_election(req, election_id: int) -> None:  # noqa: ANN001
    if election_id:
        req.election_id.high = election_id >> 64
        req.election_id.low = election_id & ((1 << 64) - 1)


def update(kind: int, **entity) -> p4runtime_pb2.Update:  # noqa: ANN003
    return p4runtime_pb2.Update(type=kind, entity=p4runtime_pb2.Entity(**entity))


def write_errors(err: grpc.RpcError) -> list[p4runtime_pb2.Error]:
    """The per-update p4.v1.Error list of a failed Write."""
    for key, value in err.trailing_metadata() or ():
        if key == DETAILS_KEY:
            status = status_pb2.Status.FromString(value)
            out = []
            for detail in status.details:
                error = p4runtime_pb2.Error()
                assert detail.Unpack(error)
                out.append(error)
            return out
    raise AssertionError("no grpc-status-details-bin trailer")
