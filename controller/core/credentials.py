"""Who may act on which job: per-job tokens and the administrator's credential, sans-I/O.

A job's token is created with the job: the join that creates it brings one (a launcher
that hands the same token to every rank before any has joined: the torch backend's
rank 0 through the c10d store, the rack launcher through each worker's environment) or
gets a fresh one (``secrets.token_urlsafe``) in its reply. Every later call about that
job (joining it, heartbeats, barriers, leaving, ``ShowJob``, ``Doctor`` on it) must
bring the token; calls across jobs (``Status``, ``ListJobs``, ``KillJob``, ``Doctor``
on every job, ``ShowSwitch``) need the administrator's credential (its token, or a
client certificate the TLS layer verified and named an administrator: ``Caller``).
An administrator may also do everything a job's token allows.

Only SHA-256 digests of the job tokens are kept (and persisted by the adapter, so that
a restarted controller keeps answering the agents of the jobs it rebuilt); they are
compared with ``hmac.compare_digest``. A refusal never tells whether the job exists: a
token for a missing job and a wrong token for an existing one get the same answer.
The job *name* is one namespace shared by every tenant, so joining a taken name
without its token is refused as such (tenants who care use unguessable names, as the
torch backend does by default).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
from dataclasses import dataclass

from p4hub.controller.core.errors import P4hubControllerError, RefusedError

TOKEN_BYTES = 32  # secrets.token_urlsafe(32): 43 characters, 256 bits
MIN_TOKEN_CHARS = 32  # a token a client brings must be at least this long
MAX_TOKEN_CHARS = 256
_TOKEN_ALPHABET = frozenset(string.ascii_letters + string.digits + "-_")

JOB_TOKEN_HELP = ("the job's token (gRPC metadata 'p4hub-job-token'; the CLI's --job-token "
                  "or $P4HUB_JOB_TOKEN)")
ADMIN_HELP = ("an administrator credential (the controller's admin token file: the CLI's "
              "--admin-token-file or $P4HUB_ADMIN_TOKEN_FILE; or an administrator's client "
              "certificate)")


class Unauthenticated(P4hubControllerError):
    """The call brought no credential it needs (gRPC UNAUTHENTICATED)."""


class PermissionDenied(P4hubControllerError):
    """The call's credential does not allow it (gRPC PERMISSION_DENIED)."""


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_token(token: object, what: str = "job token") -> str:
    """``token`` if it is one a client may bring (URL-safe, 32..256 characters)."""
    if not isinstance(token, str) or not MIN_TOKEN_CHARS <= len(token) <= MAX_TOKEN_CHARS \
            or not set(token) <= _TOKEN_ALPHABET:
        raise RefusedError(f"a {what} must be {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} URL-safe "
                           "characters (secrets.token_urlsafe(32) makes one)")
    return token


@dataclass(frozen=True)
class Caller:
    """What one call presented. ``admin_cert``: the TLS layer verified a client
    certificate that names an administrator; ``local``: an in-process caller (the
    metrics exporter), trusted as an administrator. Never printed with its tokens."""

    job_token: str | None = None
    admin_token: str | None = None
    admin_cert: bool = False
    local: bool = False

    def __repr__(self) -> str:  # tokens stay out of logs and tracebacks
        return (f"Caller(job_token={'<set>' if self.job_token else None}, "
                f"admin_token={'<set>' if self.admin_token else None}, "
                f"admin_cert={self.admin_cert}, local={self.local})")


ANONYMOUS = Caller()
LOCAL = Caller(local=True)


class Credentials:
    """The administrator's token digest and each job's token digest, keyed by job id:
    the latest job created under that id (running, or ended and still listed)."""

    def __init__(self, admin_token: str, jobs: dict[int, tuple[int, str]] | None = None) -> None:
        """``jobs``: job id -> (name tag, token digest), as ``snapshot`` gave them."""
        self._admin = digest(admin_token)
        self._jobs: dict[int, tuple[int, str]] = dict(jobs or {})

    # -- checks ----------------------------------------------------------------------

    def is_admin(self, caller: Caller) -> bool:
        if caller.local or caller.admin_cert:
            return True
        return caller.admin_token is not None and \
            hmac.compare_digest(digest(caller.admin_token), self._admin)

    def require_admin(self, caller: Caller, what: str) -> None:
        if self.is_admin(caller):
            return
        if caller.admin_token is None:
            raise Unauthenticated(f"{what} needs {ADMIN_HELP}")
        raise PermissionDenied(f"{what}: the administrator token presented is not the "
                               "controller's")

    def holds(self, caller: Caller, job_id: int) -> bool:
        """Whether ``caller``'s job token is job ``job_id``'s (False for an unknown job)."""
        entry = self._jobs.get(job_id)
        presented = digest(caller.job_token or "")
        # compared even when the job is unknown, so both cases take the same time
        expected = entry[1] if entry is not None else digest(secrets.token_hex(16))
        return hmac.compare_digest(presented, expected) and entry is not None \
            and caller.job_token is not None

    def require_job(self, caller: Caller, job_id: int, what: str) -> None:
        """Refuse unless ``caller`` holds job ``job_id``'s token or is an administrator;
        the same refusal whether or not the job exists."""
        if self.is_admin(caller):
            return
        if caller.job_token is None:
            raise Unauthenticated(f"{what} job {job_id} needs {JOB_TOKEN_HELP}, or {ADMIN_HELP}")
        if not self.holds(caller, job_id):
            raise PermissionDenied(f"{what} job {job_id}: the job token presented does not "
                                   "grant it")

    def require_join(self, caller: Caller, name: str, job_id: int) -> None:
        """Joining the existing job ``job_id`` named ``name``."""
        if self.is_admin(caller):
            return
        if caller.job_token is None:
            raise Unauthenticated(f"job name {name!r} is taken: joining it needs "
                                  f"{JOB_TOKEN_HELP} (or choose another name)")
        if not self.holds(caller, job_id):
            raise PermissionDenied(f"job name {name!r} is taken and the job token presented "
                                   "does not grant joining it")

    # -- changes ---------------------------------------------------------------------

    def record(self, job_id: int, tag: int, token: str) -> None:
        """Job ``job_id`` (name tag ``tag``) was created with ``token``."""
        self._jobs[job_id] = (tag, digest(token))

    def retain(self, jobs: dict[int, int]) -> None:
        """Keep only the digests of ``jobs`` (job id -> name tag), e.g. the jobs a
        restarted controller rebuilt: another tag means another job under a reused id."""
        self._jobs = {job_id: entry for job_id, entry in self._jobs.items()
                      if jobs.get(job_id) == entry[0]}

    def snapshot(self) -> dict[int, tuple[int, str]]:
        """job id -> (name tag, token digest): what the adapter persists (digests only)."""
        return dict(self._jobs)
