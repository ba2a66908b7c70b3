"""make run's TLS wiring without Mininet: the run's credentials (topologies/credentials.py)
on each command line, the controller's topology, and a real p4lite-switch process started
with the switch's TLS options, reached by the controller's client and refused to others."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4hub.controller import pki
from p4hub.controller.core import topology
from p4hub.controller.driver import topology_clients
from p4hub.controller.p4rt_client import P4RuntimeError
from p4hub.controller.pbox_control import PBoxControl
from p4hub.hosts.pbox.cli import build_parser, control_tls
from p4hub.topologies import credentials, rack
from p4hub.topologies.rack import RackConfig
from tests.support.wait import wait_until
from tests.unit.test_inc_p4switch import bare_switch


@pytest.fixture(scope="module")
def creds(tmp_path_factory: pytest.TempPathFactory) -> pki.RunCredentials:
    config = RackConfig(workers=4, pboxes=2, p4=True)
    return credentials.make(tmp_path_factory.mktemp("run"), config.switch_names,
                            ["10.99.0.254", "10.99.0.100", "10.99.0.101"])


def test_the_run_directory_holds_the_ca_and_0600_keys(creds: pki.RunCredentials) -> None:
    assert creds.directory.name == credentials.DIRECTORY
    assert set(creds.switches) == {"s1"}
    keys = sorted(creds.directory.glob("*.key"))
    assert [k.name for k in keys] == ["admin.key", "ca.key", "controller-client.key",
                                      "controller.key", "pbox.key", "switch-s1.key"]
    assert all(k.stat().st_mode & 0o777 == 0o600 for k in keys)


def test_switch_command_lines_carry_the_tls_flags(tmp_path: Path,
                                                  creds: pki.RunCredentials) -> None:
    tls = credentials.switch_tls(creds, "s1")
    for exe, writer in (("p4lite-switch", True), ("/opt/p4ref/bin/simple_switch_grpc", False)):
        sw = bare_switch(tmp_path, [exe])
        sw.tls = tls
        cmd = sw.command()
        target = cmd[cmd.index("--") + 1:]  # target options, as simple_switch_grpc wants
        assert target[target.index("--grpc-server-ssl"):][:8] == [
            "--grpc-server-ssl", "--grpc-server-cacert", str(creds.ca),
            "--grpc-server-cert", str(creds.switches["s1"].cert),
            "--grpc-server-key", str(creds.switches["s1"].key), "--grpc-server-with-client-auth"]
        assert ("--grpc-server-writer" in target) is writer  # the reference lacks the flag


def test_the_pbox_command_line_is_tls_for_the_controller_and_the_operator(
        creds: pki.RunCredentials) -> None:
    args = build_parser().parse_args(["--control", "10.99.0.100:48880",
                                      *credentials.pbox_args(creds)])
    assert args.control_client == ["controller-client", "admin"]
    assert control_tls(args) is not None  # a real context from the run's files


def test_the_controllers_topology_names_the_ca_and_its_client_certificate(
        creds: pki.RunCredentials) -> None:
    raw = rack.rack_topology(RackConfig(workers=2, p4=True))
    raw["tls"] = credentials.topology_tls(creds)
    topo = topology.from_dict(raw)
    assert topo.tls == topology.TlsConf(str(creds.ca), str(creds.controller_client.cert),
                                        str(creds.controller_client.key))
    assert PBoxControl(topo).channels["pbox"].tls is not None
    assert topology_clients(topo)(topo.switches["s1"]).tls == topo.tls


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def p4lite_switch(creds: pki.RunCredentials, tmp_path: Path) -> Iterator[str]:
    """p4lite-switch as make run starts it (no interfaces, no program: no root needed)."""
    port = _free_port()
    log = open(tmp_path / "s1.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "p4lite.switch.process.main", "--no-p4", "--",
                             "--grpc-server-addr", f"127.0.0.1:{port}",
                             *credentials.switch_tls(creds, "s1").args(False)],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "Server listening" in (tmp_path / "s1.log").read_text()
                   or proc.poll() is not None, timeout=30)
        assert proc.poll() is None, (tmp_path / "s1.log").read_text()
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def test_a_p4lite_switch_process_serves_the_controller_and_refuses_the_rest(
        p4lite_switch: str, creds: pki.RunCredentials) -> None:
    raw = rack.rack_topology(RackConfig(workers=2, p4=True))
    raw["switches"]["s1"]["grpc_addr"] = p4lite_switch
    raw["tls"] = credentials.topology_tls(creds)
    topo = topology.from_dict(raw)
    client = topology_clients(topo)(topo.switches["s1"])
    with client:
        assert client.alive and client.get_pipeline() is None
    plaintext = topology.from_dict({k: v for k, v in raw.items() if k != "tls"})
    refused = topology_clients(plaintext)(plaintext.switches["s1"])
    refused.timeout = 1.0
    with pytest.raises(P4RuntimeError, match="UNAVAILABLE"):
        refused.connect()
    no_cert = topology.from_dict({**raw, "tls": {"ca": str(creds.ca)}})
    refused = topology_clients(no_cert)(no_cert.switches["s1"])
    refused.timeout = 1.0
    with pytest.raises(P4RuntimeError, match="TLS handshake"):
        refused.connect()
