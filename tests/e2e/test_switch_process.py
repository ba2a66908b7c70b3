"""p4lite-switch as a process on veth pairs, driven by the unmodified p4runtime-shell.

Three hosts (namespaces p4lh1..3) on switch ports 1..3; the switch runs in the
root namespace with the tutorials' argument layout. Traffic is checked on the
far side with raw sockets inside the namespaces.
"""

from __future__ import annotations

import base64
import queue
from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4lite.switch.p4runtime.device_config import encode_p4_device_config
from p4lite.switch.process.pcap import PcapError, read_pcap
from tests.e2e.p4 import frames as F
from tests.e2e.p4.netns import (
    CPU_PORT,
    Rack,
    Sniffer,
    SwitchProcess,
    compile_program,
    run_shell,
    send_frames,
)
from tests.support.wait import wait_settled, wait_until

pytestmark = pytest.mark.root

P4 = Path(__file__).parent / "p4" / "p4l_switch.p4"


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> tuple[Path, Path]:
    return compile_program(P4, tmp_path_factory.mktemp("p4l-build"))


@pytest.fixture
def rack():
    r = Rack(3)
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def switch(rack, tmp_path):
    s = SwitchProcess(rack.ports, tmp_path)
    try:
        yield s
    finally:
        s.stop()


def hosts_param(rack: Rack) -> list[dict]:
    return [{"index": h.index, "ns": h.ns, "mac": h.mac, "ip": h.ip} for h in rack.hosts]


def shell(switch: SwitchProcess, rack: Rack, program, scenario: str, **params) -> dict:  # noqa: ANN001, ANN003
    json_path, p4info = program
    return run_shell(switch.addr, scenario, json=str(json_path), p4info=str(p4info),
                     hosts=hosts_param(rack), **params)


def deliver(src, dst, frames: list[bytes], tag: bytes) -> list[bytes]:  # noqa: ANN001
    """Send ``frames`` from ``src``; the frames carrying ``tag`` that reached ``dst``.

    A TCP marker to ``dst`` follows them (the test program forwards it on every
    path used here); waiting for the marker instead of a fixed window keeps a
    loaded machine from turning a slow send into a false "dropped".
    """
    marker = b"marker-" + tag + b"-end"
    sniffer = Sniffer(dst, 20.0, until=marker)
    send_frames(src, *frames, F.tcp(src, dst.ip, tag=marker))
    got = sniffer.frames()
    assert any(marker in f for f in got), "the marker frame never arrived"
    return [f for f in F.with_tag(got, tag) if marker not in f]


def test_p4runtime_shell_programs_the_switch_and_traffic_follows(rack, switch, program):
    h1, h2, h3 = rack.hosts
    assert switch.listen_seconds < 10.0  # the tutorials give a switch 10 s to listen
    got = shell(switch, rack, program, "program")
    assert len(got["ipv4_lpm"]) == 3 and len(got["l2_exact"]) == 2
    assert len(got["acl_ternary"]) == len(got["ttl_range"]) == len(got["proto_optional"]) == 1
    lpm = sorted((b64hex(e["match"][0]["lpm"]["value"]), e["match"][0]["lpm"]["prefixLen"])
                 for e in got["ipv4_lpm"])
    assert lpm == [("0a000100", 24), ("0a000200", 24), ("0a000300", 24)]  # canonical bytes
    [group] = got["groups"]
    replicas = group["multicastGroupEntry"]["replicas"]
    assert sorted(r["egressPort"] for r in replicas) == [1, 2, 3]
    [ternary] = got["acl_ternary"]
    assert ternary["priority"] == 10
    assert b64hex(ternary["match"][1]["ternary"]["mask"]) == "ff"
    [rng] = got["ttl_range"]
    assert b64hex(rng["match"][0]["range"]["high"]) == "01"

    # LPM routing: MACs rewritten, TTL decremented, checksum updated
    [routed] = deliver(h1, h2, [F.udp(h1, h2.ip, tag=b"lpm-1")], b"lpm-1")
    assert F.routed_ok(routed, h2, ttl=64)
    ping = h1.exec("ping", "-c", "2", "-W", "1", h2.ip, check=False)
    assert ping.returncode == 0, ping.stdout + ping.stderr
    # multicast group 1: a broadcast reaches every port (the sender's too)
    s2, s3 = Sniffer(h2, 20.0, until=b"mc-1"), Sniffer(h3, 20.0, until=b"mc-1")
    send_frames(h1, F.broadcast(h1, tag=b"mc-1"))
    assert len(F.with_tag(s2.frames(), b"mc-1")) == 1 and len(F.with_tag(s3.frames(), b"mc-1")) == 1
    # ternary ACL drops UDP from h3 but not TCP; range drops TTL <= 2; optional drops proto 0x99
    assert deliver(h3, h1, [F.udp(h3, h1.ip, tag=b"acl-udp")], b"acl-udp") == []
    assert len(deliver(h3, h1, [F.tcp(h3, h1.ip, tag=b"acl-tcp")], b"acl-tcp")) == 1
    assert deliver(h1, h2, [F.udp(h1, h2.ip, ttl=2, tag=b"ttl-2")], b"ttl-2") == []
    assert len(deliver(h1, h2, [F.udp(h1, h2.ip, ttl=3, tag=b"ttl-3")], b"ttl-3")) == 1
    assert deliver(h1, h2, [F.udp(h1, h2.ip, proto=0x99, tag=b"proto-99")], b"proto-99") == []

    counters = shell(switch, rack, program, "counters")
    assert int(counters["port_counter"]["1"][0]) >= 5
    assert counters["index1"][0][0] == counters["port_counter"]["1"][0]
    assert sum(counters["direct"].values()) >= 1  # the ACL drop entry counted h3's UDP

    changed = shell(switch, rack, program, "modify_delete")
    assert changed["left"] == {"acl_ternary": [], "ttl_range": [], "proto_optional": []}
    actions = sorted(e["action"]["action"]["actionId"] for e in changed["l2"])
    assert len(actions) == 2 and actions[0] != actions[1]  # set_mcast and, now, forward
    assert len(deliver(h1, h3, [F.udp(h1, h2.ip, tag=b"misroute")], b"misroute")) == 1
    assert len(deliver(h3, h1, [F.udp(h3, h1.ip, tag=b"acl-gone")], b"acl-gone")) == 1
    shell(switch, rack, program, "restore")
    assert len(deliver(h1, h2, [F.udp(h1, h2.ip, tag=b"restored")], b"restored")) == 1
    assert len(deliver(h1, h2, [F.udp(h1, h2.ip, ttl=2, tag=b"ttl-gone")], b"ttl-gone")) == 1
    assert len(deliver(h1, h2, [F.udp(h1, h2.ip, proto=0x99, tag=b"proto-gone")], b"proto-gone")) == 1
    cpu_mac = F.udp(h1, h2.ip, dst_mac="08:00:00:00:00:cc", tag=b"l2-modified")
    assert deliver(h1, h2, [cpu_mac], b"l2-modified") == [cpu_mac]  # bridged unchanged

    default = shell(switch, rack, program, "default_action")
    [dflt] = default["default"]
    assert dflt["isDefaultAction"] and len(dflt["action"]["action"]["params"]) == 2
    assert len(deliver(h1, h3, [F.udp(h1, "10.0.9.9", tag=b"dflt")], b"dflt")) == 1
    shell(switch, rack, program, "reset_default")
    assert deliver(h1, h3, [F.udp(h1, "10.0.9.9", tag=b"dflt-2")], b"dflt-2") == []

    negatives = shell(switch, rack, program, "negatives")
    assert negatives == {"duplicate": [code_pb2.ALREADY_EXISTS], "delete_missing": [code_pb2.NOT_FOUND],
                         "priority0_ternary": [code_pb2.INVALID_ARGUMENT]}
    assert switch.alive()
    assert switch.stop() == 0


def test_packet_out_packet_in_and_digests(rack, switch, program):
    h1, h2, _ = rack.hosts
    shell(switch, rack, program, "program")
    out_frame = F.udp(h1, h2.ip, tag=b"from-controller")
    in_frame = F.udp(h1, h2.ip, dst_mac="08:00:00:00:00:cc", tag=b"to-controller")
    io = shell(switch, rack, program, "packetio", out_frame=out_frame.hex(), in_frame=in_frame.hex())
    assert [bytes.fromhex(f) for f in io["packet_out_seen"]] == [out_frame]
    [packet_in] = io["packet_in"]
    assert bytes.fromhex(packet_in["payload"]) == in_frame
    assert packet_in["metadata"] == {"1": "01", "2": "00"}  # ingress_port 1, canonical
    learn = F.udp(h1, h2.ip, tag=b"learn")
    got = shell(switch, rack, program, "digest", frame=learn.hex())
    assert [h1.mac.replace(":", ""), "01"] in got["digests"]


def b64hex(text: str) -> str:
    return base64.b64decode(text).hex()


def raw_client(switch: SwitchProcess):  # noqa: ANN201
    channel = grpc.insecure_channel(switch.addr)
    return channel, p4runtime_pb2_grpc.P4RuntimeStub(channel)


def test_status_codes_from_the_real_process(rack, tmp_path, program):
    json_path, p4info_path = program
    switch = SwitchProcess(rack.ports, tmp_path, cpu_port=CPU_PORT)
    channel, stub = raw_client(switch)
    try:
        p4info = text_format.Parse(p4info_path.read_text(), p4info_pb2.P4Info())
        lpm = next(t for t in p4info.tables if t.preamble.name == "MyIngress.ipv4_lpm")
        fwd = next(a for a in p4info.actions if a.preamble.name == "MyIngress.ipv4_forward")

        def entry(value: bytes, table_id: int = lpm.preamble.id) -> p4runtime_pb2.Update:
            te = p4runtime_pb2.TableEntry(table_id=table_id)
            fm = te.match.add(field_id=1)
            fm.lpm.value, fm.lpm.prefix_len = value, 24
            te.action.action.action_id = fwd.preamble.id
            te.action.action.params.add(param_id=1, value=b"\x01")
            te.action.action.params.add(param_id=2, value=b"\x01")
            return p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT,
                                        entity=p4runtime_pb2.Entity(table_entry=te))

        def write(*updates: p4runtime_pb2.Update, election: int = 1) -> grpc.RpcError | None:
            req = p4runtime_pb2.WriteRequest(device_id=0)
            req.election_id.low = election
            req.updates.extend(updates)
            try:
                stub.Write(req, timeout=5)
            except grpc.RpcError as err:
                return err
            return None

        # arbitration: primary 2, backup 1 (streams kept open in the background)
        streams = []
        for eid in (2, 1):
            msg = p4runtime_pb2.StreamMessageRequest()
            msg.arbitration.device_id = 0
            msg.arbitration.election_id.low = eid
            q: queue.Queue = queue.Queue()
            q.put(msg)
            call = stub.StreamChannel(iter(q.get, None))
            reply = next(call)
            streams.append((q, call, reply))
        assert streams[0][2].arbitration.status.code == code_pb2.OK
        assert streams[1][2].arbitration.status.code == code_pb2.ALREADY_EXISTS
        before = write(entry(b"\x0a\x00\x01\x00"), election=2)
        assert before.code() == grpc.StatusCode.FAILED_PRECONDITION  # no pipeline yet
        cfg = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=0, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        cfg.election_id.low = 2
        cfg.config.p4info.CopyFrom(p4info)
        # the tutorials' form: a serialized p4.tmp.P4DeviceConfig around the JSON
        cfg.config.p4_device_config = encode_p4_device_config(json_path.read_bytes())
        stub.SetForwardingPipelineConfig(cfg, timeout=10)
        assert write(entry(b"\x0a\x00\x01\x00"), election=1).code() == grpc.StatusCode.PERMISSION_DENIED
        assert write(entry(b"\x0a\x00\x01\x00"), election=2) is None
        for update, code in [(entry(b"\x0a\x00\x01\x00"), code_pb2.ALREADY_EXISTS),
                             (entry(b"\x01\x0a\x00\x01\x00"), code_pb2.INVALID_ARGUMENT),
                             (entry(b"\x0a\x00\x02\x00", table_id=0x02FFFFFF), code_pb2.INVALID_ARGUMENT)]:
            err = write(update, election=2)
            assert err.code() == grpc.StatusCode.UNKNOWN
            details = dict(err.trailing_metadata())["grpc-status-details-bin"]
            status = status_pb2.Status.FromString(details)
            error = p4runtime_pb2.Error()
            status.details[0].Unpack(error)
            assert error.canonical_code == code
        for q, _call, _ in streams:
            q.put(None)
    finally:
        channel.close()
        assert switch.stop() == 0


def _pcap_frames(switch, name: str) -> list[bytes]:  # noqa: ANN001 - a SwitchProcess
    """The frames in the switch's pcap ``name`` so far (flushed when its loop goes idle)."""
    try:
        return [f for _, f in read_pcap(switch.pcap_dir / f"{name}.pcap")]
    except (OSError, PcapError):  # not created or its header not flushed yet
        return []


def test_garbage_and_truncated_frames_never_stop_the_switch(rack, switch, program):
    h1, h2, h3 = rack.hosts
    shell(switch, rack, program, "program")
    for host in rack.hosts:
        send_frames(host, *F.garbage_frames(host))
    # every port took its junk in (up to the last frame the kernel passes on: it drops
    # the cut-short VLAN tag and the runt after it) before the switch's health is read
    wait_until(lambda: all(F.garbage_frames(h)[-3] in _pcap_frames(switch, f"{h.switch_iface}_in")
                           for h in rack.hosts))
    assert switch.alive()
    [routed] = deliver(h1, h2, [F.udp(h1, h2.ip, tag=b"after-garbage")], b"after-garbage")
    assert F.routed_ok(routed, h2, ttl=64)
    assert len(deliver(h3, h2, [F.tcp(h3, h2.ip, tag=b"after-garbage-3")], b"after-garbage-3")) == 1
    # the in/out pcaps BMv2-style, one pair per interface
    names = sorted(p.name for p in switch.pcap_dir.iterdir())
    assert "p4ls1-eth1_in.pcap" in names and "p4ls1-eth2_out.pcap" in names
    # buffered, but flushed once the loop goes idle: readable while the switch runs
    routed_out = wait_settled(lambda: _pcap_frames(switch, "p4ls1-eth2_out"),
                              lambda frames: any(b"after-garbage" in f for f in frames),
                              timeout=5, quiet=5)
    assert any(b"after-garbage" in f for f in routed_out)
    assert switch.stop() == 0
    log = switch.log()
    assert "ignoring option --thrift-port" in log or "ignoring option --nanolog" in log


def test_rate_limited_priority_queues_on_live_traffic(rack, tmp_path, program):
    """--priority-queues 8 --queue-rate 200: a late high-priority frame overtakes a backlog."""
    h1, h2, _ = rack.hosts
    switch = SwitchProcess(rack.ports, tmp_path, extra_target=(
        "--priority-queues", "8", "--queue-rate", "200"))
    try:
        shell(switch, rack, program, "program")
        lows = [F.udp(h1, h2.ip, tag=b"q-low-%02d" % i) for i in range(20)]
        high = F.udp(h1, h2.ip, tag=b"q-high", tos=7)  # priority = diffserv[2:0]
        got = deliver(h1, h2, [*lows, high], b"q-")
        assert len(got) == 21
        order = [f[f.index(b"q-"):].decode() for f in got]
        assert order.index("q-high") <= 3, order  # not 21st: it jumped the queue
        assert [t for t in order if t != "q-high"] == sorted(t for t in order if t != "q-high")
    finally:
        assert switch.stop() == 0
