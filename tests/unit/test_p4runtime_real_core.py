"""The P4Runtime server in front of the real switch core (samples.l3_router), in process."""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from bench._frames import ipv4_frame
from p4lite.switch.core.switch import Switch
from p4lite.switch.p4runtime.device import Device
from p4lite.switch.p4runtime.server import serve
from tests.support.samples import L3_ROUTER_P4INFO, l3_router
from tests.unit.fakes_switch import update, write_errors

T_LPM, A_FWD, A_DROP = 0x02000101, 0x01000101, 0x01000102


@pytest.fixture
def setup():
    sent: list[tuple[int, bytes]] = []
    device = Device(0, lambda j: Switch(j), transmit=lambda port, data: sent.append((port, data)))
    server, port = serve(device, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
        device_id=0, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    req.config.p4info.CopyFrom(text_format.Parse(L3_ROUTER_P4INFO, p4info_pb2.P4Info()))
    req.config.p4_device_config = json.dumps(l3_router()).encode()
    stub.SetForwardingPipelineConfig(req, timeout=10)
    yield device, stub, sent
    channel.close()
    server.stop(None)


def route(prefix: bytes, plen: int, mac: bytes, port: int) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=T_LPM)
    fm = te.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = prefix, plen
    te.action.action.action_id = A_FWD
    te.action.action.params.add(param_id=1, value=mac)
    te.action.action.params.add(param_id=2, value=port.to_bytes(2, "big"))
    return te


def write(stub, *updates) -> None:  # noqa: ANN001
    req = p4runtime_pb2.WriteRequest(device_id=0)
    req.updates.extend(updates)
    stub.Write(req, timeout=5)


def test_routes_written_over_p4runtime_forward_packets(setup):
    device, stub, sent = setup
    write(stub, update(p4runtime_pb2.Update.INSERT,
                       table_entry=route(b"\x0a\x00\x02\x00", 24, b"\x08\x00\x00\x00\x02\x22", 2)))
    device.receive(ipv4_frame(b"\x0a\x00\x02\x02"), 1)
    [(port, frame)] = sent
    assert port == 2
    assert frame[:6] == bytes.fromhex("080000000222") and frame[6:12] == bytes.fromhex("0800000000fe")
    assert frame[14 + 8] == 63  # TTL decremented
    device.receive(ipv4_frame(b"\x0a\x00\x03\x03"), 1)  # no route: default drop
    assert len(sent) == 1
    resp = list(stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[p4runtime_pb2.Entity(
        table_entry=p4runtime_pb2.TableEntry(table_id=T_LPM))])))
    [entity] = [e for r in resp for e in r.entities]
    assert entity.table_entry.match[0].lpm.value == b"\x0a\x00\x02\x00"
    assert entity.table_entry.action.action.params[1].value == b"\x02"  # canonical
    [default] = [e for r in stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[
        p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(
            table_id=T_LPM, is_default_action=True))])) for e in r.entities]
    assert default.table_entry.action.action.action_id == A_DROP


def test_real_core_codes_for_duplicates_and_missing(setup):
    _, stub, _ = setup
    entry = route(b"\x0a\x00\x02\x00", 24, b"\x01", 2)
    write(stub, update(p4runtime_pb2.Update.INSERT, table_entry=entry))
    with pytest.raises(grpc.RpcError) as info:
        write(stub, update(p4runtime_pb2.Update.INSERT, table_entry=entry),
              update(p4runtime_pb2.Update.DELETE, table_entry=route(b"\x0a\x00\x09\x00", 24, b"\x01", 2)),
              update(p4runtime_pb2.Update.MODIFY, table_entry=route(b"\x0a\x00\x02\x00", 24, b"\x02", 3)))
    assert info.value.code() == grpc.StatusCode.UNKNOWN
    assert [e.canonical_code for e in write_errors(info.value)] == [
        code_pb2.ALREADY_EXISTS, code_pb2.NOT_FOUND, code_pb2.OK]


def test_garbage_through_the_real_core_never_raises(setup):
    device, stub, sent = setup
    write(stub, update(p4runtime_pb2.Update.INSERT,
                       table_entry=route(b"\x0a\x00\x02\x00", 24, b"\x02", 2)))
    good = ipv4_frame(b"\x0a\x00\x02\x02")
    for junk in (b"", b"\x00", good[:14], good[:20], good[:33], bytes(range(256)) * 6):
        device.receive(junk, 1)
    device.receive(good, 1)
    assert sent[-1][0] == 2


def test_priority_queue_path_with_the_real_core():
    from p4lite.switch.core.queues import EgressQueues

    sent: list[tuple[int, bytes]] = []
    device = Device(0, lambda j: Switch(j), transmit=lambda port, data: sent.append((port, data)),
                    queues=EgressQueues(priorities=8, depth=4))
    config = p4runtime_pb2.ForwardingPipelineConfig(p4_device_config=json.dumps(l3_router()).encode())
    config.p4info.CopyFrom(text_format.Parse(L3_ROUTER_P4INFO, p4info_pb2.P4Info()))
    device.set_pipeline(p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, config)
    from p4lite.switch.p4runtime.write import apply_update

    apply_update(device.pipeline, update(p4runtime_pb2.Update.INSERT,
                                         table_entry=route(b"\x0a\x00\x02\x00", 24, b"\x02", 2)))
    for _ in range(6):
        device.receive(ipv4_frame(b"\x0a\x00\x02\x02"), 1)
    assert sent == []  # queued, not yet served
    assert device.service_queues() == 4 and device.queues.dropped == 2  # depth 4: tail drop
    assert [p for p, _ in sent] == [2, 2, 2, 2]
    assert sent[0][1][14 + 8] == 63
