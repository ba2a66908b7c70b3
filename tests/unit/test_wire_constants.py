"""The constants each side of the wire carries agree: hosts, controller and the P4 program.

The controller never imports the hosts (it speaks P4Runtime and the PBox's JSON), so the
numbers both sides need are defined once per side: ``p4hub.hosts.wire`` for the agents
and the PBox, ``p4hub.controller.core.program`` for the controller, the ``#define``s of
``p4src/aggregate.p4`` for the switch. This test holds the three to each other.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from p4hub.controller.core import program
from p4hub.hosts import wire
from p4hub.hosts.pytorch import config as backend_config
from p4hub.hosts.session_config import SessionConfig

REPO = Path(__file__).resolve().parents[2]
DEFINE = re.compile(r"^#define\s+(\w+)\s+(0x[0-9A-Fa-f]+|\d+)\b", re.M)


def p4_defines() -> dict[str, int]:
    text = (REPO / "p4src" / "aggregate.p4").read_text()
    return {name: int(value, 0) for name, value in DEFINE.findall(text)}


def test_the_defines_are_read():
    defines = p4_defines()
    assert {"AGG_UDP_PORT", "NUM_SLOTS", "MAX_JOBS", "K_LANES", "LANES_64"} <= defines.keys()


def test_controller_and_hosts_agree_on_the_lane_count():
    assert program.DEFAULT_LANES == wire.DEFAULT_LANES
    assert program.LANE_COUNTS == wire.LANE_COUNTS
    assert wire.DEFAULT_LANES in wire.LANE_COUNTS and wire.MAX_LANES == max(wire.LANE_COUNTS)
    for lanes in wire.LANE_COUNTS:
        assert program.lane_code(lanes) == wire.lane_code(lanes)


def test_every_default_lane_count_is_the_wires():
    """A session, the torch backend's P4HUB_LANES and a job the controller creates all
    default to one lane count."""
    assert SessionConfig().lanes == wire.DEFAULT_LANES
    assert backend_config.BackendConfig().lanes == wire.DEFAULT_LANES
    env = {"P4HUB_CONTROLLER": "127.0.0.1:50060"}
    assert backend_config.BackendConfig.from_env(env).lanes == wire.DEFAULT_LANES


def test_controller_and_hosts_agree_on_the_shared_numbers():
    assert program.AGG_UDP_PORT == wire.AGG_UDP_PORT
    assert program.MAX_WORKERS == wire.MAX_WORKERS
    assert program.MAX_WORLD_SIZE == wire.MAX_WORLD_SIZE


@pytest.mark.parametrize(("define", "value"), [
    ("AGG_UDP_PORT", wire.AGG_UDP_PORT),
    ("P4HUB_VERSION", wire.VERSION),
    ("TYPE_CONTRIB", wire.PacketType.CONTRIB),
    ("TYPE_RESULT", wire.PacketType.RESULT),
    ("TYPE_PARTIAL", wire.PacketType.PARTIAL),
    ("TYPE_PRIME", wire.PacketType.PRIME),
    ("P4HUB_VERSION_SHARDED", wire.SHARDED_VERSION),
    ("TYPE_SCATTER", wire.PacketType.SCATTER),
    ("TYPE_DONE", wire.PacketType.DONE),
    ("TYPE_GATHER", wire.PacketType.GATHER),
    ("TYPE_GATHER_JOIN", wire.PacketType.GATHER_JOIN),
    ("NO_RANK", wire.NO_RANK),
    ("LANES_64", wire.lane_code(64)),
    ("LANES_256", wire.lane_code(256)),
    ("NUM_SLOTS", program.NUM_SLOTS),
    ("MAX_JOBS", program.MAX_JOBS),
    ("NUM_PORTS", program.NUM_PORTS),
    ("ERR_UNKNOWN_JOB", program.ERR_UNKNOWN_JOB),
    ("ERR_SPOOFED_SOURCE", program.ERR_SPOOFED_SOURCE),
    ("JOB_STATS_SIZE", program.MAX_JOBS * program.JOB_STAT_KINDS),
    ("TREE_STATS_SIZE", program.MAX_JOBS * program.TREE_STAT_KINDS),
])
def test_the_p4_program_agrees(define: str, value: int):
    assert p4_defines()[define] == value


def test_a_lane_count_is_a_whole_number_of_the_programs_lane_groups():
    group = p4_defines()["K_LANES"]
    assert all(lanes % group == 0 for lanes in wire.LANE_COUNTS)
