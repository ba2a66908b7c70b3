"""Drive the unmodified p4runtime-shell against a running p4lite-switch, one scenario per process.

    python shell_driver.py SCENARIO '{"addr": "127.0.0.1:PORT", ...}'

p4runtime-shell keeps one global client and calls sys.exit on errors, hence one
process per scenario. The last stdout line is a JSON object with the results.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import p4runtime_sh.shell as sh
from google.protobuf.json_format import MessageToDict
from p4runtime_sh.p4runtime import P4RuntimeWriteException

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
TOOL = str(HERE / "netns_tool.py")
CPU_MAC = "08:00:00:00:00:cc"


def connect(p: dict, push: bool) -> None:
    config = sh.FwdPipeConfig(p["p4info"], p["json"]) if push else None
    sh.setup(device_id=0, grpc_addr=p["addr"], election_id=(0, 1), config=config, verbose=False)


def entries(table: str) -> list[dict]:
    """The table's entries as protobuf JSON (bytes base64-encoded)."""
    return [MessageToDict(e.msg()) for e in sh.TableEntry(table).read()]


def route(host: dict, port: int | None = None, mac: str | None = None, modify: bool = False) -> None:
    te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.ipv4_forward")
    te.match["hdr.ipv4.dstAddr"] = f"10.0.{host['index']}.0/24"
    te.action["dstAddr"] = mac or host["mac"]
    te.action["port"] = str(port or host["index"])
    te.modify() if modify else te.insert()


def scenario_program(p: dict) -> dict:
    connect(p, push=True)
    for host in p["hosts"]:
        route(host)
    bcast = sh.TableEntry("MyIngress.l2_exact")(action="MyIngress.set_mcast")
    bcast.match["hdr.ethernet.dstAddr"] = "ff:ff:ff:ff:ff:ff"
    bcast.action["grp"] = "1"
    bcast.insert()
    cpu = sh.TableEntry("MyIngress.l2_exact")(action="MyIngress.to_cpu")
    cpu.match["hdr.ethernet.dstAddr"] = CPU_MAC
    cpu.insert()
    group = sh.MulticastGroupEntry(1)
    for host in p["hosts"]:
        group.add(host["index"], 1)
    group.insert()
    acl = sh.TableEntry("MyIngress.acl_ternary")(action="MyIngress.acl_drop")
    acl.match["hdr.ipv4.srcAddr"] = "10.0.3.3&&&255.255.255.255"
    acl.match["hdr.ipv4.protocol"] = "17&&&0xff"
    acl.priority = 10
    acl.insert()
    ttl = sh.TableEntry("MyIngress.ttl_range")(action="MyIngress.drop")
    ttl.match["hdr.ipv4.ttl"] = "0..1"
    ttl.priority = 1
    ttl.insert()
    proto = sh.TableEntry("MyIngress.proto_optional")(action="MyIngress.drop")
    proto.match["hdr.ipv4.protocol"] = "0x99"
    proto.priority = 1
    proto.insert()
    groups = [MessageToDict(g.msg()) for g in sh.MulticastGroupEntry(1).read()]
    result = {t: entries(f"MyIngress.{t}") for t in
              ("ipv4_lpm", "l2_exact", "acl_ternary", "ttl_range", "proto_optional")}
    result["groups"] = groups
    sh.teardown()
    return result


def scenario_modify_delete(p: dict) -> dict:
    connect(p, push=False)
    h2, h3 = p["hosts"][1], p["hosts"][2]
    route(h2, port=h3["index"], mac=h3["mac"], modify=True)  # misroute h2's subnet to h3
    modified = entries("MyIngress.ipv4_lpm")
    acl = sh.TableEntry("MyIngress.acl_ternary")
    acl.match["hdr.ipv4.srcAddr"] = "10.0.3.3&&&255.255.255.255"
    acl.match["hdr.ipv4.protocol"] = "17&&&0xff"
    acl.priority = 10
    acl.delete()
    ttl = sh.TableEntry("MyIngress.ttl_range")
    ttl.match["hdr.ipv4.ttl"] = "0..1"
    ttl.priority = 1
    ttl.delete()
    proto = sh.TableEntry("MyIngress.proto_optional")
    proto.match["hdr.ipv4.protocol"] = "0x99"
    proto.priority = 1
    proto.delete()
    cpu = sh.TableEntry("MyIngress.l2_exact")(action="MyIngress.forward")
    cpu.match["hdr.ethernet.dstAddr"] = CPU_MAC
    cpu.action["port"] = "2"
    cpu.modify()  # the CPU MAC now goes out of port 2
    left = {t: entries(f"MyIngress.{t}") for t in ("acl_ternary", "ttl_range", "proto_optional")}
    l2 = entries("MyIngress.l2_exact")
    sh.teardown()
    return {"lpm": modified, "left": left, "l2": l2}


def scenario_restore(p: dict) -> dict:
    connect(p, push=False)
    route(p["hosts"][1], modify=True)
    sh.teardown()
    return {"ok": True}


def scenario_counters(p: dict) -> dict:
    connect(p, push=False)
    counts = {}
    for c in sh.CounterEntry("MyIngress.port_counter").read():  # wildcard index
        if c.packet_count:
            counts[c.index] = [c.packet_count, c.byte_count]
    one = sh.CounterEntry("MyIngress.port_counter")
    one.index = 1
    single = [(c.packet_count, c.byte_count) for c in one.read()]
    direct = {}
    for d in sh.DirectCounterEntry("MyIngress.acl_counter").read():
        direct[str(d.table_entry.match)] = d.packet_count
    sh.teardown()
    return {"port_counter": counts, "index1": single, "direct": direct}


def scenario_default_action(p: dict) -> dict:
    """Make the LPM table's default forward everything to port 3, then reset it."""
    connect(p, push=False)
    te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.ipv4_forward", is_default=True)
    te.action["dstAddr"] = p["hosts"][2]["mac"]
    te.action["port"] = "3"
    te.modify()
    read = [MessageToDict(e.msg()) for e in sh.TableEntry("MyIngress.ipv4_lpm")(is_default=True).read()]
    sh.teardown()
    return {"default": read}


def scenario_reset_default(p: dict) -> dict:
    connect(p, push=False)
    te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.drop", is_default=True)
    te.modify()
    sh.teardown()
    return {"ok": True}


def scenario_negatives(p: dict) -> dict:
    connect(p, push=False)
    codes: dict[str, object] = {}  # "OK" or the per-update canonical codes

    def attempt(name: str, fn) -> None:  # noqa: ANN001
        try:
            fn()
            codes[name] = "OK"
        except P4RuntimeWriteException as exc:
            codes[name] = [e.canonical_code for _, e in exc.errors]

    def dup() -> None:
        route(p["hosts"][0])

    def missing() -> None:
        te = sh.TableEntry("MyIngress.ipv4_lpm")
        te.match["hdr.ipv4.dstAddr"] = "10.9.9.0/24"
        te.delete()

    def prio0() -> None:
        te = sh.TableEntry("MyIngress.acl_ternary")(action="MyIngress.acl_pass")
        te.match["hdr.ipv4.protocol"] = "6&&&0xff"
        te.insert()

    attempt("duplicate", dup)
    attempt("delete_missing", missing)
    attempt("priority0_ternary", prio0)
    sh.teardown()
    return codes


def scenario_packetio(p: dict) -> dict:
    connect(p, push=False)
    h1, h2 = p["hosts"][0], p["hosts"][1]
    packet_in = sh.PacketIn()
    sniffer = subprocess.Popen(["ip", "netns", "exec", h2["ns"], PYTHON, TOOL, "sniff", "eth0", "3", "1"],
                               stdout=subprocess.PIPE, text=True)
    assert sniffer.stdout is not None and sniffer.stdout.readline().strip() == "ready"
    out_frame = bytes.fromhex(p["out_frame"])
    sh.PacketOut(payload=out_frame, egress_port="2").send()
    received = json.loads(sniffer.communicate(timeout=30)[0].strip().splitlines()[-1])
    subprocess.run(["ip", "netns", "exec", h1["ns"], PYTHON, TOOL, "send", "eth0", p["in_frame"]],
                   check=True, capture_output=True)
    msgs = list(packet_in.sniff(timeout=3))
    ins = [{"payload": m.packet.payload.hex(),
            "metadata": {md.metadata_id: md.value.hex() for md in m.packet.metadata}} for m in msgs]
    sh.teardown()
    return {"packet_out_seen": received, "packet_in": ins}


def scenario_digest(p: dict) -> dict:
    connect(p, push=False)
    de = sh.DigestEntry("learn_t")
    de.max_timeout_ns = 0
    de.max_list_size = 1
    de.ack_timeout_ns = 10**9
    de.insert()
    # No wait: the Write inserting the DigestEntry returned once the switch applied it,
    # and a digest that arrives before DigestList's reader runs waits in the client's
    # stream queue.
    digests = sh.DigestList()
    subprocess.run(["ip", "netns", "exec", p["hosts"][0]["ns"], PYTHON, TOOL, "send", "eth0",
                    p["frame"]], check=True, capture_output=True)
    got = []
    for msg in digests.sniff(timeout=3):
        for data in msg.digest.data:
            got.append([m.bitstring.hex() for m in data.struct.members])
    sh.teardown()
    return {"digests": got}


if __name__ == "__main__":
    name, params = sys.argv[1], json.loads(sys.argv[2])
    result = globals()[f"scenario_{name}"](params)
    print(json.dumps(result), flush=True)
