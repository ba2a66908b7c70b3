"""controller.core.p4info_index, controller.core.entries and controller.p4rt_client.

The P4Info below mirrors the control-plane interface of p4src/aggregate.p4 (plus
an LPM and a ternary table for the codec); the client talks to a fake P4Runtime
servicer on port 0.
"""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4hub.controller.core import program as p
from p4hub.controller.core.entries import EntryCodec, decode_value, encode_value
from p4hub.controller.core.p4info_index import EntryError, P4InfoIndex
from p4hub.controller.core.updates import (
    DELETE,
    INSERT,
    MODIFY,
    Entry,
    FieldMatch,
    GroupWrite,
    PBoxJobWrite,
    TableWrite,
)
from p4hub.controller.p4rt_client import P4RuntimeClient, P4RuntimeError

P4INFO_TXT = """
pkg_info { arch: "v1model" }
tables {
  preamble { id: 33554433 name: "MyIngress.jobs" alias: "jobs" }
  match_fields { id: 1 name: "hdr.p4hub.job" bitwidth: 16 match_type: EXACT }
  action_refs { id: 16777217 } action_refs { id: 16777218 } action_refs { id: 21257015 }
  size: 1024
}
tables {
  preamble { id: 33554434 name: "MyIngress.members" alias: "members" }
  match_fields { id: 1 name: "hdr.p4hub.job" bitwidth: 16 match_type: EXACT }
  match_fields { id: 2 name: "hdr.p4hub.rank" bitwidth: 16 match_type: EXACT }
  match_fields { id: 3 name: "hdr.ipv4.srcAddr" bitwidth: 32 match_type: EXACT }
  action_refs { id: 16777219 } action_refs { id: 21257015 }
  size: 4096
}
tables {
  preamble { id: 33554435 name: "MyEgress.result_dst" alias: "result_dst" }
  match_fields { id: 1 name: "standard_metadata.egress_rid" bitwidth: 16 match_type: EXACT }
  action_refs { id: 16777220 }
  size: 4096
}
tables {
  preamble { id: 33554436 name: "MyIngress.routes" alias: "routes" }
  match_fields { id: 1 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: LPM }
  action_refs { id: 21257015 }
}
tables {
  preamble { id: 33554437 name: "MyEgress.acl" alias: "acl" }
  match_fields { id: 1 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: TERNARY }
  match_fields { id: 2 name: "meta.flag" bitwidth: 1 match_type: OPTIONAL }
  action_refs { id: 21257015 }
}
actions {
  preamble { id: 16777217 name: "MyIngress.job_on_switch" alias: "job_on_switch" }
  params { id: 1 name: "world_size" bitwidth: 8 }
  params { id: 2 name: "slot_base" bitwidth: 32 }
  params { id: 3 name: "slot_count" bitwidth: 32 }
  params { id: 4 name: "mcast_grp" bitwidth: 16 }
  params { id: 5 name: "name_tag" bitwidth: 32 }
  params { id: 6 name: "epoch" bitwidth: 32 }
}
actions {
  preamble { id: 16777218 name: "MyIngress.job_on_pbox" alias: "job_on_pbox" }
  params { id: 1 name: "world_size" bitwidth: 8 }
  params { id: 2 name: "slot_base" bitwidth: 32 }
  params { id: 3 name: "slot_count" bitwidth: 32 }
  params { id: 4 name: "name_tag" bitwidth: 32 }
}
actions { preamble { id: 16777219 name: "MyIngress.is_member" alias: "is_member" } }
actions {
  preamble { id: 16777220 name: "MyEgress.set_result_dst" alias: "set_result_dst" }
  params { id: 1 name: "mac" bitwidth: 48 }
  params { id: 2 name: "ip" bitwidth: 32 }
  params { id: 3 name: "udp_port" bitwidth: 16 }
}
actions { preamble { id: 16777221 name: "MyIngress.drop" alias: "MyIngress.drop" } }
actions { preamble { id: 16777222 name: "MyEgress.drop" alias: "MyEgress.drop" } }
actions { preamble { id: 21257015 name: "NoAction" alias: "NoAction" } }
counters {
  preamble { id: 302120071 name: "MyIngress.job_stats" alias: "job_stats" }
  spec { unit: BOTH } size: 8192
}
"""


@pytest.fixture(scope="module")
def p4info() -> p4info_pb2.P4Info:
    return text_format.Parse(P4INFO_TXT, p4info_pb2.P4Info())


@pytest.fixture(scope="module")
def codec(p4info) -> EntryCodec:
    return EntryCodec(P4InfoIndex(p4info))


JOB = Entry(p.JOBS, (FieldMatch(p.JOBS_JOB, 7),), p.ACT_JOB_ON_SWITCH,
            (("world_size", 4), ("slot_base", 0), ("slot_count", 256), ("mcast_grp", 7),
             ("name_tag", 0xDEADBEEF), ("epoch", 1)))


# -- P4Info index -------------------------------------------------------------------


def test_index_resolves_full_names_aliases_suffixes_and_ids(codec):
    index = codec.index
    assert index.table("MyIngress.jobs").id == index.table("jobs").id == 33554433
    assert index.action("set_result_dst").name == "MyEgress.set_result_dst"
    assert index.counter("job_stats").size == 8192
    assert index.by_id(16777219).name == "MyIngress.is_member"
    with pytest.raises(EntryError, match="ambiguous"):
        index.action("drop")
    assert index.action("MyEgress.drop").id == 16777222
    with pytest.raises(EntryError, match="no table named 'nope'"):
        index.table("nope")
    with pytest.raises(EntryError, match="no P4Info object"):
        index.by_id(5)


# -- values ---------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "width", "raw"), [
    (0, 9, b"\x00"), (1, 9, b"\x01"), (0x1FF, 9, b"\x01\xff"), (0x0A000001, 32, b"\x0a\x00\x00\x01"),
    (0xFFFFFFFFFFFF, 48, b"\xff" * 6), (0x00FF, 16, b"\xff"),
])
def test_canonical_bytestrings(value, width, raw):
    assert encode_value(value, width) == raw
    assert decode_value(raw) == value


@pytest.mark.parametrize(("value", "width"), [(512, 9), (-1, 8), (1 << 32, 32)])
def test_values_wider_than_the_field_are_refused(value, width):
    with pytest.raises(EntryError):
        encode_value(value, width)


# -- entries ---------------------------------------------------------------------------


def test_table_entry_by_name(codec):
    pb = codec.table_entry(JOB)
    assert pb.table_id == 33554433
    assert pb.match[0].field_id == 1 and pb.match[0].exact.value == b"\x07"
    assert pb.action.action.action_id == 16777217
    assert [(prm.param_id, prm.value) for prm in pb.action.action.params] == [
        (1, b"\x04"), (2, b"\x00"), (3, b"\x01\x00"), (4, b"\x07"), (5, b"\xde\xad\xbe\xef"),
        (6, b"\x01")]


def test_entry_round_trips_through_protobuf(codec):
    assert codec.entry_from_pb(codec.table_entry(JOB)) == JOB
    lpm = Entry("MyIngress.routes", (FieldMatch("hdr.ipv4.dstAddr", 0x0A000000, prefix_len=8),),
                "NoAction")
    assert codec.entry_from_pb(codec.table_entry(lpm)) == lpm
    acl = Entry("MyEgress.acl", (FieldMatch("hdr.ipv4.dstAddr", 0x0A000000, mask=0xFF000000),
                                 FieldMatch("meta.flag", 1)), "NoAction", priority=10)
    back = codec.entry_from_pb(codec.table_entry(acl))
    assert back == acl


def test_a_read_back_entry_naming_a_table_as_its_action_is_an_entry_error(codec):
    # found by mypy: the action id was looked up without checking it named an action,
    # so a switch answering with a table's id crashed the resync with AttributeError
    pb = codec.table_entry(JOB)
    pb.action.action.action_id = pb.table_id
    with pytest.raises(EntryError, match="is not an action"):
        codec.entry_from_pb(pb)


@pytest.mark.parametrize(("entry", "message"), [
    (Entry(p.JOBS, (FieldMatch("hdr.p4hub.slot", 1),), "NoAction"), "no match field 'hdr.p4hub.slot'"),
    (Entry(p.JOBS, (FieldMatch(p.JOBS_JOB, 1 << 16),), "NoAction"), "does not fit in 16 bits"),
    (Entry(p.JOBS, (FieldMatch(p.JOBS_JOB, 1),), p.ACT_IS_MEMBER), "not allowed in table"),
    (Entry(p.JOBS, (FieldMatch(p.JOBS_JOB, 1),), p.ACT_JOB_ON_PBOX, (("world_size", 1),)), "takes"),
    (Entry("routes", (FieldMatch("hdr.ipv4.dstAddr", 0x0A000001, prefix_len=8),), "NoAction"),
     "bits set past /8"),
    (Entry("routes", (FieldMatch("hdr.ipv4.dstAddr", 0, prefix_len=0),), "NoAction"), "prefix length 0"),
    (Entry("acl", (FieldMatch("hdr.ipv4.dstAddr", 0x0A000001, mask=0xFF000000),), "NoAction",
           priority=1),
     "outside mask"),
])
def test_bad_entries_are_refused(codec, entry, message):
    with pytest.raises(EntryError, match=message):
        codec.table_entry(entry)


def test_updates_translate_ops_groups_and_deletes(codec):
    ups = codec.updates([
        TableWrite("s1", INSERT, JOB),
        TableWrite("s1", DELETE, Entry(p.JOBS, JOB.match)),
        GroupWrite("s1", MODIFY, 7, ((1, 224), (2, 225))),
        GroupWrite("s1", DELETE, 7),
    ])
    assert [u.type for u in ups] == [p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.DELETE,
                                     p4runtime_pb2.Update.MODIFY, p4runtime_pb2.Update.DELETE]
    assert not ups[1].entity.table_entry.HasField("action")
    group = ups[2].entity.packet_replication_engine_entry.multicast_group_entry
    assert group.multicast_group_id == 7
    assert [(r.egress_port, r.instance) for r in group.replicas] == [(1, 224), (2, 225)]
    with pytest.raises(EntryError, match="PBox"):
        codec.updates([PBoxJobWrite("pb1", INSERT, 1)])
    with pytest.raises(EntryError, match="twice"):
        codec.updates([GroupWrite("s1", INSERT, 7, ((1, 1), (1, 1)))])
    with pytest.raises(EntryError, match="unknown update op"):
        codec.updates([TableWrite("s1", "UPSERT", JOB)])


def test_counter_read_entities(codec):
    entity = codec.counter_read("job_stats", 7 * 8 + 2)
    assert entity.counter_entry.counter_id == 302120071 and entity.counter_entry.index.index == 58
    assert not codec.counter_read("job_stats").counter_entry.HasField("index")
    with pytest.raises(EntryError, match="index 8192"):
        codec.counter_read("job_stats", 8192)


# -- the client against a fake P4Runtime server -----------------------------------------


class _Status(grpc.Status):
    def __init__(self, code, details, trailing_metadata):
        self.code, self.details, self.trailing_metadata = code, details, trailing_metadata


class FakeP4Runtime(p4runtime_pb2_grpc.P4RuntimeServicer):
    """Stores table entries; refuses duplicate INSERTs per update, as PI does."""

    def __init__(self, arbitration_code: int = code_pb2.OK) -> None:
        self.arbitration_code = arbitration_code
        self.entries: dict[bytes, p4runtime_pb2.TableEntry] = {}
        self.config: p4runtime_pb2.ForwardingPipelineConfig | None = None
        self.arbitrations: list[p4runtime_pb2.MasterArbitrationUpdate] = []
        self.counters = {58: (1234, 5)}

    def StreamChannel(self, request_iterator, context):
        for request in request_iterator:
            if request.WhichOneof("update") == "arbitration":
                self.arbitrations.append(request.arbitration)
                reply = p4runtime_pb2.StreamMessageResponse()
                reply.arbitration.CopyFrom(request.arbitration)
                reply.arbitration.status.code = self.arbitration_code
                yield reply

    def SetForwardingPipelineConfig(self, request, context):
        self.config = request.config
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        if self.config is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no pipeline")
        reply = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        reply.config.p4info.CopyFrom(self.config.p4info)
        return reply

    def Write(self, request, context):
        errors = []
        for update in request.updates:
            entry = update.entity.table_entry
            key = _key(entry)
            if update.type == p4runtime_pb2.Update.INSERT and key in self.entries:
                errors.append(p4runtime_pb2.Error(canonical_code=code_pb2.ALREADY_EXISTS,
                                                  message="entry exists"))
                continue
            self.entries[key] = entry
            errors.append(p4runtime_pb2.Error(canonical_code=code_pb2.OK))
        if any(e.canonical_code != code_pb2.OK for e in errors):
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message="write failed")
            for e in errors:
                status.details.add().Pack(e)
            context.abort_with_status(_Status(grpc.StatusCode.UNKNOWN, "write failed",
                                              (("grpc-status-details-bin", status.SerializeToString()),)))
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context):
        reply = p4runtime_pb2.ReadResponse()
        for entity in request.entities:
            if entity.WhichOneof("entity") == "table_entry":
                for entry in self.entries.values():
                    if entity.table_entry.table_id in (0, entry.table_id):
                        reply.entities.add().table_entry.CopyFrom(entry)
            else:
                for index, (nbytes, packets) in self.counters.items():
                    out = reply.entities.add().counter_entry
                    out.counter_id = entity.counter_entry.counter_id
                    out.index.index = index
                    out.data.byte_count, out.data.packet_count = nbytes, packets
        yield reply


def _key(entry: p4runtime_pb2.TableEntry) -> bytes:
    bare = p4runtime_pb2.TableEntry()
    bare.CopyFrom(entry)
    bare.ClearField("action")
    return bare.SerializeToString(deterministic=True)


@pytest.fixture
def fake_server():
    servers = []

    def start(servicer):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(grace=None)


def test_client_becomes_primary_pushes_writes_and_reads_back(fake_server, codec, p4info):
    fake = FakeP4Runtime()
    address = fake_server(fake)
    with P4RuntimeClient(address, device_id=3, election_id=(0, 9), timeout=5) as client:
        assert fake.arbitrations[0].device_id == 3 and fake.arbitrations[0].election_id.low == 9
        assert client.get_p4info() is None
        client.set_pipeline(p4info, b'{"program": "aggregate"}')
        assert fake.config.p4_device_config == b'{"program": "aggregate"}'
        assert client.get_p4info().tables[0].preamble.name == "MyIngress.jobs"
        client.write(codec.updates([TableWrite("s1", INSERT, JOB)]))
        entries = [codec.entry_from_pb(e) for e in client.read_table_entries()]
        assert entries == [JOB]
        counters = client.read_counters(codec.index.counter("job_stats").id)
        assert [(c.index.index, c.data.packet_count) for c in counters] == [(58, 5)]


def test_write_errors_are_unpacked_per_update(fake_server, codec):
    fake = FakeP4Runtime()
    address = fake_server(fake)
    other = Entry(p.JOBS, (FieldMatch(p.JOBS_JOB, 8),), p.ACT_JOB_ON_PBOX,
                  (("world_size", 2), ("slot_base", 0), ("slot_count", 1), ("name_tag", 1)))
    with P4RuntimeClient(address, timeout=5) as client:
        client.write(codec.updates([TableWrite("s1", INSERT, JOB)]))
        with pytest.raises(P4RuntimeError) as info:
            client.write(codec.updates([TableWrite("s1", INSERT, other), TableWrite("s1", INSERT, JOB)]))
    err = info.value
    assert err.code == "UNKNOWN"
    assert [(e.index, e.code_name, e.message) for e in err.errors] == [(1, "ALREADY_EXISTS", "entry exists")]
    assert "#1 ALREADY_EXISTS" in str(err)
    assert len(fake.entries) == 2  # the good update was applied


def test_losing_arbitration_raises(fake_server):
    address = fake_server(FakeP4Runtime(arbitration_code=code_pb2.ALREADY_EXISTS))
    with pytest.raises(P4RuntimeError, match="ALREADY_EXISTS: not primary"):
        P4RuntimeClient(address, timeout=5).connect()


def test_no_server_is_unavailable():
    with pytest.raises(P4RuntimeError, match="UNAVAILABLE"):
        P4RuntimeClient("127.0.0.1:1", timeout=0.3).connect()


def test_calls_before_connect_fail_cleanly():
    with pytest.raises(P4RuntimeError, match="not connected"):
        P4RuntimeClient("127.0.0.1:1").write([p4runtime_pb2.Update()])


def test_client_close_ends_the_stream(fake_server):
    fake = FakeP4Runtime()
    address = fake_server(fake)
    client = P4RuntimeClient(address, timeout=5)
    client.connect()
    client.close()
    assert not any(t.name.startswith("p4rt-stream") and t.is_alive() for t in threading.enumerate())
