"""p4hub-controller as a process (python -m controller.main) against p4lite's
P4Runtime server in this process: compile, configure, serve, stop, restart, rebuild."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from p4hub.controller import client as client_mod
from p4hub.controller.main import main
from p4lite.switch.core.switch import Switch
from p4lite.switch.p4runtime.device import Device
from p4lite.switch.p4runtime.server import serve as serve_p4runtime
from tests.unit.test_aggregate_p4 import PROGRAM
from tests.unit.test_controller_driver import RACK

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def rack_file(tmp_path):
    device = Device(0, Switch)
    server, port = serve_p4runtime(device, "127.0.0.1:0")
    api_address = f"127.0.0.1:{free_port()}"
    raw = dict(RACK, switches={"s1": {**RACK["switches"]["s1"], "grpc_addr": f"127.0.0.1:{port}"}},
               controller={"listen": api_address})
    path = tmp_path / "rack.json"
    path.write_text(json.dumps(raw))
    yield path, api_address, tmp_path
    server.stop(grace=None)


def start_controller(path: Path, build: Path, compiled: bool = False,
                     extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """Compile first (``--p4``), or take the compiler's outputs from ``build``."""
    program = (["--bmv2-json", str(build / "aggregate.json"),
                "--p4info", str(build / "aggregate.p4info.txtpb")] if compiled else
               ["--p4", str(PROGRAM), "--build-dir", str(build)])
    cmd = [sys.executable, "-m", "p4hub.controller.main", "--topology", str(path), *program,
           "--connect-timeout", "10", "--state-dir", str(path.parent / "state"), *extra]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def wait_for_api(client: client_mod.JobClient, address: str, proc: subprocess.Popen,
                 timeout: float = 60.0) -> dict:
    """Poll the port with plain TCP first: a gRPC channel that failed backs off for seconds."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1.0).close()
            return client.call("Status")
        except (OSError, grpc.RpcError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"controller did not come up:\n{proc.communicate()[0]}") from None
            time.sleep(0.05)


def wait_for_state(path: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"no {path}:\n{proc.communicate()[0]}")
        time.sleep(0.05)


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    return out


def state_auth(tmp: Path) -> client_mod.ClientAuth:
    """What the controller made in its state directory by default: the administrator
    token (0600) and the CA of its job API's own TLS certificate."""
    state = tmp / "state"
    return client_mod.ClientAuth(ca=state / "api-tls" / "ca.pem", admin_token=client_mod.read_secret(
        state / "admin.token"))


def test_controller_process_restarts_without_losing_jobs(rack_file):
    """TLS and tokens by default; the job's token outlives a restart (its digest is in
    the state directory), the administrator's too."""
    path, address, tmp = rack_file
    proc = start_controller(path, tmp / "build")
    client = client_mod.JobClient(address, auth=client_mod.ClientAuth())  # nothing yet
    try:
        wait_for_state(tmp / "state" / "api-tls" / "ca.pem", proc)
        client = client_mod.JobClient(address, auth=state_auth(tmp))
        assert wait_for_api(client, address, proc)["switches"]["s1"]["connected"]
        assert (tmp / "state" / "admin.token").stat().st_mode & 0o777 == 0o600
        tenant = client_mod.ClientAuth(ca=tmp / "state" / "api-tls" / "ca.pem")
        joined = client_mod.JobClient(address, auth=tenant).join("resnet", 2, 0, "10.0.0.1:4001")
        member = client_mod.JobClient(address, auth=tenant.with_job_token(joined["job_token"]))
        member.join("resnet", 2, 1, "10.0.0.2:4002")
        assert (tmp / "state" / "job-tokens.json").stat().st_mode & 0o777 == 0o600
        assert joined["job_token"] not in (tmp / "state" / "job-tokens.json").read_text()
    finally:
        out = stop(proc)
    assert joined["job_token"] not in out and client.auth.admin_token not in out
    assert "switch s1: configured" in out
    assert (tmp / "build" / "aggregate.json").exists()
    metrics_port = free_port()
    proc = start_controller(path, tmp / "build", compiled=True,
                            extra=("--metrics", f"127.0.0.1:{metrics_port}"))
    try:
        wait_for_api(client, address, proc)
        jobs = client.call("ListJobs")["jobs"]
        assert [(j["job_id"], j["workers"], j["slot_base"]) for j in jobs] == [
            (joined["job_id"], 2, joined["slot_base"])]
        assert member.join("resnet", 2, 1, "10.0.0.2:4002")["job_id"] == joined["job_id"]
        assert member.heartbeat(joined["job_id"], 1)["epoch"] == joined["epoch"]
        stranger = client_mod.JobClient(address, auth=tenant.with_job_token("x" * 43))
        with pytest.raises(grpc.RpcError) as refused:
            stranger.heartbeat(joined["job_id"], 1)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                    timeout=10) as reply:
            scraped = reply.read().decode()
        assert "p4hub_jobs 1.0" in scraped
        assert f'p4hub_job_workers{{job="{joined["job_id"]}"}} 2.0' in scraped
    finally:
        out = stop(proc)
        client.close()
    assert "switch s1: rebuilt" in out and "Prometheus metrics on port" in out


def test_bad_arguments_fail_cleanly(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"switches": {}}')
    assert main(["--topology", str(bad), "--bmv2-json", "x", "--p4info", "y"]) == 1
    assert "at least one switch" in capsys.readouterr().err
    good = tmp_path / "good.json"
    good.write_text(json.dumps(RACK))
    assert main(["--topology", str(good)]) == 1
    assert "give --p4" in capsys.readouterr().err
    assert main(["--topology", str(good), "--metrics", "9100"]) == 1
    assert "metrics address '9100': expected HOST:PORT" in capsys.readouterr().err
    broken = tmp_path / "broken.p4"
    broken.write_text("control {")
    assert main(["--topology", str(good), "--p4", str(broken), "--build-dir", str(tmp_path)]) == 1
    assert "failed" in capsys.readouterr().err


def _bad_slots(ctl):
    """A second switch job over the first one's slots: rebuilding it raises SlotError."""
    from p4hub.controller.core import program as p
    from p4hub.controller.core.updates import INSERT, Entry, FieldMatch, TableWrite

    ctl.join("a", 1, 0, ("10.0.0.1", 4001), now=0.0)
    entry = next(e for e in ctl.registry.expected_entries("s1") if e.table == p.JOBS)
    ctl.apply([TableWrite("s1", INSERT, Entry(p.JOBS, (FieldMatch(p.JOBS_JOB, 2),), entry.action,
                                               entry.params))])
    return RACK


def _pbox_job_without_pbox(ctl):
    """A PBox job on a rack the new topology gives no PBox: rebuilding it raises JobError."""
    ctl.join("c", 1, 0, ("10.0.0.3", 4003), now=0.0, placement="pbox")
    return {key: value for key, value in RACK.items() if key != "pboxes"}


@pytest.mark.parametrize("spoil", [_bad_slots, _pbox_job_without_pbox])
def test_a_bad_switch_state_at_start_up_fails_cleanly(tmp_path, capsys, monkeypatch, spoil):
    """Entries the rebuild cannot make sense of end start-up with one line and status 1,
    not a traceback (SlotError / JobError used to escape main)."""
    from google.protobuf import text_format

    from p4hub.controller import api
    from p4hub.controller.core import topology as topology_mod
    from p4hub.controller.driver import Controller, PipelineConfig
    from p4lite.compiler import driver as compiler

    result = compiler.compile_file(PROGRAM)
    pipeline = PipelineConfig(result.p4info, json.dumps(result.bmv2).encode())
    (tmp_path / "a.json").write_bytes(pipeline.bmv2_json)
    (tmp_path / "a.p4info.txtpb").write_text(text_format.MessageToString(pipeline.p4info))
    server, port = serve_p4runtime(Device(0, Switch), "127.0.0.1:0")
    try:
        raw = dict(RACK, switches={"s1": {**RACK["switches"]["s1"], "grpc_addr": f"127.0.0.1:{port}"}})
        ctl = Controller(topology_mod.from_dict(raw), pipeline)
        ctl.start(now=0.0)
        rack = spoil(ctl)
        ctl.close()
        path = tmp_path / "rack.json"
        path.write_text(json.dumps(dict(rack, switches=raw["switches"],
                                        controller={"listen": f"127.0.0.1:{free_port()}"})))

        def no_serving(*args, **kwargs):
            raise AssertionError("the controller started on a bad switch state")

        monkeypatch.setattr(api, "serve", no_serving)
        status = main(["--topology", str(path), "--bmv2-json", str(tmp_path / "a.json"),
                       "--p4info", str(tmp_path / "a.p4info.txtpb"), "--connect-timeout", "1",
                       "--state-dir", str(tmp_path / "state")])
    finally:
        server.stop(grace=None)
    err = capsys.readouterr().err
    assert status == 1
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("p4hub-controller:")]
    assert len(lines) == 1 and "s1" in lines[0], err


def test_an_unreadable_p4info_fails_cleanly(tmp_path, capsys):
    """A P4Info file that does not parse used to escape main as a protobuf ParseError."""
    rack = tmp_path / "rack.json"
    rack.write_text(json.dumps(RACK))
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "a.p4info.txtpb").write_text("tables { nope")
    assert main(["--topology", str(rack), "--bmv2-json", str(tmp_path / "a.json"),
                 "--p4info", str(tmp_path / "a.p4info.txtpb")]) == 1
    err = capsys.readouterr().err
    assert "p4hub-controller: cannot read the pipeline" in err and "Traceback" not in err
