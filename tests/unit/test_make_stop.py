"""``make stop`` (topologies/cleanup.py) removes what p4hub made and nothing else: the
processes it starts (switch, PBox, controller, however started), its Mininet nodes'
shells and what runs in their namespaces, its links; never Mininet's ``mn -c`` (which
deletes every /tmp/*.log and /tmp/*.out), never another process, link or file.

No root here: ``plan`` takes the processes and links as arguments and ``read_processes``
a /proc to read. tests/e2e/test_make_stop.py runs the real thing on a rack.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from p4hub.topologies import cleanup
from p4hub.topologies.cleanup import Process, is_p4hub_process, plan, read_processes

REPO = Path(__file__).resolve().parents[2]
ROOT_NS = "net:[1]"


@pytest.mark.parametrize("command", [
    "/repo/.venv/bin/python /repo/.venv/bin/p4lite-switch --device-id 0 -i 1@s1-eth1",
    "/repo/.venv/bin/python -m p4lite.switch.process.main --grpc-server-addr 0.0.0.0:50051",
    "/repo/.venv/bin/python /repo/.venv/bin/p4hub-pbox --listen 10.0.0.100:48879",
    "/repo/.venv/bin/python -m p4hub.hosts.pbox --listen 10.0.0.100:48879",
    "/repo/.venv/bin/python -m p4hub.hosts.pbox.cli --listen 10.0.0.100:48879",
    "/repo/.venv/bin/python -m p4hub.hosts.pbox",
    "/repo/.venv/bin/python /repo/.venv/bin/p4hub-controller --topology t.json",
])
def test_it_matches_what_p4hub_starts(command: str):
    assert is_p4hub_process(command.split()), command


@pytest.mark.parametrize("command", [
    "/repo/.venv/bin/python -m pytest -q tests/unit/test_pbox.py",
    "/repo/.venv/bin/python -m pytest tests/unit/test_pbox_core.py -k hosts.pbox_stats",
    "vim hosts/pbox/core.py",
    "/repo/.venv/bin/python -m p4hub.topologies.cleanup",
])
def test_it_leaves_other_processes_alone(command: str):
    assert not is_p4hub_process(command.split()), command


def shell(pid: int, name: str, netns: str) -> Process:
    return Process(pid, ("bash", "--norc", "--noediting", "-is", f"mininet:{name}"), netns)


# A crashed rack beside someone else's Mininet network and an unrelated program.
PROCESSES = [
    shell(10, "s1", ROOT_NS),  # a switch shares the root namespace
    shell(11, "w1", "net:[11]"),
    shell(12, "pbox", "net:[12]"),
    Process(13, ("/v/bin/python", "-m", "p4hub.workers.worker", "--rank", "0"), "net:[11]"),
    Process(14, ("/v/bin/python", "-m", "p4hub.hosts.pbox.cli", "--listen", "x"), "net:[12]"),
    Process(15, ("/v/bin/python", "-m", "p4lite.switch.process.main", "-i", "1@s1-eth1"),
            ROOT_NS),
    shell(20, "h1", "net:[20]"),  # someone else's node (not one of our names)
    Process(21, ("iperf3", "-s"), "net:[20]"),
    shell(22, "w1x", "net:[22]"),
    Process(30, ("sshd",), ROOT_NS),
    Process(31, ("/usr/bin/python3", "-m", "p4hub.topologies.cleanup"), ROOT_NS),
    Process(32, ("bash", "--norc", "--noediting", "-is", "mininet:w2"), None),  # unreadable ns
]
LINKS = ["lo", "eth0", "s1", "s1-eth1", "s1-eth2", "w1-eth0", "pbox-eth0", "pbox2-eth0",
         "incmgmt", "incm-w1", "t1-eth1", "h1-eth0", "s10-eth1", "docker0", "br-s1", "xw1-eth0"]


def killed(commands: list[list[str]], signal: str) -> set[int]:
    return {int(pid) for c in commands if c[:2] == ["kill", signal] for pid in c[2:]}


def test_the_plan_kills_our_nodes_and_what_runs_in_them_only():
    commands = plan(PROCESSES, LINKS, root_netns=ROOT_NS, self_pid=31)
    assert killed(commands, "-TERM") == {14, 15}
    # The worker and PBox inside our hosts' namespaces go with the shells; the switch's
    # shell shares the root namespace, so nothing else there is touched.
    assert killed(commands, "-KILL") == {10, 11, 12, 13, 14, 32}


def test_the_plan_deletes_our_links_only():
    commands = plan(PROCESSES, LINKS, root_netns=ROOT_NS, self_pid=31)
    deleted = [c[3] for c in commands if c[:3] == ["ip", "link", "del"]]
    assert deleted == ["s1", "s1-eth1", "s1-eth2", "w1-eth0", "pbox-eth0", "pbox2-eth0",
                       "incmgmt", "incm-w1", "t1-eth1"]
    assert commands[-1] == ["nft", "delete", "table", "netdev", "p4hub_fabric_loss"]


def test_an_unreadable_root_namespace_empties_no_namespace_but_our_hosts():
    """/proc/1/ns/net may be unreadable (a container): a switch's shell is never taken
    for a host, so the root namespace's processes are never killed for sharing it."""
    commands = plan(PROCESSES, LINKS, root_netns=None, self_pid=31)
    assert killed(commands, "-KILL") == {10, 11, 12, 13, 14, 32}


def test_nothing_left_gives_only_the_harmless_table_delete():
    assert plan([Process(30, ("sshd",), ROOT_NS)], ["lo", "eth0"], root_netns=ROOT_NS,
                self_pid=1) == [["nft", "delete", "table", "netdev", "p4hub_fabric_loss"]]


def test_no_command_touches_a_file_and_a_decoy_log_in_tmp_survives():
    """What ``mn -c`` would delete: the plan only signals processes and deletes links."""
    decoy = Path("/tmp") / f"p4hub-decoy-{uuid.uuid4().hex}.log"
    decoy.write_text("not p4hub's\n")
    try:
        commands = plan(PROCESSES, [*LINKS, decoy.name], root_netns=ROOT_NS, self_pid=31)
        assert {c[0] for c in commands} <= {"kill", "ip", "nft"}
        assert not any("/tmp" in word or "*" in word for c in commands for word in c)
        assert decoy.read_text() == "not p4hub's\n"
    finally:
        decoy.unlink()


def test_read_processes_reads_command_lines_and_namespaces(tmp_path):
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "cmdline").write_bytes(b"bash\0--norc\0--noediting\0-is\0mininet:w1\0")
    (tmp_path / "8").mkdir()
    (tmp_path / "8" / "cmdline").write_bytes(b"")  # a kernel thread
    (tmp_path / "self").mkdir()
    got = read_processes(tmp_path)
    assert [(p.pid, p.argv) for p in got] == [
        (7, ("bash", "--norc", "--noediting", "-is", "mininet:w1"))]


def test_make_stop_runs_the_cleanup_and_never_mn_c():
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the Makefile is how p4hub is run)")
    recipe = subprocess.run(["make", "-s", "-n", "stop"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout
    words = [shlex.split(line) for line in recipe.splitlines() if line.strip()]
    assert len(words) == 1 and words[0][1:] == ["-m", "p4hub.topologies.cleanup"], recipe
    assert "mn " not in recipe and "rm " not in recipe


def test_dry_run_prints_the_plan_and_runs_nothing(monkeypatch, capsys):
    monkeypatch.setattr(cleanup, "read_processes", lambda: PROCESSES)
    monkeypatch.setattr(cleanup, "link_names", lambda: LINKS)
    ran: list[object] = []
    monkeypatch.setattr(cleanup.subprocess, "run", lambda *a, **k: ran.append(a))
    assert cleanup.main(["--dry-run"]) == 0
    assert ran == []
    lines = capsys.readouterr().out.splitlines()
    assert "ip link del s1-eth1" in lines and lines[-1].startswith("nft delete table")
