"""The P4Runtime server over gRPC (port 0) with a fake core: RPCs, status codes, streams."""

from __future__ import annotations

import json

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4lite.switch.core.runtime_api import Digest, MatchField
from p4lite.switch.p4runtime.device_config import encode_p4_device_config
from tests.unit.fakes_switch import (
    A_DROP,
    A_FORWARD,
    A_NOACTION,
    A_SETPRIO,
    BMV2_JSON,
    C_COUNTER,
    CPU_PORT,
    D_LEARN,
    DEVICE_ID,
    M_METER,
    R_REG,
    T_CONST,
    T_CONSTDEF,
    T_EXACT,
    T_LPM,
    T_OPTIONAL,
    T_RANGE,
    T_TERNARY,
    Harness,
    bmv2_json_bytes,
    p4info,
    update,
    write_errors,
)

Update = p4runtime_pb2.Update
Cfg = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetCfg = p4runtime_pb2.GetForwardingPipelineConfigRequest


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    harness.close()


@pytest.fixture
def hp(h):
    """A harness with a primary (election id 1) and the pipeline set."""
    h.primary = h.stream(1)
    h.set_pipeline()
    return h


def forward(port: int, action_id: int = A_FORWARD) -> p4runtime_pb2.TableAction:
    action = p4runtime_pb2.TableAction()
    action.action.action_id = action_id
    action.action.params.add(param_id=1, value=port.to_bytes(2, "big"))
    return action


def exact_entry(mac: bytes, port: int = 1) -> p4runtime_pb2.TableEntry:
    entry = p4runtime_pb2.TableEntry(table_id=T_EXACT, action=forward(port))
    entry.match.add(field_id=1).exact.value = mac
    return entry


def ternary_entry(value: int, mask: int, priority: int) -> p4runtime_pb2.TableEntry:
    entry = p4runtime_pb2.TableEntry(table_id=T_TERNARY, action=forward(2), priority=priority)
    fm = entry.match.add(field_id=1)
    fm.ternary.value = value.to_bytes(2, "big")
    fm.ternary.mask = mask.to_bytes(2, "big")
    return entry


def write_code(h: Harness, *updates: p4runtime_pb2.Update, election_id: int = 1) -> grpc.StatusCode | None:
    try:
        h.write(*updates, election_id=election_id)
    except grpc.RpcError as err:
        return err.code()
    return None


def update_codes(h: Harness, *updates: p4runtime_pb2.Update) -> list[int]:
    with pytest.raises(grpc.RpcError) as info:
        h.write(*updates)
    assert info.value.code() == grpc.StatusCode.UNKNOWN
    return [e.canonical_code for e in write_errors(info.value)]


# -- arbitration ----------------------------------------------------------------

def test_arbitration_primary_backup_and_failover(h):
    a = h.stream()
    a.arbitrate(5)
    reply = a.next("arbitration")
    assert reply.arbitration.status.code == code_pb2.OK
    assert reply.arbitration.election_id.low == 5
    b = h.stream()
    b.arbitrate(3)
    reply = b.next("arbitration")
    assert reply.arbitration.status.code == code_pb2.ALREADY_EXISTS
    assert reply.arbitration.election_id.low == 5  # the primary's id
    # a higher id takes over: everyone is told
    c = h.stream()
    c.arbitrate(9)
    assert c.next("arbitration").arbitration.status.code == code_pb2.OK
    assert a.next("arbitration").arbitration.status.code == code_pb2.ALREADY_EXISTS
    assert b.next("arbitration").arbitration.election_id.low == 9
    # the primary leaves: the next highest becomes primary and is told
    c.close()
    reply = a.next("arbitration")
    assert reply.arbitration.status.code == code_pb2.OK
    assert reply.arbitration.election_id.low == 5


def test_arbitration_errors_end_the_stream(h):
    a = h.stream(7)
    dup = h.stream()
    dup.arbitrate(7)
    assert dup.next("arbitration") is None
    assert dup.error.code() == grpc.StatusCode.INVALID_ARGUMENT
    wrong = h.stream()
    wrong.arbitrate(8, device_id=42)
    assert wrong.next("arbitration") is None
    assert wrong.error.code() == grpc.StatusCode.NOT_FOUND
    a.arbitrate(7, device_id=3)
    assert a.next("arbitration") is None
    assert a.error.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_backup_cannot_write_or_set_pipeline(h):
    h.stream(10)
    h.stream(2)
    with pytest.raises(grpc.RpcError) as info:
        h.set_pipeline(election_id=2)
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    h.set_pipeline(election_id=10)
    assert write_code(h, update(Update.INSERT, table_entry=exact_entry(b"\x01")),
                      election_id=2) == grpc.StatusCode.PERMISSION_DENIED


def test_check_order_device_then_primary_then_pipeline(h):
    h.stream(1)
    entry = update(Update.INSERT, table_entry=exact_entry(b"\x01"))
    with pytest.raises(grpc.RpcError) as info:
        h.write(entry, device_id=9, election_id=2)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert write_code(h, entry, election_id=2) == grpc.StatusCode.PERMISSION_DENIED
    assert write_code(h, entry, election_id=1) == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as info:
        h.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_write_without_election_id_allowed_only_without_streams(h):
    h.set_pipeline(election_id=0)
    assert write_code(h, update(Update.INSERT, table_entry=exact_entry(b"\x01")), election_id=0) is None
    h.stream(1)
    assert write_code(h, update(Update.INSERT, table_entry=exact_entry(b"\x02")),
                      election_id=0) == grpc.StatusCode.PERMISSION_DENIED


# -- pipeline config --------------------------------------------------------------

def test_pipeline_raw_and_wrapped_device_config_and_get(h):
    h.stream(1)
    wrapped = encode_p4_device_config(bmv2_json_bytes())
    h.set_pipeline(device_config=wrapped, cookie=77)
    resp = h.stub.GetForwardingPipelineConfig(
        GetCfg(device_id=DEVICE_ID, response_type=GetCfg.ALL))
    assert resp.config.cookie.cookie == 77
    assert resp.config.p4info.tables[0].preamble.id == T_EXACT
    assert resp.config.p4_device_config == wrapped
    only_cookie = h.stub.GetForwardingPipelineConfig(
        GetCfg(device_id=DEVICE_ID, response_type=GetCfg.COOKIE_ONLY))
    assert not only_cookie.config.p4info.tables and not only_cookie.config.p4_device_config
    p4info_only = h.stub.GetForwardingPipelineConfig(
        GetCfg(device_id=DEVICE_ID, response_type=GetCfg.P4INFO_AND_COOKIE))
    assert p4info_only.config.p4info.tables and not p4info_only.config.p4_device_config
    dev_only = h.stub.GetForwardingPipelineConfig(
        GetCfg(device_id=DEVICE_ID, response_type=GetCfg.DEVICE_CONFIG_AND_COOKIE))
    assert dev_only.config.p4_device_config == wrapped and not dev_only.config.p4info.tables
    h.set_pipeline(device_config=bmv2_json_bytes())  # raw JSON too
    assert len(h.cores) == 2


def test_commit_wipes_state_and_verify_does_not_install(hp):
    hp.write(update(Update.INSERT, table_entry=exact_entry(b"\x01")))
    hp.set_pipeline(action=Cfg.VERIFY)
    assert len(hp.device.pipeline.core.table_entries("MyIngress.t_exact")) == 1
    hp.set_pipeline(action=Cfg.VERIFY_AND_SAVE)
    assert len(hp.device.pipeline.core.table_entries("MyIngress.t_exact")) == 1
    hp.set_pipeline(action=Cfg.COMMIT)
    assert hp.device.pipeline.core.table_entries("MyIngress.t_exact") == []


def test_bad_device_config_is_invalid_argument(hp):
    with pytest.raises(grpc.RpcError) as info:
        hp.set_pipeline(device_config=b"\x00\x01garbage")
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as info:
        hp.set_pipeline(device_config=json.dumps({"no": "pipelines"}).encode())
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as info:
        hp.set_pipeline(action=Cfg.COMMIT)  # nothing saved
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_reconcile_same_program_keeps_state(hp):
    hp.write(update(Update.INSERT, table_entry=exact_entry(b"\x01")))
    hp.set_pipeline(action=Cfg.RECONCILE_AND_COMMIT, cookie=5)
    assert len(hp.device.pipeline.core.table_entries("MyIngress.t_exact")) == 1
    changed = dict(BMV2_JSON, extra=1)
    with pytest.raises(grpc.RpcError) as info:
        hp.set_pipeline(action=Cfg.RECONCILE_AND_COMMIT, device_config=json.dumps(changed).encode())
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_capabilities(h):
    assert h.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest()).p4runtime_api_version == "1.3.0"


# -- table entries -------------------------------------------------------------

def test_insert_read_modify_delete_exact_with_padded_and_canonical_values(hp):
    hp.write(update(Update.INSERT, table_entry=exact_entry(b"\x00\x00\x00\x00\x00\x0a", port=3)))
    stored = hp.core.table_entries("MyIngress.t_exact")[0]
    assert stored.match == (MatchField("exact", 10),) and stored.action.params == (3,)
    [entity] = hp.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=T_EXACT)))
    assert entity.table_entry.match[0].exact.value == b"\x0a"  # canonical out
    assert entity.table_entry.action.action.params[0].value == b"\x03"
    hp.write(update(Update.MODIFY, table_entry=exact_entry(b"\x0a", port=4)))
    assert hp.core.table_entries("MyIngress.t_exact")[0].action.params == (4,)
    hp.write(update(Update.DELETE, table_entry=exact_entry(b"\x0a")))
    assert hp.core.table_entries("MyIngress.t_exact") == []


def test_every_match_kind_round_trips(hp):
    lpm = p4runtime_pb2.TableEntry(table_id=T_LPM, action=forward(1))
    fm = lpm.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = bytes([10, 0, 0, 0]), 8
    rng = p4runtime_pb2.TableEntry(table_id=T_RANGE, priority=3)
    rng.action.action.action_id = A_SETPRIO
    rng.action.action.params.add(param_id=1, value=b"\x05")
    rng.action.action.params.add(param_id=2, value=b"\x01\x00")
    fm = rng.match.add(field_id=1)
    fm.range.low, fm.range.high = b"\x00\x50", b"\x01\xbb"
    opt = p4runtime_pb2.TableEntry(table_id=T_OPTIONAL, action=forward(2), priority=1)
    opt.match.add(field_id=1).optional.value = b"\x06"
    opt.match.add(field_id=2).exact.value = b"\x01"
    hp.write(update(Update.INSERT, table_entry=lpm), update(Update.INSERT, table_entry=rng),
             update(Update.INSERT, table_entry=opt),
             update(Update.INSERT, table_entry=ternary_entry(0x0800, 0xFF00, 10)))
    core = hp.core
    assert core.table_entries("MyIngress.t_lpm")[0].match == (MatchField("lpm", 0x0A000000, prefix_len=8),)
    assert core.table_entries("MyIngress.t_range")[0].match == (MatchField("range", 80, high=443),)
    assert core.table_entries("MyIngress.t_optional")[0].match == (
        MatchField("optional", 6, mask=0xFF), MatchField("valid", 1))
    assert core.table_entries("MyIngress.t_ternary")[0].match == (
        MatchField("ternary", 0x0800, mask=0xFF00),)
    entities = hp.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))  # all tables
    by_table = {e.table_entry.table_id: e.table_entry for e in entities}
    assert set(by_table) == {T_LPM, T_RANGE, T_OPTIONAL, T_TERNARY}
    assert by_table[T_LPM].match[0].lpm.value == bytes([10, 0, 0, 0])
    assert by_table[T_RANGE].match[0].range.high == b"\x01\xbb"
    assert by_table[T_RANGE].priority == 3
    assert by_table[T_TERNARY].match[0].ternary.mask == b"\xff\x00"


def test_dont_care_fields_are_omitted_on_read(hp):
    opt = p4runtime_pb2.TableEntry(table_id=T_OPTIONAL, action=forward(2), priority=1)
    opt.match.add(field_id=2).exact.value = b"\x00"
    hp.write(update(Update.INSERT, table_entry=opt))
    assert hp.core.table_entries("MyIngress.t_optional")[0].match[0] == MatchField("optional", 0, mask=0)
    [e] = hp.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=T_OPTIONAL)))
    assert [m.field_id for m in e.table_entry.match] == [2]


def test_read_with_match_filters(hp):
    hp.write(update(Update.INSERT, table_entry=exact_entry(b"\x01")),
             update(Update.INSERT, table_entry=exact_entry(b"\x02", port=7)))
    got = hp.read(p4runtime_pb2.Entity(table_entry=exact_entry(b"\x00\x00\x00\x00\x00\x02")))
    assert len(got) == 1 and got[0].table_entry.action.action.params[0].value == b"\x07"


def test_default_entry_modify_read_and_reset(hp):
    default = p4runtime_pb2.TableEntry(table_id=T_EXACT, is_default_action=True)
    default.action.action.action_id = A_DROP
    hp.write(update(Update.MODIFY, table_entry=default))
    assert hp.core.defaults["MyIngress.t_exact"].name == "MyIngress.drop"
    [e] = hp.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(
        table_id=T_EXACT, is_default_action=True)))
    assert e.table_entry.is_default_action and e.table_entry.action.action.action_id == A_DROP
    hp.write(update(Update.MODIFY, table_entry=p4runtime_pb2.TableEntry(
        table_id=T_EXACT, is_default_action=True)))
    assert "MyIngress.t_exact" not in hp.core.defaults
    assert update_codes(hp, update(Update.INSERT, table_entry=default)) == [code_pb2.INVALID_ARGUMENT]


def test_direct_counter_data_on_read_and_write(hp):
    entry = ternary_entry(0x0800, 0xFFFF, 5)
    entry.counter_data.byte_count, entry.counter_data.packet_count = 1500, 3
    hp.write(update(Update.INSERT, table_entry=entry))
    request = p4runtime_pb2.TableEntry(table_id=T_TERNARY)
    request.counter_data.SetInParent()
    [e] = hp.read(p4runtime_pb2.Entity(table_entry=request))
    assert (e.table_entry.counter_data.byte_count, e.table_entry.counter_data.packet_count) == (1500, 3)
    [e] = hp.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=T_TERNARY)))
    assert not e.table_entry.HasField("counter_data")  # only when asked, like PI
    dce = p4runtime_pb2.DirectCounterEntry(table_entry=ternary_entry(0x0800, 0xFFFF, 5))
    dce.table_entry.ClearField("action")
    dce.data.packet_count = 9
    hp.write(update(Update.MODIFY, direct_counter_entry=dce))
    [e] = hp.read(p4runtime_pb2.Entity(direct_counter_entry=p4runtime_pb2.DirectCounterEntry(
        table_entry=p4runtime_pb2.TableEntry(table_id=T_TERNARY))))
    assert e.direct_counter_entry.data.packet_count == 9



def test_direct_resource_reads_of_every_table_and_of_a_table_without_one(hp):
    hp.write(update(Update.INSERT, table_entry=ternary_entry(0x0800, 0xFFFF, 5)))
    hp.write(update(Update.INSERT, table_entry=exact_entry(b"\x01")))
    every_counter = p4runtime_pb2.Entity(direct_counter_entry=p4runtime_pb2.DirectCounterEntry())
    [e] = hp.read(every_counter)  # table_id 0: only tables with a direct counter
    assert e.direct_counter_entry.table_entry.table_id == T_TERNARY
    assert hp.read(p4runtime_pb2.Entity(direct_meter_entry=p4runtime_pb2.DirectMeterEntry())) == []
    no_counter = p4runtime_pb2.Entity(direct_counter_entry=p4runtime_pb2.DirectCounterEntry(
        table_entry=p4runtime_pb2.TableEntry(table_id=T_EXACT)))
    no_meter = p4runtime_pb2.Entity(direct_meter_entry=p4runtime_pb2.DirectMeterEntry(
        table_entry=p4runtime_pb2.TableEntry(table_id=T_TERNARY)))
    for entity, message in ((no_counter, "has no direct counter"), (no_meter, "has no direct meter")):
        with pytest.raises(grpc.RpcError) as info:
            hp.read(entity)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in info.value.details()

# -- negative cases: per-update codes ---------------------------------------------

def test_duplicate_insert_is_already_exists_in_details(hp):
    entry = update(Update.INSERT, table_entry=exact_entry(b"\x01"))
    hp.write(entry)
    other = update(Update.INSERT, table_entry=exact_entry(b"\x02"))
    assert update_codes(hp, other, entry) == [code_pb2.OK, code_pb2.ALREADY_EXISTS]
    assert len(hp.core.table_entries("MyIngress.t_exact")) == 2  # the good update applied


def test_delete_or_modify_missing_is_not_found(hp):
    assert update_codes(hp, update(Update.DELETE, table_entry=exact_entry(b"\x09"))) == [code_pb2.NOT_FOUND]
    assert update_codes(hp, update(Update.MODIFY, table_entry=exact_entry(b"\x09"))) == [code_pb2.NOT_FOUND]


@pytest.mark.parametrize("entry", [
    exact_entry(b"\x01\x00\x00\x00\x00\x00\x00"),  # 7 bytes for a 48-bit field
    exact_entry(b"\x01", port=512),  # 10 bits for a 9-bit param
    ternary_entry(0x0800, 0xFF00, 0),  # priority 0 on a ternary table
    ternary_entry(0x0801, 0xFF00, 1),  # value bits outside the mask
    ternary_entry(0, 0, 1),  # explicit don't-care
    p4runtime_pb2.TableEntry(table_id=0x0200FFFF, action=forward(1)),  # unknown table
    p4runtime_pb2.TableEntry(table_id=T_EXACT, action=forward(1)),  # missing exact field
], ids=["wide-value", "wide-param", "prio0-ternary", "value-outside-mask", "mask0",
        "unknown-table", "missing-exact"])
def test_invalid_entries_are_invalid_argument(hp, entry):
    assert update_codes(hp, update(Update.INSERT, table_entry=entry)) == [code_pb2.INVALID_ARGUMENT]


def test_more_invalid_arguments(hp):
    prio_on_exact = exact_entry(b"\x01")
    prio_on_exact.priority = 4
    lpm = p4runtime_pb2.TableEntry(table_id=T_LPM, action=forward(1))
    fm = lpm.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = bytes([10, 0, 0, 1]), 8  # bits past the prefix
    default_only = exact_entry(b"\x01")
    default_only.action.action.action_id = A_NOACTION
    default_only.action.action.ClearField("params")
    missing_param = exact_entry(b"\x03")
    missing_param.action.action.ClearField("params")
    codes = update_codes(hp, *(update(Update.INSERT, table_entry=e)
                               for e in (prio_on_exact, lpm, default_only, missing_param)))
    assert codes == [code_pb2.INVALID_ARGUMENT] * 4


def test_const_table_and_const_default_are_permission_denied(hp):
    const = p4runtime_pb2.TableEntry(table_id=T_CONST, action=forward(1))
    const.match.add(field_id=1).exact.value = b"\x01"
    constdef = p4runtime_pb2.TableEntry(table_id=T_CONSTDEF, is_default_action=True)
    constdef.action.action.action_id = A_FORWARD
    constdef.action.action.params.add(param_id=1, value=b"\x01")
    codes = update_codes(hp, update(Update.INSERT, table_entry=const),
                         update(Update.MODIFY, table_entry=constdef))
    assert codes == [code_pb2.PERMISSION_DENIED, code_pb2.PERMISSION_DENIED]


def test_non_continue_on_error_atomicity_is_unimplemented(hp):
    req = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID, atomicity=p4runtime_pb2.WriteRequest.DATAPLANE_ATOMIC)
    req.election_id.low = 1
    with pytest.raises(grpc.RpcError) as info:
        hp.stub.Write(req)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


# -- PRE, counters, meters, registers, digests --------------------------------------

def test_multicast_groups_and_clone_sessions(hp):
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    pre.multicast_group_entry.multicast_group_id = 1
    pre.multicast_group_entry.replicas.add(egress_port=1, instance=1)
    pre.multicast_group_entry.replicas.add(port=b"\x00\x02", instance=1)  # padded bytes form
    hp.write(update(Update.INSERT, packet_replication_engine_entry=pre))
    assert [(r.port, r.rid) for r in hp.core.groups[1]] == [(1, 1), (2, 1)]
    assert update_codes(hp, update(Update.INSERT, packet_replication_engine_entry=pre)) == [
        code_pb2.ALREADY_EXISTS]
    clone = p4runtime_pb2.PacketReplicationEngineEntry()
    clone.clone_session_entry.session_id = 5
    clone.clone_session_entry.packet_length_bytes = 64
    clone.clone_session_entry.replicas.add(egress_port=3)
    hp.write(update(Update.INSERT, packet_replication_engine_entry=clone))
    got = hp.read(p4runtime_pb2.Entity(packet_replication_engine_entry=p4runtime_pb2.PacketReplicationEngineEntry()))
    kinds = [e.packet_replication_engine_entry.WhichOneof("type") for e in got]
    assert kinds == ["multicast_group_entry", "clone_session_entry"]
    assert got[1].packet_replication_engine_entry.clone_session_entry.packet_length_bytes == 64
    hp.write(update(Update.DELETE, packet_replication_engine_entry=pre))
    assert update_codes(hp, update(Update.DELETE, packet_replication_engine_entry=pre)) == [code_pb2.NOT_FOUND]
    zero = p4runtime_pb2.PacketReplicationEngineEntry()
    zero.multicast_group_entry.multicast_group_id = 0
    dup = p4runtime_pb2.PacketReplicationEngineEntry()
    dup.multicast_group_entry.multicast_group_id = 2
    dup.multicast_group_entry.replicas.add(egress_port=1)
    dup.multicast_group_entry.replicas.add(egress_port=1)
    assert update_codes(hp, update(Update.INSERT, packet_replication_engine_entry=zero),
                        update(Update.INSERT, packet_replication_engine_entry=dup)) == [
        code_pb2.INVALID_ARGUMENT, code_pb2.INVALID_ARGUMENT]


def test_counters_wildcard_index_and_out_of_range(hp):
    hp.core.counters[("MyIngress.c", 2)] = (100, 1)
    got = hp.read(p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(counter_id=C_COUNTER)))
    assert len(got) == 8 and got[2].counter_entry.data.byte_count == 100
    assert got[2].counter_entry.index.index == 2
    everything = hp.read(p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry()))
    assert len(everything) == 8
    ce = p4runtime_pb2.CounterEntry(counter_id=C_COUNTER)
    ce.index.index = 3
    ce.data.packet_count = 7
    hp.write(update(Update.MODIFY, counter_entry=ce))
    assert hp.core.counters[("MyIngress.c", 3)] == (0, 7)
    ce.index.index = 8
    assert update_codes(hp, update(Update.MODIFY, counter_entry=ce)) == [code_pb2.OUT_OF_RANGE]
    assert update_codes(hp, update(Update.INSERT, counter_entry=ce)) == [code_pb2.INVALID_ARGUMENT]


def test_meters_and_registers(hp):
    me = p4runtime_pb2.MeterEntry(meter_id=M_METER)
    me.index.index = 1
    me.config.cir, me.config.cburst, me.config.pir, me.config.pburst = 100, 10, 200, 20
    hp.write(update(Update.MODIFY, meter_entry=me))
    [e] = hp.read(p4runtime_pb2.Entity(meter_entry=me))
    assert (e.meter_entry.config.cir, e.meter_entry.config.pburst) == (100, 20)
    reg = p4runtime_pb2.RegisterEntry(register_id=R_REG)
    reg.index.index = 2
    reg.data.bitstring = b"\x00\x00\x01\x00"
    hp.write(update(Update.MODIFY, register_entry=reg))
    assert hp.core.registers[("MyIngress.r", 2)] == 256
    got = hp.read(p4runtime_pb2.Entity(register_entry=p4runtime_pb2.RegisterEntry(register_id=R_REG)))
    assert [e.register_entry.data.bitstring for e in got] == [b"\x00", b"\x00", b"\x01\x00", b"\x00"]
    reg.data.bitstring = b"\x01\x00\x00\x00\x00"
    assert update_codes(hp, update(Update.MODIFY, register_entry=reg)) == [code_pb2.INVALID_ARGUMENT]


def test_digest_config_and_digest_list_with_ack(hp):
    de = p4runtime_pb2.DigestEntry(digest_id=D_LEARN)
    de.config.max_list_size = 1
    de.config.ack_timeout_ns = 10**12
    hp.write(update(Update.INSERT, digest_entry=de))
    [e] = hp.read(p4runtime_pb2.Entity(digest_entry=p4runtime_pb2.DigestEntry()))
    assert e.digest_entry.config.max_list_size == 1

    def learn(packet: bytes, port: int) -> list:
        hp.core.digests.append(Digest("learn_t", 1, (0xAABB, port)))
        return []

    hp.core.handler = learn
    hp.device.receive(b"x", 3)
    msg = hp.primary.next("digest")
    assert msg.digest.digest_id == D_LEARN
    assert [m.bitstring for m in msg.digest.data[0].struct.members] == [b"\xaa\xbb", b"\x03"]
    hp.device.receive(b"x", 3)  # same data, not acked yet: suppressed
    assert hp.primary.next("digest", timeout=0.3) is None
    ack = p4runtime_pb2.StreamMessageRequest()
    ack.digest_ack.digest_id, ack.digest_ack.list_id = D_LEARN, msg.digest.list_id
    hp.primary.send(ack)
    for _ in range(50):  # the ack is processed by the stream's reader thread
        hp.device.receive(b"x", 3)
        again = hp.primary.next("digest", timeout=0.1)
        if again is not None:
            break
    assert again is not None and again.digest.list_id != msg.digest.list_id


# -- packet I/O -----------------------------------------------------------------------

def test_packet_out_builds_header_and_packet_in_parses_it(hp):
    hp.core.handler = lambda packet, port: [(CPU_PORT, packet)] if port == CPU_PORT else [(2, packet)]
    out = p4runtime_pb2.StreamMessageRequest()
    out.packet.payload = b"hello"
    out.packet.metadata.add(metadata_id=1, value=b"\x01\x03")  # egress_port 259
    hp.primary.send(out)
    msg = hp.primary.next("packet")
    # packet_out header: 9 bits 259 + 7 pad bits = 0x8180, injected on the CPU port
    assert hp.core.received[-1] == (b"\x81\x80hello", CPU_PORT)
    # echoed to the CPU port: parsed as packet_in (same layout), metadata canonical
    assert msg.packet.payload == b"hello"
    assert [(m.metadata_id, m.value) for m in msg.packet.metadata] == [(1, b"\x01\x03"), (2, b"\x00")]


def test_packet_out_errors_are_stream_errors(hp):
    bad = p4runtime_pb2.StreamMessageRequest()
    bad.packet.payload = b"x"
    bad.packet.metadata.add(metadata_id=9, value=b"\x01")
    hp.primary.send(bad)
    err = hp.primary.next("error")
    assert err.error.canonical_code == code_pb2.INVALID_ARGUMENT
    assert err.error.packet_out.packet_out.payload == b"x"
    backup = hp.stream(0)
    good = p4runtime_pb2.StreamMessageRequest()
    good.packet.payload = b"y"
    backup.send(good)
    assert backup.next("error").error.canonical_code == code_pb2.PERMISSION_DENIED


def test_packet_in_goes_to_primary_only(hp):
    backup = hp.stream(0)
    hp.core.handler = lambda packet, port: [(CPU_PORT, b"\x00\x80" + packet)]
    hp.device.receive(b"payload", 1)
    msg = hp.primary.next("packet")
    assert msg.packet.payload == b"payload"
    assert msg.packet.metadata[0].value == b"\x01"  # ingress_port 1
    assert backup.next("packet", timeout=0.3) is None


def test_core_failure_on_a_packet_never_escapes(hp):
    def boom(packet: bytes, port: int) -> list:
        raise ValueError("truncated header")

    hp.core.handler = boom
    hp.device.receive(b"\x00", 1)
    assert hp.device.stats["errors"] == 1
    hp.core.handler = lambda packet, port: [(2, packet)]
    hp.device.receive(b"ok", 1)
    assert hp.sent == [(2, b"ok")]


def test_strict_priority_queues_in_the_device():
    from p4lite.switch.core.queues import EgressQueues
    from p4lite.switch.p4runtime.device import Device
    from tests.unit.fakes_switch import FakeSwitch, p4info

    sent: list[tuple[int, bytes]] = []
    device = Device(0, FakeSwitch, transmit=lambda port, data: sent.append((port, data)),
                    queues=EgressQueues(priorities=8))
    config = p4runtime_pb2.ForwardingPipelineConfig(p4_device_config=bmv2_json_bytes())
    config.p4info.CopyFrom(p4info())
    device.set_pipeline(Cfg.VERIFY_AND_COMMIT, config)
    device.pipeline.core.handler = lambda packet, port: [(2, packet)]
    for prio in (0, 7, 3, 7):  # FakeSwitch: priority = first byte & 7
        device.receive(bytes([prio, len(sent)]), 1)
    device.service_queues()
    assert [data[0] for _, data in sent] == [7, 7, 3, 0]


def test_a_pipeline_larger_than_grpc_default_limit_is_accepted(h):
    h.stream(1)
    big = dict(BMV2_JSON, padding="x" * (5 << 20))  # > gRPC's 4 MB default
    channel = grpc.insecure_channel(f"127.0.0.1:{h.port}",
                                    options=[("grpc.max_send_message_length", 64 << 20)])
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    req = Cfg(device_id=DEVICE_ID, action=Cfg.VERIFY_AND_COMMIT)
    req.election_id.low = 1
    req.config.p4info.CopyFrom(p4info())
    req.config.p4_device_config = json.dumps(big).encode()
    stub.SetForwardingPipelineConfig(req, timeout=10)
    channel.close()
    assert h.device.pipeline is not None


def test_a_second_server_cannot_share_the_port(h):
    from p4lite.switch.p4runtime.device import Device
    from p4lite.switch.p4runtime.server import serve

    with pytest.raises(OSError):
        serve(Device(DEVICE_ID, lambda j: None), f"127.0.0.1:{h.port}")


def test_rate_limited_queues_tell_the_loop_when_to_come_back():
    from p4lite.switch.core.queues import EgressQueues
    from p4lite.switch.p4runtime.device import Device
    from tests.unit.fakes_switch import FakeSwitch

    clock = [0]
    sent: list[tuple[int, bytes]] = []
    device = Device(0, FakeSwitch, transmit=lambda port, data: sent.append((port, data)),
                    queues=EgressQueues(priorities=8, rate_pps=1000), clock_ns=lambda: clock[0])
    config = p4runtime_pb2.ForwardingPipelineConfig(p4_device_config=bmv2_json_bytes())
    config.p4info.CopyFrom(p4info())
    device.set_pipeline(Cfg.VERIFY_AND_COMMIT, config)
    device.pipeline.core.handler = lambda packet, port: [(2, packet)]
    assert device.queue_wait() is None
    for prio in (0, 0, 0):
        device.receive(bytes([prio]), 1)
    assert device.service_queues() == 1  # one packet per ms on port 2
    assert device.queue_wait() == pytest.approx(0.001)
    device.receive(bytes([6]), 1)  # a high-priority packet overtakes the queued ones
    clock[0] += 1_000_000
    assert device.queue_wait() == 0.0
    assert device.service_queues() == 1 and sent[-1][1] == bytes([6])
    clock[0] += 2_000_000
    assert device.service_queues() == 1  # no burst credit: still one per ms
