"""topologies.rack without Mininet: the names, addresses and ports of a rack with several
PBoxes, the controller's view of it, and the per-PBox process bookkeeping (with fake
hosts whose popen runs a stand-in for p4hub-pbox on this machine)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from p4hub.controller.core import topology
from p4hub.topologies import rack
from p4hub.topologies.rack import Rack, RackConfig, RackError


def test_pbox_names_and_addresses_follow_rack_dict():
    assert [rack.pbox_name(i) for i in range(3)] == ["pbox", "pbox2", "pbox3"]
    assert [rack.pbox_ip(i) for i in range(3)] == ["10.0.0.100", "10.0.0.101", "10.0.0.102"]
    assert rack.pbox_ip(0) == rack.PBOX_IP and rack.pbox_name(0) == rack.PBOX_NAME
    assert rack.pbox_control(1) == "10.99.0.101:48880"
    assert rack.MAX_PBOXES == topology.MAX_RACK_PBOXES
    for index in range(rack.MAX_PBOXES):
        name, ip, mac, port = topology.rack_pbox(index + 1, 4)
        assert (name, ip, mac) == (rack.pbox_name(index), rack.pbox_ip(index),
                                   rack.host_mac(rack.pbox_ip(index)))


def test_pbox_index_names_what_the_rack_has():
    assert rack.pbox_index("pbox", 1) == 0 and rack.pbox_index("pbox3", 3) == 2
    with pytest.raises(ValueError, match=r"no PBox 'pbox3' in this rack \(it has pbox, pbox2\)"):
        rack.pbox_index("pbox3", 2)
    with pytest.raises(ValueError):
        rack.pbox_index("pbox1", 3)  # the first is plain "pbox"


def test_switch_ports_put_the_pboxes_after_the_workers_and_the_extras_last():
    assert rack.switch_ports(2, 3, 2) == {"w1": 1, "w2": 2, "pbox": 3, "pbox2": 4, "pbox3": 5,
                                          "x1": 6, "x2": 7}
    assert rack.switch_ports(4, 1, 1) == {"w1": 1, "w2": 2, "w3": 3, "w4": 4, "pbox": 5, "x1": 6}


@pytest.mark.parametrize(("workers", "pboxes", "extras"), [(4, 1, 0), (6, 1, 1), (3, 3, 2),
                                                           (8, 8, 4)])
def test_the_controllers_topology_matches_the_links(workers, pboxes, extras):
    config = RackConfig(workers=workers, pboxes=pboxes, extra_hosts=extras, grpc_port=50151,
                        controller_port=50160)
    raw = rack.rack_topology(config, slots=256, job_slots=64, worker_timeout=5.0)
    topo = topology.from_dict(raw)  # valid
    ports = rack.switch_ports(workers, pboxes, extras)
    assert {n.name: n.port for n in topo.endpoints_of(rack.SWITCH_NAME)} == ports
    assert [p.name for p in topo.pboxes_of("s1")] == [rack.pbox_name(i) for i in range(pboxes)]
    for index, pbox in enumerate(topo.pboxes_of("s1")):
        assert topology.format_ipv4(pbox.ip) == rack.pbox_ip(index)
        assert topology.format_mac(pbox.mac) == rack.host_mac(rack.pbox_ip(index))
        assert pbox.control == rack.pbox_control(index)
    for index in range(extras):
        extra = topo.hosts[f"x{index + 1}"]
        assert topology.format_ipv4(extra.ip) == rack.extra_ip(index)
        assert topology.format_mac(extra.mac) == rack.host_mac(rack.extra_ip(index))
    assert topo.switches["s1"].grpc_addr == "127.0.0.1:50151"
    assert (topo.switches["s1"].slots, topo.switches["s1"].job_slots) == (256, 64)
    assert topo.controller.listen == "10.99.0.254:50160"
    assert topo.controller.worker_timeout == 5.0


def test_the_default_single_pbox_topology_is_unchanged():
    """What Rack.controller_topology gave before several PBoxes (x1 on port N+2)."""
    raw = rack.rack_topology(RackConfig(workers=6, extra_hosts=1))
    assert raw["pboxes"] == {"pbox": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64",
                                      "switch": "s1", "port": 7, "slots": 4096,
                                      "control": "10.99.0.100:48880"}}
    assert raw["hosts"]["x1"] == {"ip": "10.0.0.201", "mac": "08:00:00:00:01:c9",
                                  "switch": "s1", "port": 8}


@pytest.mark.parametrize("pboxes", [0, 9])
def test_a_rack_refuses_a_pbox_count_outside_its_names(pboxes):
    with pytest.raises(RackError, match="pboxes must be 1..8"):
        Rack(RackConfig(pboxes=pboxes))


READY = "import json,sys,time; print(json.dumps({'ready': sys.argv[1:]}), flush=True); time.sleep(60)"


class FakeHost:
    """A Mininet host whose popen runs a stand-in that prints p4hub-pbox's arguments as its
    ready line, then waits to be stopped."""

    def __init__(self, name: str) -> None:
        self.name = name

    def popen(self, args: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", READY, *args[3:]], **kwargs)


@pytest.fixture
def fake_rack(tmp_path):
    """A Rack with three fake PBox hosts and no Mininet."""
    r = Rack(RackConfig(pboxes=3, log_root=tmp_path))
    r.log_dir = tmp_path
    r.pbox_hosts = [FakeHost(rack.pbox_name(i)) for i in range(3)]
    yield r
    r.stop()


def test_each_pbox_runs_on_its_own_address_with_its_own_logs(fake_rack, tmp_path):
    ready = fake_rack.start_pbox(jobs=["1:2"], workers=1, name="pbox2")
    args = ready["ready"]
    assert args[args.index("--listen") + 1] == "10.0.0.101:48879"
    assert args[args.index("--job") + 1] == "1:2"
    assert fake_rack.pbox_alive("pbox2") and not fake_rack.pbox_alive()
    assert (tmp_path / "pbox2.out").exists() and (tmp_path / "pbox2.err").exists()
    assert not (tmp_path / "pbox.out").exists()
    assert list(fake_rack.process_roots()) == ["pbox2"]
    assert fake_rack.stop_pbox("pbox2") == [ready]
    assert not fake_rack.pbox_alive("pbox2") and fake_rack.stop_pbox("pbox2") == []


def test_start_pboxes_starts_every_one_and_the_defaults_mean_the_first(fake_rack):
    ready = fake_rack.start_pboxes(workers=3)
    assert list(ready) == ["pbox", "pbox2", "pbox3"]
    listens = [r["ready"][r["ready"].index("--listen") + 1] for r in ready.values()]
    assert listens == ["10.0.0.100:48879", "10.0.0.101:48879", "10.0.0.102:48879"]
    assert list(fake_rack.process_roots()) == ["pbox", "pbox2", "pbox3"]
    fake_rack.kill_pbox()  # the first only
    assert [fake_rack.pbox_alive(n) for n in fake_rack.pbox_names] == [False, True, True]
    assert fake_rack.pbox is fake_rack.pbox_hosts[0] is fake_rack.pbox_host()
    assert fake_rack.pbox_host("pbox3").name == "pbox3"
    assert [h.name for h in fake_rack.hosts] == ["pbox", "pbox2", "pbox3"]  # no workers here
    fake_rack.stop()
    assert fake_rack.process_roots() == {}


def test_pbox_methods_refuse_a_pbox_the_rack_lacks(fake_rack):
    for call in (lambda: fake_rack.start_pbox(name="pbox4"),
                 lambda: fake_rack.stop_pbox("pbox4"), lambda: fake_rack.kill_pbox("pbox4"),
                 lambda: fake_rack.pbox_alive("pbox4"),
                 lambda: fake_rack.pbox_request({"cmd": "list_jobs"}, name="pbox4")):
        with pytest.raises(ValueError, match="no PBox 'pbox4'"):
            call()


def test_a_pbox_that_dies_at_once_is_reported_with_its_name(fake_rack, tmp_path):
    class Dying(FakeHost):
        def popen(self, args: list[str], **kwargs) -> subprocess.Popen:
            return subprocess.Popen([sys.executable, "-c", "import sys; sys.exit('no luck')"],
                                    **kwargs)

    fake_rack.pbox_hosts[2] = Dying("pbox3")
    with pytest.raises(RackError, match="p4hub-pbox pbox3 did not come up: no luck"):
        fake_rack.start_pbox(name="pbox3", timeout=5.0)
    assert not fake_rack.pbox_alive("pbox3")
