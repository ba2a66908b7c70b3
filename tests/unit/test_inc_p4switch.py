"""p4hub.topologies.p4switch without Mininet: the tutorials' command line, compiling, readiness."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from p4hub.topologies import p4switch
from p4hub.topologies.p4switch import P4Switch, P4SwitchError

REPO = Path(__file__).resolve().parents[2]


def bare_switch(tmp_path: Path, sw_cmd: list[str], grpc_port: int = 50051) -> P4Switch:
    """A P4Switch without Mininet's shell: only what command()/start() use."""
    sw = P4Switch.__new__(P4Switch)
    sw.name = "s1"
    sw.intfs = {2: SimpleNamespace(name="s1-eth2"), 1: SimpleNamespace(name="s1-eth1"),
                0: SimpleNamespace(name="lo")}
    sw.json_path = tmp_path / "build" / "aggregate.json"
    sw.log_path = tmp_path / "logs" / "s1.log"
    sw.pcap_dir = tmp_path / "pcaps"
    sw.grpc_port = grpc_port
    sw.thrift_port = 9090
    sw.device_id = 0
    sw.sw_cmd = sw_cmd
    sw.extra_args = []
    sw.log_level = "off"
    sw.log_max_bytes = p4switch.LOG_MAX_BYTES
    sw.log_keep = p4switch.LOG_KEEP
    sw.priority_queues = p4switch.PRIORITY_QUEUES
    sw.tls = None
    sw.proc = None
    return sw


def test_command_has_the_tutorials_argument_layout(tmp_path):
    sw = bare_switch(tmp_path, ["p4lite-switch"])
    assert sw.command() == [
        "p4lite-switch", "-i", "1@s1-eth1", "-i", "2@s1-eth2", "--pcap", str(tmp_path / "pcaps"),
        "--device-id", "0", str(tmp_path / "build" / "aggregate.json"),
        "--thrift-port", "9090", "--", "--grpc-server-addr", "0.0.0.0:50051",
        "--priority-queues", "8",
    ]
    sw.pcap_dir = None
    assert "--pcap" not in sw.command()


def test_default_command_has_no_per_packet_console_logging(tmp_path):
    cmd = bare_switch(tmp_path, ["simple_switch_grpc"]).command()
    assert "--log-console" not in cmd and "--log-level" not in cmd and "--log-file" not in cmd


def test_log_level_option_turns_console_logging_on(tmp_path):
    sw = bare_switch(tmp_path, ["simple_switch_grpc"])
    sw.log_level = "debug"
    cmd = sw.command()
    json_at = cmd.index(str(tmp_path / "build" / "aggregate.json"))
    assert cmd[json_at + 1:json_at + 4] == ["--log-console", "--log-level", "debug"]
    assert cmd.index("--log-console") < cmd.index("--")


def test_unknown_log_level_is_refused():
    with pytest.raises(ValueError, match="switch log level"):
        P4Switch("s1", "x.json", log_dir="/tmp", log_level="verbose")


def test_p4lite_switch_takes_the_logging_flags():
    from p4lite.switch.process.main import parse_args

    opts = parse_args(["--log-console", "--log-level", "debug", "--no-p4"])
    assert opts.log_console and opts.log_level == "debug"


def test_switch_log_is_size_capped_with_rotation(tmp_path):
    sw = bare_switch(tmp_path, [sys.executable, "-c",
                                "import sys\nfor i in range(400): print('packet', i, 'x' * 50)"])
    sw.log_level = "trace"
    sw.log_max_bytes = 4096
    sw.log_keep = 2
    with pytest.raises(P4SwitchError):  # it never listens: started, logged, exited
        sw.start([])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "packet 399" not in sw.log_path.read_text():
        time.sleep(0.05)
    logs = sorted(sw.log_path.parent.glob("s1.log*"))
    assert [p.name for p in logs] == ["s1.log", "s1.log.1", "s1.log.2"]
    assert all(p.stat().st_size <= 4096 for p in logs)
    assert "packet 399" in sw.log_path.read_text()


def test_simple_switch_grpc_wins_when_it_is_on_path(tmp_path, monkeypatch):
    fake = tmp_path / "simple_switch_grpc"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert p4switch.switch_command() == [str(fake)]
    monkeypatch.setenv("PATH", "/nonexistent")
    fallback = p4switch.switch_command()
    assert fallback[0].endswith("p4lite-switch") or fallback[-1] == "p4lite.switch.process.main"


def test_compile_p4_writes_bmv2_json_and_p4info(tmp_path):
    out_json, out_info = p4switch.compile_p4(REPO / "p4src" / "aggregate.p4", tmp_path)
    assert out_json == tmp_path / "aggregate.json" and out_json.read_text().startswith("{")
    assert "MyIngress.members" in out_info.read_text()


def test_compile_errors_are_reported(tmp_path):
    bad = tmp_path / "bad.p4"
    bad.write_text("control nonsense {")
    with pytest.raises(P4SwitchError, match="failed"):
        p4switch.compile_p4(bad, tmp_path / "build")


def test_a_switch_that_exits_did_not_start_correctly(tmp_path):
    sw = bare_switch(tmp_path, [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    with pytest.raises(P4SwitchError, match=r"P4 switch s1 did not start correctly, see .*s1\.log"):
        sw.start([])
    log = sw.log_path.read_text()
    assert log.splitlines()[0].startswith(sys.executable) and "boom" in log
    assert sw.proc is None


def test_ready_only_when_its_own_process_listens_on_the_grpc_port(tmp_path):
    # a process that listens on a free port after a short delay, then waits to be stopped
    code = ("import socket,sys,time; time.sleep(0.3); s=socket.socket(); "
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(60)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sw = bare_switch(tmp_path, [sys.executable, "-c", code, str(port)], grpc_port=port)
    sw.command = lambda: sw.sw_cmd  # the fake takes no switch arguments
    sw.start([])
    try:
        assert sw.alive() and p4switch.listens_on(sw.proc.pid, port)
    finally:
        assert sw.stop_process() is not None
    assert not sw.alive()


def test_another_process_listening_does_not_count(tmp_path, monkeypatch):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        sw = bare_switch(tmp_path, [sys.executable, "-c", "import time; time.sleep(60)"],
                         grpc_port=port)
        sw.command = lambda: sw.sw_cmd
        monkeypatch.setattr(p4switch, "START_TIMEOUT", 1.0)
        with pytest.raises(P4SwitchError, match="did not start correctly"):
            sw.start([])
        assert sw.proc is None  # the impostor-port switch was stopped
