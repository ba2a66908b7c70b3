"""p4hub.controller.core.topology: schema validation, cross checks, lookups."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from p4hub.controller.core import topology
from p4hub.controller.core.topology import ConfigError

RACK = {
    "switches": {"s1": {"grpc_addr": "127.0.0.1:50051", "device_id": 0, "slots": 64, "job_slots": 16}},
    "hosts": {
        "h1": {"ip": "10.0.0.1", "mac": "08:00:00:00:01:01", "switch": "s1", "port": 1},
        "h2": {"ip": "10.0.0.2", "mac": "08:00:00:00:01:02", "switch": "s1", "port": 2},
    },
    "pboxes": {"pb1": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64", "switch": "s1", "port": 5}},
}


def rack(**changes) -> dict:
    raw = copy.deepcopy(RACK)
    for path, value in changes.items():
        node: Any = raw
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[key]
        if value is None:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
    return raw


def errors_of(raw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        topology.from_dict(raw)
    return info.value.errors


def test_valid_rack_parses_with_defaults():
    topo = topology.from_dict(rack())
    sw = topo.switches["s1"]
    assert (sw.grpc_addr, sw.device_id, sw.slots, sw.job_slots) == ("127.0.0.1:50051", 0, 64, 16)
    assert topo.hosts["h1"].ip == 0x0A000001
    assert topo.hosts["h1"].mac == 0x080000000101
    assert topo.pboxes["pb1"].slots == 4096  # default
    assert topo.controller.worker_timeout == 30.0
    assert topo.host_by_ip(0x0A000002).name == "h2"
    assert topo.host_by_ip(0x0A0000FF) is None
    assert topo.pbox_of("s1").name == "pb1"
    assert [n.name for n in topo.endpoints_of("s1")] == ["h1", "h2", "pb1"]


def test_load_reads_a_file(tmp_path):
    path = tmp_path / "rack.json"
    path.write_text(json.dumps(rack()))
    assert topology.load(path).hosts.keys() == {"h1", "h2"}


def test_load_reports_json_position(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"switches": {,}}')
    with pytest.raises(ConfigError, match=r"bad.json:1:\d+"):
        topology.load(path)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="nope.json"):
        topology.load(tmp_path / "nope.json")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"hosts__h1__ip": "10.0.0.300"}, "hosts.h1.ip: not an IPv4 address"),
        ({"hosts__h1__mac": "08:00:00:00:01"}, "hosts.h1.mac: not a MAC address"),
        ({"hosts__h1__port": 511}, "hosts.h1.port: 511 outside 0..510"),
        ({"hosts__h1__port": "1"}, "hosts.h1.port: expected an integer"),
        ({"hosts__h1__colour": "red"}, "hosts.h1.colour: unknown key"),
        ({"hosts__h1__switch": None}, "hosts.h1.switch: missing"),
        ({"switches__s1__grpc_addr": "localhost"}, "switches.s1.grpc_addr: expected host:port"),
        ({"switches__s1__slots": 4096}, "switches.s1.slots: 4096 outside 1..1024"),
        ({"controller": {"worker_timeout": 0}}, "controller.worker_timeout: expected a positive"),
        ({"extras": {}}, "extras: unknown section"),
    ],
)
def test_schema_errors_name_the_path(changes, expected):
    assert any(e.startswith(expected) for e in errors_of(rack(**changes))), errors_of(rack(**changes))


def test_every_error_is_reported_at_once():
    errs = errors_of(rack(hosts__h1__ip="x", hosts__h2__mac="y"))
    assert len(errs) == 2


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"hosts__h2__ip": "10.0.0.1"}, "hosts.h2.ip: also used by hosts.h1"),
        ({"hosts__h2__mac": "08:00:00:00:01:01"}, "hosts.h2.mac: also used by hosts.h1"),
        ({"pboxes__pb1__port": 1}, "pboxes.pb1.port: s1 port 1 also used by hosts.h1"),
        ({"hosts__h2__switch": "s9"}, "hosts.h2.switch: no switch named 's9'"),
        ({"switches__s1__job_slots": 65, "pboxes": {}},
         "switches.s1.job_slots: 65 exceeds slots 64, and no PBox"),
        ({"switches": {}}, "switches: at least one switch"),
    ],
)
def test_cross_checks(changes, expected):
    assert any(e.startswith(expected) for e in errors_of(rack(**changes))), errors_of(rack(**changes))


def test_a_job_window_beyond_the_switchs_slots_is_placed_partly_on_its_pboxes():
    assert topology.from_dict(rack(switches__s1__job_slots=65)).switches["s1"].job_slots == 65


def three_pboxes() -> dict:
    """RACK with pb1 (port 5) and two more PBoxes, listed out of port order."""
    raw = rack()
    raw["pboxes"] = {
        "pb3": {"ip": "10.0.0.102", "mac": "08:00:00:00:01:66", "switch": "s1", "port": 7},
        "pb1": raw["pboxes"]["pb1"],
        "pb2": {"ip": "10.0.0.101", "mac": "08:00:00:00:01:65", "switch": "s1", "port": 6,
                "control": "10.99.0.101:48880"},
    }
    return raw


def test_a_rack_may_have_several_pboxes_listed_by_port():
    topo = topology.from_dict(three_pboxes())
    assert [p.name for p in topo.pboxes_of("s1")] == ["pb1", "pb2", "pb3"]
    assert topo.pbox_of("s1").name == "pb1"  # the first by port, not by JSON order
    assert topo.pboxes["pb2"].control == "10.99.0.101:48880"
    assert [n.name for n in topo.endpoints_of("s1")] == ["h1", "h2", "pb1", "pb2", "pb3"]


def test_pboxes_of_follows_ports_not_names():
    raw = three_pboxes()
    raw["pboxes"]["pb1"]["port"] = 9  # now the last
    topo = topology.from_dict(raw)
    assert [p.name for p in topo.pboxes_of("s1")] == ["pb2", "pb3", "pb1"]
    assert topo.pbox_of("s1").name == "pb2"


def test_a_rack_without_pboxes_has_none():
    topo = topology.from_dict(rack(pboxes={}))
    assert topo.pboxes_of("s1") == [] and topo.pbox_of("s1") is None


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("ip", "10.0.0.100", "pboxes.pb2.ip: also used by pboxes.pb1"),
        ("mac", "08:00:00:00:01:66", "pboxes.pb2.mac: also used by pboxes.pb3"),
        ("port", 7, "pboxes.pb2.port: s1 port 7 also used by pboxes.pb3"),
        ("port", 2, "pboxes.pb2.port: s1 port 2 also used by hosts.h2"),
    ],
)
def test_pboxes_of_one_rack_still_need_their_own_addresses_and_ports(key, value, expected):
    raw = three_pboxes()
    raw["pboxes"]["pb2"][key] = value  # pb2 is listed last: the error names it
    errs = errors_of(raw)
    assert errs == [expected], errs


def test_pboxes_on_two_racks():
    raw = three_pboxes()
    raw["switches"]["s2"] = {"grpc_addr": "127.0.0.1:50052"}
    raw["pboxes"]["pb3"].update(switch="s2", port=1)
    topo = topology.from_dict(raw)
    assert [p.name for p in topo.pboxes_of("s1")] == ["pb1", "pb2"]
    assert [p.name for p in topo.pboxes_of("s2")] == ["pb3"]


def test_two_switches_may_not_share_a_grpc_target():
    raw = rack()
    raw["switches"]["s2"] = dict(raw["switches"]["s1"])
    assert any("same grpc_addr and device_id" in e for e in errors_of(raw))


def test_format_helpers_round_trip():
    assert topology.format_ipv4(topology.parse_ipv4("10.1.2.3")) == "10.1.2.3"
    assert topology.format_mac(topology.parse_mac("0a:1b:2c:3d:4e:5f")) == "0a:1b:2c:3d:4e:5f"


def test_standard_rack_description_is_valid_and_predictable():
    topo = topology.from_dict(topology.rack_dict(4, "127.0.0.1:9559", pbox_control="10.0.0.100:48880"))
    assert [(h.name, topology.format_ipv4(h.ip), h.port) for h in topo.endpoints_of("s1")] == [
        ("w1", "10.0.0.1", 1), ("w2", "10.0.0.2", 2), ("w3", "10.0.0.3", 3), ("w4", "10.0.0.4", 4),
        ("pbox", "10.0.0.100", 5)]
    assert topo.pboxes["pbox"].control == "10.0.0.100:48880"
    assert topology.format_mac(topo.hosts["w3"].mac) == "08:00:00:00:01:03"
    with pytest.raises(ConfigError):
        topology.rack_dict(0, "127.0.0.1:9559")


def test_standard_rack_with_three_pboxes():
    controls = ["10.99.0.100:48880", "10.99.0.101:48880", "10.99.0.102:48880"]
    raw = topology.rack_dict(4, "127.0.0.1:9559", pboxes=3, pbox_controls=controls)
    topo = topology.from_dict(raw)
    assert [(p.name, topology.format_ipv4(p.ip), topology.format_mac(p.mac), p.port, p.control)
            for p in topo.pboxes_of("s1")] == [
        ("pbox", "10.0.0.100", "08:00:00:00:01:64", 5, controls[0]),
        ("pbox2", "10.0.0.101", "08:00:00:00:01:65", 6, controls[1]),
        ("pbox3", "10.0.0.102", "08:00:00:00:01:66", 7, controls[2])]
    assert [n.port for n in topo.endpoints_of("s1")] == list(range(1, 8))
    assert topo.pbox_of("s1").name == "pbox"


def test_standard_rack_pboxes_without_control_and_at_the_limits():
    topo = topology.from_dict(topology.rack_dict(99, "127.0.0.1:9559", pboxes=8, pbox_slots=64))
    assert [(p.name, p.port, p.control, p.slots) for p in topo.pboxes_of("s1")][-1] == (
        "pbox8", 107, "", 64)
    assert topology.format_ipv4(topo.pboxes["pbox8"].ip) == "10.0.0.107"
    assert topology.rack_pbox(2, 4) == ("pbox2", "10.0.0.101", "08:00:00:00:01:65", 6)


def test_one_pbox_control_is_still_accepted_alone():
    one = topology.rack_dict(2, "127.0.0.1:9559", pbox_control="10.99.0.100:48880")
    assert one == topology.rack_dict(2, "127.0.0.1:9559", pbox_controls=["10.99.0.100:48880"])
    assert one["pboxes"]["pbox"]["control"] == "10.99.0.100:48880"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"pboxes": 0}, "pboxes: 0 outside 1..8"),
        ({"pboxes": 9}, "pboxes: 9 outside 1..8"),
        ({"pboxes": 2, "pbox_controls": ["a:1"]}, "pbox_controls: 1 addresses for 2 PBoxes"),
        ({"pboxes": 2, "pbox_control": "a:1"}, "pbox_controls: 1 addresses for 2 PBoxes"),
        ({"pbox_controls": "a:1"}, "pbox_controls: expected a sequence"),
        ({"pbox_control": "a:1", "pbox_controls": ["a:1"]}, "pbox_control and pbox_controls"),
    ],
)
def test_standard_rack_refuses_bad_pbox_arguments(kwargs, expected):
    with pytest.raises(ConfigError) as info:
        topology.rack_dict(4, "127.0.0.1:9559", **kwargs)
    assert info.value.errors[0].startswith(expected), info.value.errors


def test_tls_section_paths_are_relative_to_the_file(tmp_path):
    assert topology.from_dict(RACK).tls is None  # plaintext without it
    raw = {**RACK, "tls": {"ca": "tls/ca.pem", "cert": "/abs/c.pem", "key": "tls/c.key"}}
    (tmp_path / "rack.json").write_text(json.dumps(raw))
    tls = topology.load(tmp_path / "rack.json").tls
    assert tls == topology.TlsConf(str(tmp_path / "tls/ca.pem"), "/abs/c.pem",
                                   str(tmp_path / "tls/c.key"))
    assert topology.from_dict({**RACK, "tls": {"ca": "ca.pem"}}).tls == topology.TlsConf("ca.pem")


@pytest.mark.parametrize(("tls", "expected"), [
    ({"cert": "c.pem", "key": "k"}, "tls.ca: missing"),
    ({"ca": "ca.pem", "cert": "c.pem"}, "tls: give both cert and key"),
    ({"ca": "", "cert": "c", "key": "k"}, "tls.ca: expected a non-empty string"),
    ({"ca": "ca.pem", "password": "x"}, "tls.password: unknown key"),
])
def test_tls_section_errors(tls, expected):
    assert any(expected in e for e in errors_of({**RACK, "tls": tls}))
