"""topologies.rack's leaf-spine fabric without Mininet: which switch and port each host
and link gets, the controller's view of it (controller.core.topology.fabric_dict), the
configurations it refuses, and the root namespace's switch-switch loss rules."""

from __future__ import annotations

import pytest

from p4hub.controller.core import topology
from p4hub.topologies import linkem, rack
from p4hub.topologies.rack import Rack, RackConfig, RackError


def fabric(**changes) -> RackConfig:
    return RackConfig(**{"workers": 8, "racks": 2, "spines": 1, "p4": True, **changes})


def test_a_fabric_gets_one_pbox_per_rack_and_names_its_switches():
    config = fabric(spines=2)
    assert config.is_fabric and config.pboxes == 2
    assert config.switch_names == ["s1", "s2", "t1", "t2"]
    assert not RackConfig().is_fabric and RackConfig().switch_names == ["s1"]


def test_hosts_sit_on_their_racks_leaf_in_rank_order():
    ports = rack.host_ports(fabric(extra_hosts=2))
    assert [ports[f"w{i}"] for i in range(1, 9)] == [
        ("s1", 1), ("s1", 2), ("s1", 3), ("s1", 4), ("s2", 1), ("s2", 2), ("s2", 3), ("s2", 4)]
    assert (ports["pbox"], ports["pbox2"]) == (("s1", 5), ("s2", 5))
    assert (ports["x1"], ports["x2"]) == (("s1", 6), ("s1", 7))


def test_one_rack_keeps_its_switch_ports():
    ports = rack.host_ports(RackConfig(workers=4, pboxes=2, extra_hosts=1))
    assert ports == {name: ("s1", port) for name, port in rack.switch_ports(4, 2, 1).items()}
    assert rack.fabric_links(RackConfig()) == []


def test_uplinks_leave_room_for_the_extra_hosts():
    assert rack.fabric_links(fabric(workers=4, spines=2)) == [
        ("s1", 8, "t1", 1), ("s2", 8, "t1", 2), ("s1", 9, "t2", 1), ("s2", 9, "t2", 2)]


@pytest.mark.parametrize(("spines", "extras"), [(1, 0), (2, 4)])
def test_the_controllers_topology_matches_the_links(spines, extras):
    config = fabric(spines=spines, extra_hosts=extras, grpc_port=50151, controller_port=50160)
    topo = topology.from_dict(rack.rack_topology(config, slots=256, job_slots=64))
    ports = rack.host_ports(config)
    assert {n.name: (n.switch, n.port) for n in topo.all_endpoints()} == ports
    links = {(leaf, port, spine, spine_port)
             for leaf, port, spine, spine_port in rack.fabric_links(config)}
    assert {(ln.switch, ln.port, ln.peer, ln.peer_port) for ln in topo.links.values()} == links
    assert [topo.switches[name].grpc_addr for name in config.switch_names] == [
        f"127.0.0.1:{50151 + i}" for i in range(len(config.switch_names))]
    assert topo.pboxes["pbox2"].control == rack.pbox_control(1)
    assert topo.controller.listen == "10.99.0.254:50160"
    for index in range(config.pboxes):
        pbox = topo.pboxes[rack.pbox_name(index)]
        assert topology.format_ipv4(pbox.ip) == rack.pbox_ip(index)
        assert topology.format_mac(pbox.mac) == rack.host_mac(rack.pbox_ip(index))


@pytest.mark.parametrize(("changes", "message"), [
    ({"spines": 0}, "a fabric needs 1..4 spines, got 0"),
    ({"spines": 5}, "a fabric needs 1..4 spines, got 5"),
    ({"p4": False}, "a fabric needs the P4 switch"),
    ({"workers": 7}, "7 workers do not divide into 2 racks"),
    ({"racks": 9, "workers": 9}, "workers must be 1..8"),
    ({"pboxes": 3}, "a fabric has one PBox per rack: pboxes=2, got 3"),
    ({"extra_hosts": 5}, "extra_hosts must be 0..4"),
])
def test_a_fabric_refuses_what_it_cannot_build(changes, message):
    with pytest.raises(RackError, match=message):
        Rack(fabric(**changes))


def test_switch_loss_drops_on_the_egress_of_both_ends():
    [argv] = linkem.switch_loss_rules(0.05, ["s1-eth10", "t1-eth1"])
    assert argv[:2] == ["nft", "add table netdev p4hub_fabric_loss { chain egress_0 { type "
                        'filter hook egress device "s1-eth10" priority 0; numgen random mod '
                        "1000000 < 50000 counter drop; }; chain egress_1 { type filter hook "
                        'egress device "t1-eth1" priority 0; numgen random mod 1000000 < 50000 '
                        "counter drop; }; }"]
    assert linkem.switch_loss_rules(0.0, ["s1-eth10"]) == []
    assert linkem.switch_loss_rules(0.1, []) == []


def test_a_rack_lists_both_ends_of_every_switch_link():
    r = Rack(fabric(workers=4))
    assert r.fabric_interfaces() == ["s1-eth8", "t1-eth1", "s2-eth8", "t1-eth2"]
    assert Rack(RackConfig()).fabric_interfaces() == []


def test_make_run_leafspine_defaults_to_2x4_and_every_path():
    from p4hub.experiments import run

    args = run.parse_args(["--topo", "leafspine"])
    assert (args.workers, args.paths) == (8, "switch,pbox,gloo")
    config = run.rack_config(args)
    assert (config.racks, config.spines, config.pboxes, config.workers) == (2, 1, 2, 8)
    one = run.parse_args([])
    assert (one.workers, one.paths) == (4, "switch,pbox,gloo")
    assert not run.rack_config(one).is_fabric


def test_make_run_leafspine_refuses_a_straggler(capsys):
    from p4hub.experiments import run

    with pytest.raises(SystemExit):
        run.parse_args(["--topo", "leafspine", "--straggler", "link"])
    assert "--straggler and --switch-slots are for one rack" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.parse_args(["--topo", "leafspine", "--switch-slots", "8"])


def test_make_run_switch_slots_limit_the_controllers_switch_pool():
    from p4hub.experiments import run

    class FakeRack:
        def start_pboxes(self, workers: int) -> None:
            pass

        def controller_topology(self, **kwargs: int) -> dict:
            return kwargs

        def start_controller(self, topology: dict, extra: list[str]) -> None:
            self.topology, self.extra = topology, extra

    rack = FakeRack()
    run.start_services(rack, run.parse_args(["--switch-slots", "12"]))
    assert rack.topology == {"job_slots": 32, "slots": 12} and rack.extra == []
    run.start_services(rack, run.parse_args(["--metrics-port", "9100"]))
    assert rack.topology == {"job_slots": 32}
    assert rack.extra == ["--metrics", "127.0.0.1:9100"]
