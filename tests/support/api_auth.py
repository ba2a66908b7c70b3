"""The job API's credentials in the unit tests: one administrator token, written to a
file the CLI reads, and the clients of the administrator and of tenants."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4hub.controller.client import ClientAuth, JobClient
from p4hub.controller.core.credentials import Credentials

ADMIN_TOKEN = "admin-token-of-the-unit-tests-0123456789abcdef"
ADMIN = ClientAuth(admin_token=ADMIN_TOKEN)  # plaintext: the unit tests' servers are --insecure


def credentials() -> Credentials:
    return Credentials(ADMIN_TOKEN)


def admin_cli_env(monkeypatch: pytest.MonkeyPatch, directory: Path) -> Path:
    """The CLI (``cli.main``) as the administrator of a plaintext controller: the token
    in a 0600 file named by $P4HUB_ADMIN_TOKEN_FILE; no job token from the caller's
    environment."""
    path = directory / "admin.token"
    path.write_text(ADMIN_TOKEN + "\n")
    path.chmod(0o600)
    monkeypatch.setenv("P4HUB_ADMIN_TOKEN_FILE", str(path))
    monkeypatch.setenv("P4HUB_INSECURE", "1")
    for name in ("P4HUB_JOB_TOKEN", "P4HUB_JOB_TOKEN_FILE", "P4HUB_CA"):
        monkeypatch.delenv(name, raising=False)
    return path


def tenant(address: str, token: str | None = None, timeout: float = 5.0) -> JobClient:
    """A client that presents ``token`` (a job's) and nothing else."""
    return JobClient(address, timeout=timeout, auth=ClientAuth(job_token=token))
