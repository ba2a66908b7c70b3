"""Tenants kept apart on the job API: a second tenant can neither join, heartbeat for,
show, doctor, leave nor kill the first tenant's job, nor tell whether it exists; the
administrator can do all of it; tokens never appear in replies, CLI output or logs."""

from __future__ import annotations

import json
import logging

import grpc
import pytest

from p4hub.controller import cli
from p4hub.controller.client import ClientAuth, JobClient
from tests.support.api_auth import ADMIN, ADMIN_TOKEN, tenant
from tests.unit.test_controller_api import stack  # noqa: F401 (fixture)
from tests.unit.test_controller_driver import pipeline  # noqa: F401 (fixture)

MISSING = 77  # a job id nobody has


def refusal(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


@pytest.fixture
def tenants(stack, caplog):  # noqa: F811
    """Tenant A runs job "alpha" (two ranks, the token the controller made); tenant B
    runs "beta" with a token it brought."""
    caplog.set_level(logging.DEBUG)
    _, _, ctl, _, _, admin, address = stack
    alpha = tenant(address).join("alpha", 2, 0, "10.0.0.1:4001")
    a = tenant(address, alpha["job_token"])
    a.join("alpha", 2, 1, "10.0.0.2:4002")
    b_token = "b" * 43
    b = tenant(address, b_token)
    beta = b.join("beta", 1, 0, "10.0.0.3:4003")
    yield stack, a, alpha, b, beta
    for client in (a, b):
        client.close()


def test_the_creating_join_gets_the_token_later_joins_need_it(tenants):
    (_, _, ctl, _, _, _, address), a, alpha, b, beta = tenants
    assert len(alpha["job_token"]) == 43 and "job_token" not in beta  # brought: not echoed
    assert set(ctl.registry.jobs[alpha["job_id"]].workers) == {0, 1}
    code, details = refusal(lambda: tenant(address).join("alpha", 2, 1, "10.0.0.2:4002"))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert "job name 'alpha' is taken" in details and "p4hub-job-token" in details
    code, details = refusal(lambda: b.join("alpha", 2, 1, "10.0.0.2:4002"))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    code, details = refusal(lambda: tenant(address, "short").join("gamma", 1, 0, "10.0.0.4:1"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "URL-safe" in details
    assert "gamma" not in [j.name for j in ctl.registry.jobs.values()]


def test_a_second_tenant_cannot_act_on_the_first_ones_job_nor_tell_it_exists(tenants):
    (_, _, ctl, _, clock, _, address), a, alpha, b, beta = tenants
    job_id = alpha["job_id"]
    job = ctl.registry.jobs[job_id]
    seen = {rank: w.last_seen for rank, w in job.workers.items()}
    clock.now = 3.0
    anonymous = tenant(address)
    calls = {
        "Heartbeat": lambda c, j: c.heartbeat(j, 0),
        "Barrier": lambda c, j: c.barrier(j, 0, timeout=1),
        "LeaveJob": lambda c, j: c.leave(j, 0),
        "ShowJob": lambda c, j: c.call("ShowJob", job_id=j),
        "Doctor": lambda c, j: c.call("Doctor", job_id=j, settle=0),
    }
    for method, call in calls.items():
        for client, code in ((b, grpc.StatusCode.PERMISSION_DENIED),
                             (anonymous, grpc.StatusCode.UNAUTHENTICATED)):
            existing = refusal(lambda c=client, m=call: m(c, job_id))
            missing = refusal(lambda c=client, m=call: m(c, MISSING))
            assert existing[0] == missing[0] == code, (method, existing)
            # the same answer but for the id asked about
            assert existing[1].replace(f"job {job_id}", "job N") == \
                missing[1].replace(f"job {MISSING}", "job N"), method
            assert "exist" not in existing[1] and "alpha" not in existing[1]
    for method in ("KillJob", "ListJobs", "Status"):
        for client in (a, b, anonymous):  # a job's token administers nothing
            code, details = refusal(lambda c=client, m=method: c.call(m, job_id=job_id))
            assert code == grpc.StatusCode.UNAUTHENTICATED and "administrator" in details
    code, _ = refusal(lambda: anonymous.call("ShowSwitch", name="s1"))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    wrong_admin = JobClient(address, timeout=5.0, auth=ClientAuth(admin_token="w" * 43))
    assert refusal(lambda: wrong_admin.call("KillJob", job_id=job_id))[0] == \
        grpc.StatusCode.PERMISSION_DENIED
    # nothing of it reached the job
    assert job_id in ctl.registry.jobs and set(job.workers) == {0, 1}
    assert {rank: w.last_seen for rank, w in job.workers.items()} == seen
    assert job.barrier_waiting == set()
    # its own token does
    assert a.heartbeat(job_id, 0)["epoch"] == alpha["epoch"]
    assert job.workers[0].last_seen == 3.0
    assert a.call("ShowJob", job_id=job_id)["name"] == "alpha"
    assert a.call("Doctor", job_id=job_id, settle=0)["reports"][0]["job_id"] == job_id
    anonymous.close()
    wrong_admin.close()


def test_the_administrator_can_do_it_all(tenants):
    (_, _, ctl, _, _, admin, address), a, alpha, b, beta = tenants
    job_id = alpha["job_id"]
    listed = admin.call("ListJobs")["jobs"]
    assert sorted(j["name"] for j in listed) == ["alpha", "beta"]
    assert admin.call("ShowJob", job_id=job_id)["workers"] == 2
    assert admin.heartbeat(job_id, 1)["epoch"] == alpha["epoch"]
    assert admin.call("Doctor", settle=0)["reports"]
    assert admin.call("KillJob", job_id=job_id) == {}
    assert job_id not in ctl.registry.jobs
    # its members hear why with their token; others still learn nothing
    code, details = refusal(lambda: a.heartbeat(job_id, 0))
    assert code == grpc.StatusCode.NOT_FOUND and "killed by an operator" in details
    assert refusal(lambda: b.heartbeat(job_id, 0))[1].replace(f"job {job_id}", "job N") == \
        refusal(lambda: b.heartbeat(MISSING, 0))[1].replace(f"job {MISSING}", "job N")


def test_tokens_never_appear_in_replies_cli_output_or_logs(tenants, capsys, caplog, monkeypatch,
                                                           tmp_path):
    (_, _, _, _, _, admin, address), a, alpha, b, beta = tenants
    secrets_ = (alpha["job_token"], "b" * 43, ADMIN_TOKEN)
    replies = [admin.call("ListJobs"), admin.call("ShowJob", job_id=alpha["job_id"]),
               admin.call("Status"), a.call("ShowJob", job_id=alpha["job_id"]),
               admin.call("Doctor", settle=0), a.heartbeat(alpha["job_id"], 0)]
    for argv in (["--json", "jobs"], ["job", "show", str(alpha["job_id"]), "--json"],
                 ["job", "show", str(alpha["job_id"])], ["jobs"], ["status", "--json"]):
        assert cli.main(["--controller", address, *argv]) == 0
    monkeypatch.setenv("P4HUB_JOB_TOKEN", alpha["job_token"])  # a tenant's CLI
    monkeypatch.delenv("P4HUB_ADMIN_TOKEN_FILE")
    # nor the default admin.token of the session's state directory (other tests' controllers
    # write one there): a tenant's machine has none
    (tmp_path / "tenant-state").mkdir()
    monkeypatch.setenv("P4HUB_STATE_DIR", str(tmp_path / "tenant-state"))
    assert cli.main(["--controller", address, "job", "show", str(alpha["job_id"]), "--json"]) == 0
    assert cli.main(["--controller", address, "jobs"]) == 1  # not an administrator
    out = capsys.readouterr()
    text = json.dumps(replies) + out.out + out.err + caplog.text
    assert "alpha" in out.out and "UNAUTHENTICATED" in out.err
    for secret in secrets_:
        assert secret not in text
    assert "<set>" in repr(ADMIN) and ADMIN_TOKEN not in repr(ADMIN)
