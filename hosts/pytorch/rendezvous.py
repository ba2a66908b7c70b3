"""Rendezvous of a p4hub process group through the c10d store torch gives it.

Every rank of the group, in the group's own (prefixed) store:

1. agrees on a job name and, with a controller, the job's token: rank 0 picks them
   (``P4HUB_JOB_NAME`` or a fresh name, so two groups or two runs never share a job;
   ``P4HUB_JOB_TOKEN`` or a fresh ``secrets.token_urlsafe(32)``) and publishes them;
   the others read them (the store is the group's own: whoever reaches it reads the
   token, as it could join the group);
2. picks its UDP address (``P4HUB_DATA_IP``/``P4HUB_PORT`` or what the kernel would
   use toward the controller or aggregator, and a free port);
3. joins the job with the controller's JobService under that address (the switch
   admits contributions only from the addresses joined), presenting the token (the
   first join creates the job with it), or, without a controller, takes the job id and
   slots from the configuration;
4. publishes ``{address, job}`` under ``member/<rank>`` and reads every other rank's,
   then checks that all ranks got the same job: a rank that joined a stale job of the
   same name, or was pointed at another aggregator, fails here and is named.

The controller client is kept for heartbeats and the final LeaveJob (``Lease``); it
presents the job's token, and TLS as the environment says (``ClientAuth.from_env``).
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING

from p4hub.hosts.errors import BackendError
from p4hub.hosts.pytorch.config import BackendConfig
from p4hub.hosts.pytorch.liveness import Store
from p4hub.hosts.session_config import SessionConfig, SessionSettings, with_settings
from p4hub.hosts.wire import DEFAULT_LANES

if TYPE_CHECKING:
    from p4hub.controller.client import ClientAuth

_port_lock = threading.Lock()
_groups_in_process = 0  # how many groups took a port from P4HUB_PORT so far


@dataclass(frozen=True)
class JobPlan:
    """What every rank of the group must agree on."""

    job_id: int
    aggregator: str  # "ip:port"
    slot_base: int
    slot_count: int
    window: int
    where: str  # "switch", "pbox", or "static" (configured by hand, no controller)
    lanes: int = DEFAULT_LANES  # int32 lanes per packet
    routes: tuple[dict, ...] = ()  # the map (controller jobs): hosts/routes.py from_wire
    precision: float | None = None  # the precision option's bound (None: off)
    scatter: bool = True  # the aggregators run scatter rounds (a controller says; static: yes)
    gather: bool = True  # ... and gather rounds (all-gather in the network)

    @property
    def aggregator_address(self) -> tuple[str, int]:
        host, _, port = self.aggregator.rpartition(":")
        return host, int(port)

    def session_config(self, config: BackendConfig, deadline: float) -> SessionConfig:
        """A rank's session settings for this plan: its window split between the
        ``config``'s priority classes, its lanes and precision, ``deadline``, and the
        retransmission timeouts where the environment sets them (else the defaults)."""
        settings = SessionSettings(
            window=max(1, min(self.window, self.slot_count // config.classes)),
            deadline=deadline, lanes=self.lanes, classes=config.classes, precision=self.precision,
        )  # fmt: skip
        if config.rto is not None:
            settings["rto"] = config.rto
        if config.rto_max is not None:
            settings["rto_max"] = config.rto_max
        return with_settings(None, settings)

    def agreed(self) -> tuple:
        """What must be equal on every rank: the job and its map's slot ranges, not the
        aggregator addresses, which differ by rack for a job over racks (each rank sends
        to its own rack's leaf: docs/DESIGN.md §3.1)."""
        ranges = tuple((r.get("slot_base"), r.get("count"), r.get("fallback"))
                       for r in self.routes)
        return (self.job_id, self.slot_base, self.slot_count, self.window, self.where,
                self.lanes, ranges, self.precision)


@dataclass(frozen=True)
class Membership:
    name: str
    plan: JobPlan
    rank: int
    world_size: int
    bind: tuple[str, int]
    addresses: tuple[str, ...]  # every rank's "ip:port", by rank

    def who(self, rank: int) -> str:
        return f"rank {rank} ({self.addresses[rank]})"


class Lease:
    """This rank's place in a controller job: heartbeats keep it, ``leave`` ends it."""

    def __init__(self, address: str, job_id: int, rank: int, timeout: float,
                 epoch: int = 0, token: str | None = None) -> None:
        from p4hub.controller.client import JobClient  # grpc: only when a controller is used

        self.job_id, self.rank = job_id, rank
        self.epoch = epoch  # the job's epoch at the join (not part of the agreed plan)
        self._client = JobClient(address, timeout=timeout, auth=agent_auth(token))

    def heartbeat(self, counters: dict | None = None) -> dict:
        """Where the job is now (epoch, routes, ...); grpc.RpcError NOT_FOUND once
        the controller ended it (its details say why). ``counters``: the agent's
        ``progress``, for the controller's service rates."""
        return self._client.call("Heartbeat", deadline=2.0, job_id=self.job_id, rank=self.rank,
                                 **(counters or {}))

    def leave(self) -> None:
        try:
            self._client.call("LeaveJob", deadline=5.0, job_id=self.job_id, rank=self.rank)
        finally:
            self._client.close()


def rendezvous(store: Store, rank: int, world_size: int, config: BackendConfig,
               timeout: timedelta) -> tuple[Membership, Lease | None]:
    """Join the job and agree on it with every rank; raises BackendError naming the
    rank that is missing or disagrees."""
    store.set_timeout(timeout)
    name, token = _agree_on_name(store, rank, config)
    bind = _local_address(config)
    lease = None
    if config.controller is not None:
        plan, lease = _join(config, name, token, world_size, rank, bind, timeout)
    else:
        plan = _static_plan(config)
    address = f"{bind[0]}:{bind[1]}"
    store.set(f"member/{rank}", json.dumps({"address": address, "plan": asdict(plan)}))
    members = [_member(store, r, timeout) for r in range(world_size)]
    for r, member in enumerate(members):
        if _plan(member["plan"]).agreed() != plan.agreed():
            raise BackendError(
                f"rank {r} ({member['address']}) joined {member['plan']}, but rank {rank} "
                f"joined {asdict(plan)}: the ranks must share one job (a stale job named "
                f"{name!r}, or different P4HUB_* settings?)")
    addresses = tuple(m["address"] for m in members)
    if len(set(addresses)) != world_size:
        raise BackendError(f"two ranks declared the same UDP address: {list(addresses)}")
    # scatter rounds only if every rank was told so: in a fabric the first ranks join
    # before the job knows whether it spans racks (whose leaves have none)
    plan = replace(plan, scatter=all(_plan(m["plan"]).scatter for m in members),
                   gather=all(_plan(m["plan"]).gather for m in members))
    return Membership(name, plan, rank, world_size, bind, addresses), lease


def _agree_on_name(store: Store, rank: int, config: BackendConfig) -> tuple[str, str | None]:
    """The job's name and, with a controller, its token (set before the name, so a rank
    that read the name finds the token)."""
    if rank == 0:
        if config.controller is not None:
            store.set("job_token", config.job_token or secrets.token_urlsafe(32))
        store.set("job_name", config.job_name or f"torch-{secrets.token_hex(4)}")
    try:
        name = store.get("job_name").decode()
        token = store.get("job_token").decode() if config.controller is not None else None
    except Exception as exc:  # noqa: BLE001 - the store's errors have no common type
        raise BackendError(f"rank {rank}: no job name from rank 0 through the store: "
                           f"{exc}") from None
    return name, token


def agent_auth(token: str | None) -> ClientAuth:
    """What an agent presents: its job's token and the environment's TLS settings,
    never an administrator's credential."""
    from p4hub.controller.client import ClientAuth

    try:
        return ClientAuth.from_env(admin=False).with_job_token(token)
    except OSError as exc:
        raise BackendError(f"the controller's credentials: {exc}") from None


def _local_address(config: BackendConfig) -> tuple[str, int]:
    target = config.controller or config.aggregator
    assert target is not None
    ip = config.data_ip or _route_source(target[0])
    port = _next_configured_port(config.port) or _free_udp_port(ip)
    return ip, port


def _route_source(host: str) -> str:
    """The address the kernel picks toward ``host`` (a connected UDP socket sends nothing)."""
    return _udp_probe(lambda probe: probe.connect((host, 9)),
                      f"no route to {host}", "set P4HUB_DATA_IP")[0]


def _next_configured_port(base: int) -> int:
    global _groups_in_process
    if not base:
        return 0
    with _port_lock:
        port, _groups_in_process = base + _groups_in_process, _groups_in_process + 1
    return port


def _free_udp_port(ip: str) -> int:
    return _udp_probe(lambda probe: probe.bind((ip, 0)),
                      f"cannot bind a UDP socket on {ip}", "check P4HUB_DATA_IP")[1]


def _udp_probe(use: Callable[[socket.socket], object], failure: str,
               advice: str) -> tuple[str, int]:
    """The local address of a UDP socket after ``use``; raises BackendError on failure."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            use(probe)
            return probe.getsockname()
    except OSError as exc:
        raise BackendError(f"{failure}: {exc}; {advice}") from None


def _join(config: BackendConfig, name: str, token: str | None, world_size: int, rank: int,
          bind: tuple[str, int], timeout: timedelta) -> tuple[JobPlan, Lease]:
    import grpc

    from p4hub.controller.client import JobClient, explain

    assert config.controller is not None
    where = f"{config.controller[0]}:{config.controller[1]}"
    client = JobClient(where, timeout=min(timeout.total_seconds(), 60.0), wait_for_ready=True,
                       auth=agent_auth(token))
    try:
        reply = client.join(name, world_size, rank, f"{bind[0]}:{bind[1]}", config.placement,
                            config.lanes, config.precision)
    except grpc.RpcError as exc:
        raise BackendError(f"rank {rank} could not join job {name!r}: "
                           f"{explain(exc, where)}") from None
    finally:
        client.close()
    plan = JobPlan(reply["job_id"], reply["aggregator"], reply["slot_base"],
                   reply["slot_count"], config.window or reply["window"], reply["where"],
                   reply["lanes"], tuple(reply.get("routes", ())), reply.get("precision"),
                   bool(reply.get("scatter", False)), bool(reply.get("gather", False)))
    return plan, Lease(where, plan.job_id, rank, timeout=10.0, epoch=reply.get("epoch", 0),
                       token=token)


def _plan(fields: dict) -> JobPlan:
    """A peer's plan as it published it (JSON turned the routes into a list)."""
    return JobPlan(**{**fields, "routes": tuple(fields.get("routes", ()))})


def _static_plan(config: BackendConfig) -> JobPlan:
    assert config.aggregator is not None
    host, port = config.aggregator
    return JobPlan(config.job_id, f"{host}:{port}", config.slot_base, config.slot_count,
                   config.window or config.slot_count, "static", config.lanes,
                   precision=config.precision)


def _member(store: Store, rank: int, timeout: timedelta) -> dict:
    try:
        return json.loads(store.get(f"member/{rank}"))
    except Exception as exc:  # noqa: BLE001 - the store's errors have no common type
        raise BackendError(f"rank {rank} did not join within {timeout.total_seconds():.0f} s "
                           f"(no member record in the store: {exc})") from None
