"""The job API's credentials as files (controller/auth.py) and their checks
(controller/core/credentials.py): the administrator token file is created 0600 and
refused when others may read it; the job token digests are saved 0600, without the
tokens; a restarted controller keeps the digests of the jobs it rebuilt only."""

from __future__ import annotations

import argparse

import pytest

from p4hub.controller import auth
from p4hub.controller.client import ClientAuth
from p4hub.controller.core.credentials import (
    Caller,
    Credentials,
    PermissionDenied,
    Unauthenticated,
    check_token,
    digest,
)
from p4hub.controller.core.errors import RefusedError, StartupError

TOKEN = "t" * 43


def test_the_admin_token_file_is_created_0600_kept_and_refused_when_open(tmp_path):
    path = tmp_path / "admin.token"
    token = auth.admin_token(path)
    assert path.stat().st_mode & 0o777 == 0o600 and len(token) == 43
    assert auth.admin_token(path) == token  # kept across restarts
    path.chmod(0o644)
    with pytest.raises(StartupError, match="open to others"):
        auth.admin_token(path)
    path.chmod(0o600)
    path.write_text("short\n")
    with pytest.raises(StartupError, match="URL-safe"):
        auth.admin_token(path)


def test_job_token_digests_are_saved_0600_without_the_tokens(tmp_path):
    creds = Credentials(TOKEN)
    creds.record(3, 1234, "job-token-" + "x" * 40)
    path = tmp_path / "job-tokens.json"
    auth.save_job_tokens(path, creds.snapshot())
    assert path.stat().st_mode & 0o777 == 0o600
    assert "job-token-" not in path.read_text()
    assert auth.load_job_tokens(path) == {3: (1234, digest("job-token-" + "x" * 40))}
    path.write_text("{not json")
    assert auth.load_job_tokens(path) == {}
    assert auth.load_job_tokens(tmp_path / "none.json") == {}


def test_a_restart_keeps_the_digests_of_the_rebuilt_jobs_alone():
    creds = Credentials(TOKEN, {1: (10, digest("a" * 43)), 2: (20, digest("b" * 43)),
                                3: (30, digest("c" * 43))})
    creds.retain({1: 10, 2: 99})  # job 2's id now holds another job; job 3 is gone
    assert creds.holds(Caller(job_token="a" * 43), 1)
    assert not creds.holds(Caller(job_token="b" * 43), 2)
    assert not creds.holds(Caller(job_token="c" * 43), 3)


def test_refusals_say_what_is_missing_and_the_same_for_any_job():
    creds = Credentials(TOKEN)
    creds.record(1, 10, "a" * 43)
    with pytest.raises(Unauthenticated, match="p4hub-job-token"):
        creds.require_job(Caller(), 1, "showing")
    answers = []
    for job_id in (1, 2):
        with pytest.raises(PermissionDenied) as info:
            creds.require_job(Caller(job_token="b" * 43), job_id, "showing")
        answers.append(str(info.value).replace(str(job_id), "N"))
    assert answers[0] == answers[1]
    with pytest.raises(Unauthenticated, match="administrator"):
        creds.require_admin(Caller(job_token="a" * 43), "listing the jobs")
    with pytest.raises(PermissionDenied):
        creds.require_admin(Caller(admin_token="w" * 43), "listing the jobs")
    creds.require_admin(Caller(admin_token=TOKEN), "listing the jobs")
    creds.require_job(Caller(admin_token=TOKEN), 2, "showing")  # an administrator may
    with pytest.raises(RefusedError):
        check_token("a" * 31)
    with pytest.raises(RefusedError):
        check_token("a" * 42 + "/")
    assert TOKEN not in repr(Caller(job_token=TOKEN, admin_token=TOKEN))
    assert TOKEN not in repr(ClientAuth(job_token=TOKEN, admin_token=TOKEN))


def options(tmp_path, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    auth.add_arguments(parser)
    return parser.parse_args(["--state-dir", str(tmp_path / "state"), *argv])


def test_the_controller_serves_tls_unless_told_insecure(tmp_path, caplog):
    made = auth.configure(options(tmp_path), "127.0.0.1:50060")
    assert made.tls is not None and "api-tls/ca.pem" in made.summary
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "state" / "api-tls" / "job-api.key").stat().st_mode & 0o777 == 0o600
    token = (tmp_path / "state" / "admin.token").read_text().strip()
    assert token not in made.summary
    plain = auth.configure(options(tmp_path, "--insecure"), "127.0.0.1:50060")
    assert plain.tls is None and "PLAINTEXT" in caplog.text
    with pytest.raises(StartupError, match="choose one"):
        auth.configure(options(tmp_path, "--insecure", "--api-cert", "x"), "127.0.0.1:1")
    with pytest.raises(StartupError, match="both --api-cert and --api-key"):
        auth.configure(options(tmp_path, "--api-cert", "x"), "127.0.0.1:1")
    with pytest.raises(StartupError, match="job API TLS"):
        auth.configure(options(tmp_path, "--api-cert", "x", "--api-key", "y"), "127.0.0.1:1")
