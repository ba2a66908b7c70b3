"""Loss on a fabric's switch-switch links (root): the rack installs an nftables egress
drop on both ends of every leaf-spine link in the root namespace (topologies/linkem.py
``apply_switch_loss``), traffic still crosses, and stopping the rack removes the table
(even when the body raises)."""

from __future__ import annotations

import re
import subprocess

import pytest

from p4hub.topologies import linkem
from p4hub.topologies.rack import Rack, RackConfig

pytestmark = pytest.mark.root


def _table() -> str | None:
    done = subprocess.run(["nft", "list", "table", "netdev", linkem.FABRIC_TABLE],
                          capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else None


def test_switch_links_drop_on_both_ends_and_the_rules_go_with_the_rack():
    config = RackConfig(workers=2, racks=2, spines=1, loss=2.0, bw=None, p4=True,
                        grpc_port=50271, controller_port=50281, pcap=False,
                        run_name="fabric-loss-e2e", lock_timeout=120.0)
    with pytest.raises(RuntimeError, match="body failed"), Rack(config) as r:
        table = _table()
        assert table is not None
        for intf in ("s1-eth7", "t1-eth1", "s2-eth7", "t1-eth2"):
            assert f'device "{intf}"' in table
        assert "< 20000" in table  # 2%
        # the hosts' own links are lossy too (in their namespaces): the root has no
        # iptables rule of ours
        root_rules = subprocess.run(["iptables", "-w", "-S", "INPUT"], capture_output=True,
                                    text=True, check=False).stdout
        assert "s1-eth" not in root_rules and "t1-eth" not in root_rules
        r.start_controller(r.controller_topology(slots=64, job_slots=32))
        out = r.workers[0].cmd("ping", "-c", "100", "-i", "0.01", "-W", "1", r.workers[1].IP())
        assert " 100% packet loss" not in out and "received" in out, out
        # the switch processes' frames meet the egress hook: 400 link crossings at 2%
        # drop none with probability 3e-4
        dropped = sum(int(n) for n in re.findall(r"counter packets (\d+)", _table() or ""))
        assert dropped > 0
        raise RuntimeError("body failed")
    assert _table() is None
