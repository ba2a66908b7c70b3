"""The job API's credentials as files and gRPC sees them (the checks themselves are
controller/core/credentials.py's).

The controller keeps its state in one directory (``--state-dir``; default
``/var/lib/p4hub`` for root, else ``$XDG_STATE_HOME/p4hub`` or ``~/.local/state/p4hub``),
created 0700:

  admin.token       the administrator's token, created 0600 at the first start and kept
                    (a file readable by others is refused); ``p4hub`` reads it with
                    ``--admin-token-file`` / ``$P4HUB_ADMIN_TOKEN_FILE`` (by default this
                    path, where readable)
  job-tokens.json   SHA-256 digests of the running jobs' tokens (0600, rewritten on each
                    job's creation), so that a restarted controller still answers the
                    agents of the jobs it rebuilt from the switches

Per call, ``caller`` reads what the client presented: the metadata keys
``p4hub-job-token`` and ``p4hub-admin-token``, and, under mutual TLS, the common name
of the client certificate gRPC verified (one of ``admin_names``: an administrator).
Tokens are never logged.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from p4hub.controller.client import ADMIN_TOKEN_KEY, JOB_TOKEN_KEY, default_state_dir
from p4hub.controller.core.credentials import Caller, Credentials, check_token, new_token
from p4hub.controller.core.errors import RefusedError, StartupError

log = logging.getLogger("p4hub.controller")

ADMIN_TOKEN_FILE = "admin.token"
JOB_TOKENS_FILE = "job-tokens.json"
MAX_METADATA_VALUE = 1024  # longer "tokens" are refused before any digest is taken


def caller(context: grpc.ServicerContext, admin_names: frozenset[str]) -> Caller:
    """What this call presented (its metadata, its verified client certificate)."""
    metadata = {key: value for key, value in (context.invocation_metadata() or ())
                if isinstance(value, str)}
    admin_cert = False
    if admin_names:
        names = context.auth_context().get("x509_common_name", [])
        admin_cert = any(n.decode(errors="replace") in admin_names for n in names)
    return Caller(_token(metadata.get(JOB_TOKEN_KEY)), _token(metadata.get(ADMIN_TOKEN_KEY)),
                  admin_cert)


def _token(value: str | None) -> str | None:
    if value is None:
        return None
    if len(value) > MAX_METADATA_VALUE:
        raise RefusedError(f"a credential in the metadata is over {MAX_METADATA_VALUE} characters")
    return value


def state_dir(path: Path | None) -> Path:
    """The controller's state directory, created 0700 if missing."""
    path = path or default_state_dir()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError(f"state directory {path}: {exc} (give --state-dir)") from None
    return path


def admin_token(path: Path) -> str:
    """The administrator's token at ``path``: created there (0600) when missing, else
    read back, refused when the file is readable or writable by anyone but its owner."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        mode = path.stat().st_mode
        if mode & 0o077:
            raise StartupError(f"{path} is open to others (mode {mode & 0o777:o}): "
                               f"chmod 600 {path}, or delete it for a new token") from None
        try:
            return check_token(path.read_text().strip(), "administrator token")
        except RefusedError as exc:
            raise StartupError(f"{path}: {exc}") from None
    except OSError as exc:
        raise StartupError(f"administrator token file {path}: {exc}") from None
    token = new_token()
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    log.info("created the administrator token file %s (0600)", path)
    return token


def load_job_tokens(path: Path) -> dict[int, tuple[int, str]]:
    """job id -> (name tag, token digest) as ``save_job_tokens`` left them ({} if none
    or unreadable: those jobs' agents are then refused, and say so)."""
    try:
        raw = json.loads(path.read_text())
        return {int(job_id): (int(tag), str(hexdigest))
                for job_id, (tag, hexdigest) in raw.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        log.warning("%s unreadable (%s): the rebuilt jobs' agents will be refused", path, exc)
        return {}


def save_job_tokens(path: Path, tokens: dict[int, tuple[int, str]]) -> None:
    """Digests only, written 0600 next to ``path`` and renamed over it (atomic)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({str(k): list(v) for k, v in sorted(tokens.items())}, out)
        os.replace(tmp, path)
    except OSError as exc:  # the job runs on; only a restart would lose its token
        log.warning("cannot save the job token digests to %s: %s", path, exc)


def server_credentials(cert: Path, key: Path, client_ca: Path | None) -> grpc.ServerCredentials:
    """TLS with the server's certificate; with ``client_ca``, mutual TLS: every client
    must show a certificate that CA signed."""
    try:
        pair = (key.read_bytes(), cert.read_bytes())
        ca = client_ca.read_bytes() if client_ca is not None else None
    except OSError as exc:
        raise StartupError(f"job API TLS: {exc}") from None
    return grpc.ssl_server_credentials([pair], root_certificates=ca,
                                       require_client_auth=ca is not None)


# -- p4hub-controller's options -----------------------------------------------------------

AUTO_TLS_DIR = "api-tls"  # under the state directory: the CA and certificate made when none given
ADMIN_NAMES = ("admin",)  # controller/pki.py's operator certificate


@dataclass(frozen=True)
class ApiSecurity:
    """What ``configure`` made of the options: for ``JobService`` and ``api.serve``."""

    credentials: Credentials
    on_tokens: Callable[[dict[int, tuple[int, str]]], None]
    tls: grpc.ServerCredentials | None
    admin_names: frozenset[str]
    summary: str  # one line for the log: how clients reach the API (no secret in it)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("job API security (docs/running.md)")
    group.add_argument("--state-dir", type=Path,
                       help="where the administrator token and the job token digests live "
                       "(default /var/lib/p4hub for root, else ~/.local/state/p4hub)")
    group.add_argument("--admin-token-file", type=Path,
                       help="the administrator token (created 0600 if missing; default "
                       "<state dir>/admin.token)")
    group.add_argument("--api-cert", type=Path, help="the job API's TLS certificate (PEM)")
    group.add_argument("--api-key", type=Path, help="its private key (PEM)")
    group.add_argument("--api-client-ca", type=Path,
                       help="mutual TLS: every client must show a certificate this CA signed")
    group.add_argument("--api-admin-name", action="append", default=None,
                       help="a client certificate common name that administers (mutual TLS; "
                       f"repeatable; default {', '.join(ADMIN_NAMES)})")
    group.add_argument("--insecure", action="store_true",
                       help="serve the job API in plaintext (hand-made labs only; logged)")


def configure(args: argparse.Namespace, listen: str) -> ApiSecurity:
    """The job API's credentials and TLS from the options. Without --api-cert/--api-key
    (and without --insecure) the controller makes its own CA and certificate under
    <state dir>/api-tls (controller/pki.py) and clients on this machine find its CA there."""
    directory = state_dir(args.state_dir)
    admin_file = args.admin_token_file or directory / ADMIN_TOKEN_FILE
    credentials = Credentials(admin_token(admin_file), load_job_tokens(directory / JOB_TOKENS_FILE))
    tokens_file = directory / JOB_TOKENS_FILE

    def on_tokens(tokens: dict[int, tuple[int, str]]) -> None:
        save_job_tokens(tokens_file, tokens)

    names = frozenset(args.api_admin_name or ADMIN_NAMES)
    if args.insecure:
        if args.api_cert or args.api_key or args.api_client_ca:
            raise StartupError("--insecure and --api-cert/--api-key/--api-client-ca: choose one")
        log.warning("the job API is PLAINTEXT (--insecure): its tokens cross the network in "
                    "the clear; use this on a hand-made lab only")
        return ApiSecurity(credentials, on_tokens, None, names,
                           f"plaintext (--insecure); admin token file {admin_file}")
    if (args.api_cert is None) != (args.api_key is None):
        raise StartupError("give both --api-cert and --api-key")
    cert, key = args.api_cert, args.api_key
    ca_note = ""
    if cert is None:
        cert, key, ca = auto_certificate(directory / AUTO_TLS_DIR, listen)
        ca_note = f"; clients verify it with P4HUB_CA={ca}"
    mutual = "" if args.api_client_ca is None else \
        f", client certificates required (CA {args.api_client_ca}; administrators: {sorted(names)})"
    return ApiSecurity(credentials, on_tokens, server_credentials(cert, key, args.api_client_ca),
                       names, f"TLS (certificate {cert}{ca_note}){mutual}; "
                       f"admin token file {admin_file}")


def auto_certificate(directory: Path, listen: str) -> tuple[Path, Path, Path]:
    """A CA kept under ``directory`` (made again only when it expires within a day, so
    clients' copies stay good across restarts) and a fresh server certificate for
    ``listen``'s host and this machine's name; (cert, key, CA cert)."""
    from p4hub.controller import pki  # cryptography: only when the controller makes its own

    ca = directory / pki.CA_CERT
    try:
        if not ca.exists() or _expires_within(ca, datetime.timedelta(days=1)):
            pki.make_ca(directory, name="p4hub controller CA")
        host = listen.rpartition(":")[0].strip("[]")
        hosts = [h for h in (host, socket.gethostname()) if h and h not in ("0.0.0.0", "::")]
        cert, key = pki.issue(directory, "job-api", hosts=hosts, server=True)
    except (OSError, pki.PKIError) as exc:
        raise StartupError(f"making the job API's certificate in {directory}: {exc} (give "
                           "--api-cert and --api-key)") from None
    return cert, key, ca


def _expires_within(cert_path: Path, margin: datetime.timedelta) -> bool:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    expiry = cert.not_valid_after.replace(tzinfo=datetime.UTC)
    return expiry - margin < datetime.datetime.now(datetime.UTC)
