"""A client of the job API (``p4hub.JobService``): what agents, the torch backend and
the CLI use. It needs only grpc and json, not the controller itself, so host-side code
can import it without the controller's registry, driver and P4Runtime stack.

What a client presents is a ``ClientAuth``: a job's token (metadata
``p4hub-job-token``), the administrator's token (``p4hub-admin-token``, read from the
controller's admin token file), and TLS: the CA that signed the controller's
certificate, and a client certificate where the controller asks for one (mutual TLS).
``ClientAuth.from_env`` reads them from the environment (``ENVIRONMENT``), as the CLI
does; agents pass only their job's token.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from p4hub.controller.core.program import DEFAULT_LANES

SERVICE = "p4hub.JobService"
METHODS = ("JoinJob", "LeaveJob", "Heartbeat", "Barrier", "ListJobs", "ShowJob", "KillJob",
           "Status", "ShowSwitch", "Doctor")


JOB_TOKEN_KEY = "p4hub-job-token"
ADMIN_TOKEN_KEY = "p4hub-admin-token"
ENVIRONMENT = {
    "P4HUB_JOB_TOKEN": "a job's token (or P4HUB_JOB_TOKEN_FILE: a file holding it)",
    "P4HUB_ADMIN_TOKEN_FILE": "the controller's administrator token file (default: "
                              "<state dir>/admin.token where readable)",
    "P4HUB_CA": "the CA certificate that signed the controller's (TLS; unset: plaintext)",
    "P4HUB_CLIENT_CERT": "this client's certificate, for a controller that asks for one",
    "P4HUB_CLIENT_KEY": "its private key",
    "P4HUB_TLS_SERVER_NAME": "the name to check the controller's certificate against, "
                             "when it is not the address dialled",
    "P4HUB_INSECURE": "1: plaintext, for a controller started with --insecure",
    "P4HUB_STATE_DIR": "the controller's state directory, where the defaults above are "
                       "looked for (default /var/lib/p4hub for root)",
}


def default_state_dir() -> Path:
    """The controller's state directory unless ``--state-dir`` says otherwise:
    $P4HUB_STATE_DIR, else /var/lib/p4hub for root, else $XDG_STATE_HOME/p4hub
    (~/.local/state/p4hub)."""
    if os.environ.get("P4HUB_STATE_DIR"):
        return Path(os.environ["P4HUB_STATE_DIR"])
    if os.geteuid() == 0:
        return Path("/var/lib/p4hub")
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "p4hub"


def read_secret(path: str | Path) -> str:
    """A token from a file (its first line); OSError if it cannot be read."""
    return Path(path).read_text().strip()


@dataclass(frozen=True)
class ClientAuth:
    """What a client presents. ``ca`` set: TLS (else plaintext, for a controller started
    with --insecure); ``cert``/``key``: a client certificate (mutual TLS)."""

    job_token: str | None = None
    admin_token: str | None = None
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    server_name: str | None = None

    def __repr__(self) -> str:  # tokens stay out of logs and tracebacks
        return (f"ClientAuth(job_token={'<set>' if self.job_token else None}, "
                f"admin_token={'<set>' if self.admin_token else None}, ca={self.ca}, "
                f"cert={self.cert}, server_name={self.server_name})")

    def metadata(self) -> tuple[tuple[str, str], ...]:
        out = []
        if self.job_token:
            out.append((JOB_TOKEN_KEY, self.job_token))
        if self.admin_token:
            out.append((ADMIN_TOKEN_KEY, self.admin_token))
        return tuple(out)

    def with_job_token(self, token: str | None) -> ClientAuth:
        """The same TLS settings with ``token`` and no administrator token (an agent's)."""
        return ClientAuth(token, None, self.ca, self.cert, self.key, self.server_name)

    def channel(self, address: str) -> grpc.Channel:
        if self.ca is None:
            return grpc.insecure_channel(address)
        client = (None, None) if self.cert is None or self.key is None else \
            (self.key.read_bytes(), self.cert.read_bytes())
        tls = grpc.ssl_channel_credentials(self.ca.read_bytes(), *client)
        options = [] if self.server_name is None else \
            [("grpc.ssl_target_name_override", self.server_name)]
        return grpc.secure_channel(address, tls, options=options)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, admin: bool = True) -> ClientAuth:
        """The credentials ``ENVIRONMENT`` names; ``admin``: also the administrator's
        token (from $P4HUB_ADMIN_TOKEN_FILE, else the default state directory's file when
        this user can read it). Raises OSError for a named file that cannot be read."""
        env = os.environ if environ is None else environ
        job = env.get("P4HUB_JOB_TOKEN") or None
        if job is None and env.get("P4HUB_JOB_TOKEN_FILE"):
            job = read_secret(env["P4HUB_JOB_TOKEN_FILE"])
        admin_token = None
        if admin:
            named = env.get("P4HUB_ADMIN_TOKEN_FILE")
            if named:
                admin_token = read_secret(named)
            else:
                default = default_state_dir() / "admin.token"
                if os.access(default, os.R_OK):
                    admin_token = read_secret(default)
        paths = {k: Path(env[v]) if env.get(v) else None
                 for k, v in (("ca", "P4HUB_CA"), ("cert", "P4HUB_CLIENT_CERT"),
                              ("key", "P4HUB_CLIENT_KEY"))}
        if env.get("P4HUB_INSECURE") == "1":
            paths = {"ca": None, "cert": None, "key": None}
        elif paths["ca"] is None:  # the CA a controller on this machine made for itself
            made = default_state_dir() / "api-tls" / "ca.pem"
            paths["ca"] = made if os.access(made, os.R_OK) else None
        return cls(job, admin_token, server_name=env.get("P4HUB_TLS_SERVER_NAME") or None,
                   **paths)


def encode(message: dict) -> bytes:
    return json.dumps(message).encode()


def explain(exc: grpc.RpcError, address: str) -> str:
    """An API error in words: a controller that did not answer is told apart from one
    that answered no."""
    code = exc.code()
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return (f"the controller at {address} did not answer ({code.name}): is p4hub-controller "
                "running and reachable there, and does this client speak its TLS (P4HUB_CA; "
                "P4HUB_INSECURE=1 for a controller started with --insecure)?")
    return f"the controller at {address} refused: {exc.details()} ({code.name})"


def job_token(reply: dict, auth: ClientAuth) -> str | None:
    """The job's token after a join: the one the controller made (in the reply of the
    join that created the job), else the one the client brought."""
    return reply.get("job_token") or auth.job_token


class JobClient:
    """What agents and the CLI use: ``JobClient("10.0.0.254:50060").join(...)``."""

    def __init__(self, address: str, timeout: float = 10.0, wait_for_ready: bool = False,
                 auth: ClientAuth | None = None) -> None:
        """``wait_for_ready``: calls wait (up to their deadline) for a controller that is
        not up yet, instead of failing at once; what agents starting with it want.
        ``auth``: what to present (None: ``ClientAuth.from_env()``, the operator's)."""
        self.auth = ClientAuth.from_env() if auth is None else auth
        self.channel = self.auth.channel(address)
        self._metadata = self.auth.metadata()
        self.timeout = timeout
        self.wait_for_ready = wait_for_ready
        self._calls = {
            m: self.channel.unary_unary(f"/{SERVICE}/{m}", request_serializer=encode,
                                        response_deserializer=json.loads)
            for m in METHODS
        }

    def call(self, method: str, deadline: float | None = None, **request: Any) -> dict:
        """Raises grpc.RpcError with the API's code and reason."""
        return self._calls[method](request, timeout=deadline or self.timeout,
                                   metadata=self._metadata, wait_for_ready=self.wait_for_ready)

    def join(self, name: str, world_size: int, rank: int, address: str,
             placement: str = "auto", lanes: int = DEFAULT_LANES, precision: float | None = None) -> dict:
        """``precision``: the precision option's relative error bound (None: off, and the
        request is today's). A join that created the job without bringing a token gets
        the controller's (``job_token``): this client presents it from then on."""
        extra = {} if precision is None else {"precision": precision}
        reply = self.call("JoinJob", name=name, world_size=world_size, rank=rank,
                          address=address, placement=placement, lanes=lanes, **extra)
        if reply.get("job_token"):
            self.auth = dataclasses.replace(self.auth, job_token=reply["job_token"])
            self._metadata = self.auth.metadata()
        return reply

    def leave(self, job_id: int, rank: int) -> dict:
        return self.call("LeaveJob", job_id=job_id, rank=rank)

    def heartbeat(self, job_id: int, rank: int) -> dict:
        return self.call("Heartbeat", job_id=job_id, rank=rank)

    def barrier(self, job_id: int, rank: int, timeout: float = 60.0) -> dict:
        return self.call("Barrier", deadline=timeout + 5.0, job_id=job_id, rank=rank,
                         timeout=timeout)

    def close(self) -> None:
        self.channel.close()
