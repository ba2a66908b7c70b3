"""The job API: gRPC service ``p4hub.JobService`` with JSON messages.

Every method is unary; requests and responses are UTF-8 JSON objects (no
generated stubs needed on either side; any gRPC client can call
``/p4hub.JobService/<Method>`` with a JSON body). Methods:

  JoinJob    {name, world_size, rank, address: "ip:port", placement?: "auto"|"pbox",
              lanes?: 64|256 (int32 lanes per packet, default 64; set by the first join),
              precision?: relative error bound in (0, 1) (the precision option: blocks that
              int32 quantization cannot carry within it go as float32 to a PBox; with
              switch slots the job holds a float route, listed last in ``routes``; set by
              the first join, later ones must agree)}
             -> {job_id, world_size, rank,
             aggregator: "ip:port", slot_base, slot_count, lanes, window,
             where, epoch, routes, precision (null: off),
             job_token (only from the join that created the job without bringing one)}
  LeaveJob   {job_id, rank} -> {}
  Heartbeat  {job_id, rank, sent?, retransmitted?, results?, epoch?, routes?, map?}
             -> {epoch, where, slot_base, slot_count, routes}: the counters and per-route
             service the agent measured (controller/core/traffic.py), and its map (``map``:
             hosts/routes.py ``to_wire``), from which a controller rebuilt while one of
             the job's PBoxes was unreachable learns that PBox's range
  Barrier    {job_id, rank, timeout?} -> {generation}   (blocks until every rank arrived)
  ListJobs   {} -> {jobs: [job summary], ended: [the last 10 ends, latest first]}
  ShowJob    {job_id} -> job summary + {state: "running", workers, counters}, or for a job
             that ended (recently): {state: "ended", cause, reason, ended_s_ago, rank?,
             last_heard_s_ago?}
  KillJob    {job_id} -> {}
  Status     {} -> {switches, jobs, slots}
  ShowSwitch {name} -> {entries, groups, ports}
  Doctor     {job_id?, settle?: s (default 1)} -> {reports: [{job_id, healthy, findings: [{severity, code, message,
             ranks}], open_cells}]}: what is wrong with one job (or every running job),
             from the switch's registers and counters, the PBox and the members'
             heartbeats (controller/core/doctor.py); the slot state is read twice, settle s
             apart, to tell stuck rounds from rounds in flight

Credentials (controller/core/credentials.py): the join that creates a job gets its
token (``job_token`` in the reply, unless the join brought one in the metadata key
``p4hub-job-token``); every other call about one job (JoinJob of an existing job,
LeaveJob, Heartbeat, Barrier, ShowJob, Doctor with a job_id) must bring it there;
ListJobs, Status, KillJob, ShowSwitch and Doctor on every job need the
administrator's (metadata ``p4hub-admin-token``, or a client certificate
``controller/auth.py`` names an administrator). Checked before anything is looked up,
so a refusal says nothing about whether the job exists.

Errors: the gRPC code follows from the error's type (``GRPC_CODES``, never its
message): a refused request (RefusedError) is INVALID_ARGUMENT, an unknown job or
switch (NotFoundError) NOT_FOUND, a switch or PBox failure (UnavailableError)
UNAVAILABLE, a barrier timeout DEADLINE_EXCEEDED, a missing credential
UNAUTHENTICATED, a wrong one PERMISSION_DENIED; anything else is a bug, answered
INTERNAL and logged with its traceback once per exception type. The status
details carry the reason. ``now`` comes from ``clock`` (monotonic
seconds), the only clock in the controller.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any, Protocol

import grpc

from p4hub.controller import auth, snapshot
from p4hub.controller.client import METHODS, SERVICE, encode
from p4hub.controller.core import doctor, traffic
from p4hub.controller.core import program as p
from p4hub.controller.core.credentials import (
    Caller,
    Credentials,
    PermissionDenied,
    Unauthenticated,
    check_token,
    new_token,
)
from p4hub.controller.core.errors import (
    NotFoundError,
    P4hubControllerError,
    RefusedError,
    UnavailableError,
)
from p4hub.controller.core.job import Job, JobEnd, UnknownJobError
from p4hub.controller.core.program import DEFAULT_LANES, P4HUB_HEADER_BYTES
from p4hub.controller.core.topology import format_ipv4, format_mac
from p4hub.controller.driver import Controller

log = logging.getLogger("p4hub.controller")

MAX_BARRIER_WAIT = 3600.0
DOCTOR_SETTLE = 1.0  # s between Doctor's two reads of the slot state
MAX_DOCTOR_SETTLE = 10.0
LISTED_ENDS = 10  # recently ended jobs ListJobs shows, latest first


class ApiError(P4hubControllerError):
    """What the gRPC adapter answers: a gRPC code and the reason."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class BarrierTimeout(P4hubControllerError):
    """Not every rank arrived at the barrier in time (DEADLINE_EXCEEDED)."""


# An error's gRPC code: the first of these classes in its type's MRO, else INTERNAL.
GRPC_CODES: dict[type[BaseException], grpc.StatusCode] = {
    NotFoundError: grpc.StatusCode.NOT_FOUND,
    RefusedError: grpc.StatusCode.INVALID_ARGUMENT,
    UnavailableError: grpc.StatusCode.UNAVAILABLE,
    BarrierTimeout: grpc.StatusCode.DEADLINE_EXCEEDED,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
}


def grpc_code(exc: BaseException) -> grpc.StatusCode:
    """The gRPC code answering ``exc``, from its type alone."""
    for cls in type(exc).__mro__:
        code = GRPC_CODES.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


class InternalErrors:
    """Logs an unexpected exception with its traceback the first time its type is met,
    and only at debug level afterwards (a bug hit by every request must not flood the
    log); counts them per type."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def log(self, where: str, exc: BaseException) -> None:
        kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
        with self._lock:
            first = kind not in self.counts
            self.counts[kind] = self.counts.get(kind, 0) + 1
        if first:
            log.error("internal error in %s (logged once per exception type): %s: %s",
                      where, kind, exc, exc_info=exc)
        else:
            log.debug("internal error in %s again: %s: %s", where, kind, exc)


def _int(request: dict, key: str) -> int:
    value = request.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise RefusedError(f"{key!r} must be an integer")
    return value


def _address(text: Any) -> tuple[str, int]:
    if not isinstance(text, str) or ":" not in text:
        raise RefusedError("address must be 'ip:port'")
    host, _, port = text.rpartition(":")
    if not port.isdigit():
        raise RefusedError("address must be 'ip:port'")
    return host, int(port)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def job_summary(job: Job) -> dict:
    return {
        "job_id": job.job_id, "name": job.name, "world_size": job.world_size,
        "workers": len(job.workers), "switch": job.switch, "where": job.where,
        "pbox": job.pbox, "slot_base": job.slots.base, "slot_count": job.slots.count,
        "window": job.window, "shares": job.shares(), "precision": job.precision,
    }


def end_summary(end: JobEnd, now: float) -> dict:
    """ShowJob's answer for a job that has ended: why, when, which rank."""
    out = {
        "job_id": end.job_id, "name": end.name, "world_size": end.world_size,
        "switch": end.switch, "where": end.where, "slot_base": end.slots.base,
        "slot_count": end.slots.count, "state": "ended", "cause": end.cause, "reason": end.reason,
        "ended_s_ago": None if end.ended_at is None else round(now - end.ended_at, 3),
    }
    if end.rank is not None:
        out["rank"] = end.rank
        out["last_heard_s_ago"] = (None if end.last_seen is None
                                   else round(now - end.last_seen, 3))
    return out


# calls about one job: what the refusal calls them ("... job 3 needs ...")
JOB_CALLS = {"LeaveJob": "leaving", "Heartbeat": "a heartbeat for", "Barrier": "the barrier of",
             "ShowJob": "showing", "Doctor": "the doctor on"}
ADMIN_CALLS = {"ListJobs": "listing the jobs", "Status": "the controller's status",
               "KillJob": "killing a job", "ShowSwitch": "showing a switch",
               "Doctor": "the doctor on every job"}


class JobService:
    """The handlers; ``handle(method, body, caller)`` is what the gRPC adapter calls."""

    def __init__(self, controller: Controller, clock: Callable[[], float] = time.monotonic,
                 pboxes: snapshot.PBoxReader | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 credentials: Credentials | None = None,
                 on_tokens: Callable[[dict[int, tuple[int, str]]], None] | None = None) -> None:
        """``pboxes``: how Doctor reads PBox state (``PBoxControl``); None: not read.
        ``sleep``: how Doctor waits between its two reads (tests pass a fake).
        ``credentials``: the administrator's and the jobs' (None: a fresh administrator
        token nobody knows, so only in-process callers administer); ``on_tokens``: told
        the job token digests after each job's creation (controller/auth.py persists
        them for a restarted controller)."""
        self.ctl = controller
        self.clock = clock
        self.pboxes = pboxes
        self.sleep = sleep
        self.credentials = credentials or Credentials(new_token())
        self.on_tokens = on_tokens
        self.barriers = threading.Condition(controller.lock)
        self.internal_errors = InternalErrors()

    def handle(self, method: str, body: bytes, caller: Caller) -> dict:
        """Run one method for ``caller``; every failure comes out as an ApiError whose
        code follows from the failure's type (``grpc_code``)."""
        try:
            request = json.loads(body or b"{}")
        except ValueError as exc:
            raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"request is not JSON: {exc}") from None
        except RecursionError:
            raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, "request is nested too deeply") from None
        if not isinstance(request, dict):
            raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, "request must be a JSON object")
        handler = getattr(self, f"_{method}")
        try:
            self._authorize(method, request, caller)
            if method == "JoinJob":
                return self._JoinJob(request, caller)
            return handler(request)
        except ApiError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped by type; bugs become INTERNAL
            code = grpc_code(exc)
            if code == grpc.StatusCode.INTERNAL:
                self.internal_errors.log(method, exc)
                raise ApiError(code, f"internal error in {method}: {type(exc).__name__}: {exc} "
                               "(see the controller's log)") from None
            raise ApiError(code, str(exc)) from None

    def _authorize(self, method: str, r: dict, caller: Caller) -> None:
        """Refuse a call its caller may not make, before anything is looked up (JoinJob
        is checked against the job its name finds, in ``_JoinJob``)."""
        if method in JOB_CALLS and (method != "Doctor" or "job_id" in r):
            self.credentials.require_job(caller, _int(r, "job_id"), JOB_CALLS[method])
        elif method in ADMIN_CALLS:
            self.credentials.require_admin(caller, ADMIN_CALLS[method])

    # -- workers -------------------------------------------------------------------

    def _JoinJob(self, r: dict, caller: Caller) -> dict:  # noqa: N802
        name = r.get("name")
        if not isinstance(name, str):
            raise RefusedError("'name' must be a string")
        placement = r.get("placement", "auto")
        if not isinstance(placement, str):
            raise RefusedError("'placement' must be a string")
        lanes = _int(r, "lanes") if "lanes" in r else DEFAULT_LANES
        precision = r.get("precision")
        if precision is not None and (isinstance(precision, bool)
                                      or not isinstance(precision, int | float)):
            raise RefusedError("'precision' must be a number (a relative error bound) or null")
        world_size, rank, address = _int(r, "world_size"), _int(r, "rank"), _address(r.get("address"))
        brought = None if caller.job_token is None else check_token(caller.job_token)
        with self.ctl.lock:  # the name's job looked up and joined as one step
            existing = self.ctl.registry.job_by_name(name)
            if existing is not None:
                self.credentials.require_join(caller, name, existing.job_id)
            reply = self.ctl.join(name, world_size, rank, address, self.clock(), placement,
                                  lanes, None if precision is None else float(precision))
            created = None
            if existing is None:  # this join created the job: it gets its token
                created = brought or new_token()
                self.credentials.record(reply.job_id, p.name_tag(name), created)
                if self.on_tokens is not None:
                    self.on_tokens(self.credentials.snapshot())
        answer = {
            "job_id": reply.job_id, "world_size": reply.world_size, "rank": reply.rank,
            "aggregator": f"{reply.aggregator_ip}:{reply.aggregator_port}",
            "slot_base": reply.slot_base, "slot_count": reply.slot_count, "lanes": reply.lanes,
            "window": reply.window, "where": reply.where, "epoch": reply.epoch,
            "routes": list(reply.routes), "precision": reply.precision,
            "scatter": reply.scatter, "gather": reply.gather,
        }
        if created is not None and brought is None:  # only a token the caller cannot know
            answer["job_token"] = created
        return answer

    def _LeaveJob(self, r: dict) -> dict:  # noqa: N802
        with self.barriers:
            self.ctl.leave(_int(r, "job_id"), _int(r, "rank"), self.clock())
            self.barriers.notify_all()
        return {}

    def _Heartbeat(self, r: dict) -> dict:  # noqa: N802
        """Keeps the rank alive; answers where the job is now: an epoch other than the
        agent's tells it to resynchronise (onto ``slot_base`` if the job moved)."""
        with self.ctl.lock:
            job_id, rank = _int(r, "job_id"), _int(r, "rank")
            self.ctl.registry.heartbeat(job_id, rank, self.clock(),
                                        traffic.Counters.from_request(r),
                                        traffic.RouteService.from_request(r))
            self.ctl.recover_unheard(job_id, traffic.pbox_routes(r))  # before the map is answered
            job = self.ctl.registry.job(job_id)
            return {"epoch": job.epoch, "where": job.where, "slot_base": job.slots.base,
                    "slot_count": job.window,
                    "routes": list(self.ctl.registry.routes(job, rank))}

    def _Barrier(self, r: dict) -> dict:  # noqa: N802
        job_id, rank = _int(r, "job_id"), _int(r, "rank")
        timeout = r.get("timeout", MAX_BARRIER_WAIT)
        if not isinstance(timeout, int | float) or not 0 < timeout <= MAX_BARRIER_WAIT:
            raise RefusedError(f"'timeout' must be in (0, {MAX_BARRIER_WAIT}] seconds")
        with self.barriers:
            generation = self.ctl.registry.barrier(job_id, rank, self.clock())
            self.barriers.notify_all()
            passed = self.barriers.wait_for(lambda: self._barrier_over(job_id, generation),
                                            timeout=timeout)
            if job_id not in self.ctl.registry.jobs:
                raise UnknownJobError(f"job {job_id} ended during the barrier")
            if not passed:
                raise BarrierTimeout(f"barrier {generation} of job {job_id} not passed in "
                                     f"{timeout} s")
        return {"generation": generation}

    def _barrier_over(self, job_id: int, generation: int) -> bool:
        """Keyed by job id, looked up in the controller's registry at every wake-up
        (never a registry object held across the wait)."""
        job = self.ctl.registry.jobs.get(job_id)
        return job is None or job.barrier_generation > generation

    # -- operators -----------------------------------------------------------------

    def _ListJobs(self, r: dict) -> dict:  # noqa: N802
        with self.ctl.lock:
            now = self.clock()
            ended = list(self.ctl.registry.ended.values())[-LISTED_ENDS:]
            return {"jobs": [job_summary(j) for _, j in sorted(self.ctl.registry.jobs.items())],
                    "ended": [end_summary(e, now) for e in reversed(ended)]}

    def _ShowJob(self, r: dict) -> dict:  # noqa: N802
        job_id = _int(r, "job_id")
        with self.ctl.lock:
            now = self.clock()
            registry = self.ctl.registry
            end = registry.ended.get(job_id)
            if job_id not in registry.jobs and end is not None:
                return end_summary(end, now)
            job = registry.job(job_id)
            workers = [
                {"rank": w.rank, "address": f"{format_ipv4(w.ip)}:{w.port}", "mac": format_mac(w.mac),
                 "switch": w.switch or job.switch,
                 "switch_port": w.switch_port, "idle_s": round(now - w.last_seen, 3),
                 "results_per_s": _rounded(w.traffic.results_per_s),
                 "resend_ratio": _rounded(w.traffic.resend_ratio)}
                for _, w in sorted(job.workers.items())
            ]
            service = {k: _rounded(v) for k, v in job.service().items()}
            counters = {kind: {"packets": pk, "bytes": by}
                        for kind, (pk, by) in self.ctl.job_counters(job.job_id).items()}
            moves = [{"s_ago": None if m.at is None else round(now - m.at, 3), "epoch": m.epoch,
                      "where": m.where, "slot_base": m.slot_base, "reason": m.reason}
                     for m in job.moves]
            routes = registry.routes(job)
            packet = P4HUB_HEADER_BYTES + 4 * job.lanes  # one result packet
            aggregators = [
                {"aggregator": name, "address": route["aggregator"],
                 "slot_base": route["slot_base"], "count": route["count"],
                 "rounds_per_s": _rounded(rate),
                 "bytes_per_s": None if rate is None else _rounded(rate * packet)}
                for name, route, rate in zip(job.shares(), routes[: len(job.shares())],
                                             job.rates(), strict=True)
            ]
            floats = job.float_part  # the float route: float blocks of the switch's slots
            if floats is not None:
                aggregators.append({"aggregator": f"{floats.pbox} (float blocks)",
                                    "address": routes[-1]["aggregator"],
                                    "slot_base": floats.float_slots.base,
                                    "count": floats.floats, "rounds_per_s": None,
                                    "bytes_per_s": None, "float": True})
            return {**job_summary(job), "state": "running", "epoch": job.epoch,
                    "worker_list": workers, "counters": counters, "moves": moves,
                    "service": service, "map": aggregators,
                    "tree": self.ctl.tree_counters(job.job_id)}

    def _Doctor(self, r: dict) -> dict:  # noqa: N802
        settle = r.get("settle", DOCTOR_SETTLE)
        if not isinstance(settle, int | float) or isinstance(settle, bool) \
                or not 0 <= settle <= MAX_DOCTOR_SETTLE:
            raise RefusedError(f"'settle' must be in [0, {MAX_DOCTOR_SETTLE}] seconds")
        registry = self.ctl.registry
        with self.ctl.lock:
            ids = [_int(r, "job_id")] if "job_id" in r else sorted(registry.jobs)
        reports = []
        for job_id in ids:
            try:
                report = snapshot.doctor(self.ctl, job_id, self.clock, self.pboxes, settle,
                                         self.sleep)
            except UnknownJobError:
                with self.ctl.lock:
                    end, now = registry.ended.get(job_id), self.clock()
                if end is None:
                    raise
                ago = "" if end.ended_at is None else f" {now - end.ended_at:.1f} s ago"
                report = doctor.ended_report(job_id, f"job {job_id} ended{ago}: {end.reason}",
                                             end.rank)
            reports.append(report.as_dict())
        return {"reports": reports}

    def _KillJob(self, r: dict) -> dict:  # noqa: N802
        with self.barriers:
            self.ctl.kill(_int(r, "job_id"), self.clock())
            self.barriers.notify_all()
        return {}

    def _Status(self, r: dict) -> dict:  # noqa: N802
        with self.ctl.lock:
            registry = self.ctl.registry
            switches = {
                name: {"grpc_addr": conf.grpc_addr, "device_id": conf.device_id,
                       "connected": name in self.ctl.clients, "slots": conf.slots,
                       "free_slots": registry.switch_pools[name].free_slots(),
                       "jobs": sum(1 for j in registry.jobs.values() if j.switch == name)}
                for name, conf in sorted(self.ctl.topo.switches.items())
            }
            pboxes = {name: {"slots": pool.size, "free_slots": pool.free_slots()}
                      for name, pool in sorted(registry.pbox_pools.items())}
            return {"switches": switches, "pboxes": pboxes, "jobs": len(registry.jobs)}

    def _ShowSwitch(self, r: dict) -> dict:  # noqa: N802
        name = r.get("name")
        if not isinstance(name, str):
            raise RefusedError("'name' must be a string (a switch of the topology)")
        if name not in self.ctl.topo.switches:
            raise NotFoundError(f"no switch {name!r}")
        return self.ctl.switch_view(name)


# -- the gRPC adapter -------------------------------------------------------------------


class RequestHandler(Protocol):
    """What the gRPC adapter serves: ``JobService``, or a stand-in with the same call."""

    def handle(self, method: str, body: bytes, caller: Caller) -> dict: ...


def _unary(service: RequestHandler, method: str, admin_names: frozenset[str]):
    def call(body: bytes, context: grpc.ServicerContext) -> dict:
        try:
            who = auth.caller(context, admin_names)
        except RefusedError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            return service.handle(method, body, who)
        except ApiError as exc:
            context.abort(exc.code, str(exc))
        raise AssertionError("unreachable")  # context.abort raises

    return grpc.unary_unary_rpc_method_handler(
        call, request_deserializer=lambda raw: raw, response_serializer=encode)


def serve(service: RequestHandler, address: str, max_workers: int = 32,
          tls: grpc.ServerCredentials | None = None,
          admin_names: frozenset[str] = frozenset()) -> tuple[grpc.Server, int]:
    """Start the job API on ``address`` (port 0 picks one); returns the server and port;
    raises OSError when it cannot listen there. Barrier calls hold a thread each, hence
    the generous pool. ``tls``: the server's credentials (``auth.server_credentials``),
    None: plaintext; ``admin_names``: client certificate common names that administer
    (mutual TLS)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="p4hub-api"))
    handlers = {m: _unary(service, m, admin_names) for m in METHODS}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    try:
        port = (server.add_insecure_port(address) if tls is None
                else server.add_secure_port(address, tls))
    except RuntimeError:  # grpc's "Failed to bind to address"
        port = 0
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    return server, port


DOWN_RECHECK = 0.2  # seconds between Expirer ticks while a switch is unreachable


class Expirer:
    """Every ``interval`` seconds, in a thread: ``Controller.check_switches()`` (a
    restarted switch is reconfigured from the registry), ``check_pboxes()`` (a
    restarted PBox gets its jobs back) and ``expire(clock())``."""

    def __init__(self, service: JobService, interval: float = 1.0) -> None:
        self.service = service
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="p4hub-expirer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.next_wait()):
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - a bug must not stop liveness for good
                self.service.internal_errors.log("the expiry tick", exc)

    def next_wait(self) -> float:
        """``interval``, or less while a switch's stream is down: a restarting switch is
        configured again (and its jobs' agents told) soon after it listens, not up to a
        whole interval later."""
        ctl = self.service.ctl
        down = any(not client.alive for client in list(ctl.clients.values())) or \
            len(ctl.clients) < len(ctl.topo.switches)
        return min(self.interval, DOWN_RECHECK) if down else self.interval

    def tick(self) -> None:
        """Reattach lost switches, re-assert PBox jobs, then expire silent workers."""
        for name, state in self.service.ctl.check_switches().items():
            log.warning("switch %s: %s", name, state)
        for problem in self.service.ctl.check_pboxes(self.service.clock()):
            log.warning("%s", problem)
        try:
            for moved in self.service.ctl.promote(self.service.clock()):
                log.info("%s", moved)
            for moved in self.service.ctl.rebalance(self.service.clock()):
                log.info("%s", moved)
        except UnavailableError as exc:
            log.warning("moving jobs' aggregators failed (retried next tick): %s", exc)
        try:
            with self.service.barriers:
                self.service.ctl.expire(self.service.clock())
                self.service.barriers.notify_all()
        except UnavailableError as exc:
            log.warning("expiring workers failed (retried next tick): %s", exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
