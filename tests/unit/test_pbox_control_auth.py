"""The PBox's control channel is authenticated: TLS with a client certificate from the run's
CA (and, where listed, one of the allowed names). A request from anyone else gets no
answer and changes nothing; the controller presents its certificate and checks the PBox's."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4hub.controller import pki
from p4hub.controller.core.updates import INSERT, PBoxJobWrite
from p4hub.controller.pbox_control import PBoxControl, PBoxControlError
from p4hub.hosts.pbox import server as pbox_server
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.pbox.server import ControlServer, control_tls_context
from tests.support.pbox_control import pbox_control
from tests.support.wait import wait_until


class Recorder:
    """A PBox stand-in: every request that reaches it is recorded and answered."""

    def __init__(self) -> None:
        self.agg = Aggregator()
        self.requests: list[object] = []

    def control(self, request: object) -> dict:
        self.requests.append(request)
        if isinstance(request, dict) and request.get("cmd") == "add_job":
            self.agg.add_job(request["job"], request["world_size"], request["slot_base"],
                             request["slot_count"])
        if isinstance(request, dict) and request.get("cmd") == "list_jobs":
            return {"ok": True, "jobs": [{"job_id": c.job_id} for c in self.agg.jobs()]}
        return {"ok": True}


@pytest.fixture(scope="module")
def creds(tmp_path_factory: pytest.TempPathFactory) -> pki.RunCredentials:
    return pki.run_credentials(tmp_path_factory.mktemp("run"), switches=[], hosts=[])


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> pki.RunCredentials:
    return pki.run_credentials(tmp_path_factory.mktemp("other"), switches=[], hosts=[])


def _topo_tls(ca: Path, cred: pki.Credential | None) -> dict:
    return {"ca": str(ca), **({"cert": str(cred.cert), "key": str(cred.key)} if cred else {})}


@pytest.fixture
def guarded(creds: pki.RunCredentials) -> Iterator[tuple[Recorder, PBoxControl, ControlServer]]:
    """A TLS control server that takes the controller's certificate only."""
    recorder = Recorder()
    tls = control_tls_context(str(creds.pbox.cert), str(creds.pbox.key), str(creds.ca))
    with pbox_control(recorder, tls=tls, clients=["controller-client"],
                      topo_tls=_topo_tls(creds.ca, creds.controller_client)) as (control, srv):
        yield recorder, control, srv


def _attempt(address: tuple[str, int], wrap: ssl.SSLContext | None) -> bytes:
    """Send a remove_job (and an add_job) the way an intruder would; return every byte
    the PBox sent back before it closed the connection."""
    got = b""
    try:
        with socket.create_connection(address, timeout=3) as raw:
            sock = wrap.wrap_socket(raw, server_hostname="127.0.0.1") if wrap else raw
            sock.sendall(b'{"cmd": "remove_job", "job": 1}\n'
                         b'{"cmd": "add_job", "job": 9, "world_size": 1, "slot_base": 0, '
                         b'"slot_count": 8}\n')
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                got += chunk
    except (OSError, ssl.SSLError):
        pass  # refused during the handshake or on the first read: nothing was answered
    return got


def _intruder_context(ca: Path | None, cred: pki.Credential | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # an intruder does not care who the PBox is
    else:
        ctx.load_verify_locations(ca)
    if cred is not None:
        ctx.load_cert_chain(cred.cert, cred.key)
    return ctx


def test_the_controller_with_its_certificate_adds_and_lists_jobs(guarded) -> None:
    recorder, control, _ = guarded
    assert control(PBoxJobWrite("pb1", INSERT, 1, 2, 0, 8)) is True
    assert control.jobs("pb1") == [{"job_id": 1}]
    assert [r["cmd"] for r in recorder.requests] == ["add_job", "list_jobs"]


@pytest.mark.parametrize("who", ["plaintext", "TLS without a client certificate",
                                 "a stranger's certificate", "the run's CA, not an allowed name"])
def test_an_unauthenticated_request_gets_nothing_and_changes_nothing(
        guarded, creds: pki.RunCredentials, stranger: pki.RunCredentials, who: str) -> None:
    recorder, control, srv = guarded
    control(PBoxJobWrite("pb1", INSERT, 1, 2, 0, 8))
    before = list(recorder.requests)
    wrap = {"plaintext": None,
            "TLS without a client certificate": _intruder_context(None, None),
            "a stranger's certificate": _intruder_context(None, stranger.controller_client),
            "the run's CA, not an allowed name": _intruder_context(creds.ca, creds.admin),
            }[who]
    got = _attempt(srv.address, wrap)
    assert b"ok" not in got and b"error" not in got  # not one byte of the JSON channel
    assert recorder.requests == before  # no request reached the PBox
    assert [c.job_id for c in recorder.agg.jobs()] == [1]
    wait_until(lambda: srv.refused >= 1, timeout=3)
    assert control.jobs("pb1") == [{"job_id": 1}]  # and the PBox still serves the controller


def test_the_controller_refuses_a_pbox_it_cannot_verify(
        creds: pki.RunCredentials, stranger: pki.RunCredentials) -> None:
    """A PBox with a certificate from another CA (a stand-in on the management network)
    is not talked to: the controller's request fails before anything is sent."""
    recorder = Recorder()
    tls = control_tls_context(str(stranger.pbox.cert), str(stranger.pbox.key), str(creds.ca))
    with pbox_control(recorder, tls=tls, topo_tls=_topo_tls(creds.ca, creds.controller_client)
                      ) as (control, _), pytest.raises(PBoxControlError):
        control(PBoxJobWrite("pb1", INSERT, 1, 2, 0, 8))
    assert recorder.requests == []


def test_a_silent_client_neither_stalls_the_pbox_nor_stays(
        guarded, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder, control, srv = guarded
    monkeypatch.setattr(pbox_server, "HANDSHAKE_TIMEOUT", 0.3)
    with socket.create_connection(srv.address, timeout=3) as silent:
        time.sleep(0.1)  # accepted, handshake pending
        assert control(PBoxJobWrite("pb1", INSERT, 3, 2, 0, 8)) is True  # served meanwhile
        silent.settimeout(3)
        assert silent.recv(100) == b""  # dropped after the handshake time-out
    assert srv.refused == 1
    assert [c.job_id for c in recorder.agg.jobs()] == [3]


def _run_pbox(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "p4hub.hosts.pbox.cli", "--listen",
                             "127.0.0.1:0", "--workers", "1", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_p4hub_pbox_will_not_serve_an_unauthenticated_control_channel_by_default() -> None:
    proc = _run_pbox("--control", "127.0.0.1:0")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and out == ""
    assert "--control-cert, --control-key and --control-ca" in err
    assert "--control-insecure" in err


def test_p4hub_pbox_with_tls_serves_the_controller_and_insecure_says_so(
        creds: pki.RunCredentials, tmp_path: Path) -> None:
    proc = _run_pbox("--control", "127.0.0.1:0", "--control-cert", str(creds.pbox.cert),
                     "--control-key", str(creds.pbox.key), "--control-ca", str(creds.ca),
                     "--control-client", "controller-client", "--job", "4:1")
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["control_tls"] is True
        host, port = ready["control"]
        from p4hub.controller.core import topology

        topo = topology.from_dict({
            "switches": {"s1": {"grpc_addr": "127.0.0.1:1"}},
            "pboxes": {"pb1": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64", "switch": "s1",
                               "port": 9, "control": f"{host}:{port}"}},
            "tls": _topo_tls(creds.ca, creds.controller_client)})
        control = PBoxControl(topo, timeout=5)
        assert [j["job_id"] for j in control.jobs("pb1")] == [4]
        assert _attempt((host, port), None) == b""  # plaintext: nothing
        assert [j["job_id"] for j in control.jobs("pb1")] == [4]
        control.close()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "refused" in err and "TLS handshake failed" in err
    insecure = _run_pbox("--control", "127.0.0.1:0", "--control-insecure")
    try:
        assert insecure.stdout is not None
        assert json.loads(insecure.stdout.readline())["control_tls"] is False
    finally:
        insecure.terminate()
        _, err = insecure.communicate(timeout=30)
    assert "PLAINTEXT and unauthenticated" in err
