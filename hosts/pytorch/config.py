"""How a p4hub process group finds its job: environment variables, read once per group.

torch.distributed hands a backend only ``(store, rank, world_size, timeout)``, so
everything else comes from the environment, which ``torchrun`` passes to every
worker unchanged:

=====================  ==================================================================
P4HUB_CONTROLLER       ``host:port`` of the controller's job API: the group joins a job
                       there and gets its aggregator (the switch, or a PBox) and slots
P4HUB_AGGREGATOR       ``host:port`` of an aggregator whose job is already configured
                       (``p4hub-pbox --job ID:WORLD``): used when no controller is set
P4HUB_DATA_IP          this rank's address on the data network (default: the address
                       the kernel would use toward the controller or aggregator)
P4HUB_PORT             this rank's UDP port for the first p4hub group of the process
                       (later groups take the next ports); default: any free port
P4HUB_JOB_NAME         job name at the controller (default: a fresh one per group)
P4HUB_JOB_TOKEN        the job's token at the controller (or P4HUB_JOB_TOKEN_FILE: a file
                       holding it): rank 0 hands it to the other ranks through the store
                       and every rank joins with it; default: a fresh one per group
                       (``secrets.token_urlsafe(32)``), which creates the job
P4HUB_CA               the CA certificate that signed the controller's (TLS; default: the
                       CA a controller on this machine made, where readable); with
                       P4HUB_CLIENT_CERT/P4HUB_CLIENT_KEY for mutual TLS, P4HUB_INSECURE=1
                       for a controller started with --insecure (controller/client.py)
P4HUB_PLACEMENT        ``auto`` (switch if it has room, else PBox) or ``pbox``
P4HUB_JOB_ID           without a controller: the job id configured on the aggregator (1)
P4HUB_SLOT_BASE        without a controller: the job's first slot (0)
P4HUB_SLOT_COUNT       without a controller: the job's slot count (64)
P4HUB_WINDOW           slots kept in flight (default: what the job was given)
P4HUB_LANES            int32 lanes per packet, 64 (default) or 256 (a quarter of the
                       packets; asked for at join, or as configured on the aggregator)
P4HUB_TIMEOUT          seconds without progress before a collective fails (default:
                       the group's timeout from ``init_process_group``)
P4HUB_RTO, P4HUB_RTO_MAX  first and largest retransmission timeout, seconds
P4HUB_CLASSES          priority classes of the agent (1, the default: one FIFO stream; up
                       to 8): the job's slots are split between them (hosts/session.py),
                       for hosts.pytorch.overlap's P3 schedule
P4HUB_DEAD_AFTER       seconds without a peer's heartbeat before it counts as dead (8)
P4HUB_PRECISION        the precision option: a relative error bound in (0, 1); blocks that
                       int32 quantization cannot carry within it go as float32 to a PBox
                       (asked for at join: the job keeps its switch slots and holds a float
                       route on a PBox; without a controller the aggregator must be a
                       PBox). Unset: off
P4HUB_SCATTER          where reduce-scatters and all-gathers run: ``allreduce`` (default:
                       the whole buffer's all-reduce) or ``network`` (wire version 3, each
                       rank receiving only its own shard's results, and sending only its
                       own shard where the join reply says ``gather``: on the rack's
                       switch or a PBox, the job's slots on one of them; a job over
                       racks, whose leaves have no scatter rounds, is refused)
=====================  ==================================================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from p4hub.hosts.errors import BackendError
from p4hub.hosts.wire import DEFAULT_LANES, LANE_COUNTS

PLACEMENTS = ("auto", "pbox")
SCATTER_MODES = ("allreduce", "network")
DEFAULT_SLOT_COUNT = 64


@dataclass(frozen=True)
class BackendConfig:
    controller: tuple[str, int] | None = None
    aggregator: tuple[str, int] | None = None
    data_ip: str = ""
    port: int = 0
    job_name: str = ""
    placement: str = "auto"
    job_id: int = 1
    slot_base: int = 0
    slot_count: int = DEFAULT_SLOT_COUNT
    # None: what the job was given (window), the group's timeout (timeout), the session's
    # defaults (rto, rto_max: hosts/session_config.py)
    window: int | None = None
    timeout: float | None = None
    rto: float | None = None
    rto_max: float | None = None
    dead_after: float = 8.0
    lanes: int = DEFAULT_LANES
    classes: int = 1
    precision: float | None = None
    scatter: str = "allreduce"  # P4HUB_SCATTER: where reduce-scatters run (SCATTER_MODES)
    job_token: str | None = field(default=None, repr=False)  # a secret: never printed

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BackendConfig:
        """Read and check the variables; a bad value raises BackendError naming it."""
        env = os.environ if env is None else env
        config = cls(
            controller=_hostport(env, "P4HUB_CONTROLLER"),
            aggregator=_hostport(env, "P4HUB_AGGREGATOR"),
            data_ip=env.get("P4HUB_DATA_IP", "").strip(),
            port=_number(env, "P4HUB_PORT", int, 0, 0, 65535),
            job_name=env.get("P4HUB_JOB_NAME", "").strip(),
            placement=env.get("P4HUB_PLACEMENT", "auto").strip() or "auto",
            job_id=_number(env, "P4HUB_JOB_ID", int, 1, 0, 0xFFFF),
            slot_base=_number(env, "P4HUB_SLOT_BASE", int, 0, 0, 2**32 - 1),
            slot_count=_number(env, "P4HUB_SLOT_COUNT", int, DEFAULT_SLOT_COUNT, 1, 2**20),
            window=_optional(env, "P4HUB_WINDOW", int, 1, 2**20),
            timeout=_optional(env, "P4HUB_TIMEOUT", float, 0.1, 1e6),
            rto=_optional(env, "P4HUB_RTO", float, 1e-4, 60.0),
            rto_max=_optional(env, "P4HUB_RTO_MAX", float, 1e-4, 600.0),
            dead_after=_number(env, "P4HUB_DEAD_AFTER", float, 8.0, 2.0, 1e6),
            lanes=_number(env, "P4HUB_LANES", int, DEFAULT_LANES, LANE_COUNTS[0], LANE_COUNTS[-1]),
            classes=_number(env, "P4HUB_CLASSES", int, 1, 1, 8),
            precision=_optional(env, "P4HUB_PRECISION", float, 1e-30, 1.0),
            scatter=env.get("P4HUB_SCATTER", "allreduce").strip() or "allreduce",
            job_token=_token(env),
        )
        if config.precision is not None and config.precision >= 1.0:
            raise BackendError(f"P4HUB_PRECISION={config.precision}: expected a relative "
                               "error bound below 1")
        if config.lanes not in LANE_COUNTS:
            raise BackendError(f"P4HUB_LANES={config.lanes}: expected {' or '.join(map(str, LANE_COUNTS))}")
        if config.scatter not in SCATTER_MODES:
            raise BackendError(f"P4HUB_SCATTER={config.scatter!r}: expected one of "
                               f"{', '.join(SCATTER_MODES)}")
        if config.placement not in PLACEMENTS:
            raise BackendError(f"P4HUB_PLACEMENT={config.placement!r}: expected one of "
                               f"{', '.join(PLACEMENTS)}")
        if config.controller is None and config.aggregator is None:
            raise BackendError(
                "p4hub needs P4HUB_CONTROLLER=host:port (the controller's job API) or "
                "P4HUB_AGGREGATOR=host:port (a PBox or switch with the job configured)")
        return config


def _token(env: Mapping[str, str]) -> str | None:
    """P4HUB_JOB_TOKEN, else the first line of P4HUB_JOB_TOKEN_FILE (never echoed)."""
    token = env.get("P4HUB_JOB_TOKEN", "").strip()
    path = env.get("P4HUB_JOB_TOKEN_FILE", "").strip()
    if not token and path:
        try:
            token = Path(path).read_text().strip()
        except OSError as exc:
            raise BackendError(f"P4HUB_JOB_TOKEN_FILE={path!r}: {exc.strerror}") from None
    return token or None


def _hostport(env: Mapping[str, str], name: str) -> tuple[str, int] | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BackendError(f"{name}={text!r}: expected host:port")
    return host.strip("[]"), int(port)


def _number(env: Mapping[str, str], name: str, kind: type, default: float,
            low: float, high: float):
    value = _optional(env, name, kind, low, high)
    return default if value is None else value


def _optional(env: Mapping[str, str], name: str, kind: type, low: float,
              high: float):
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise BackendError(f"{name}={text!r}: expected a {kind.__name__}") from None
    if not low <= value <= high:
        raise BackendError(f"{name}={text!r}: expected {low} to {high}")
    return value
