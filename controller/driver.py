"""The controller's I/O adapter: the job registry's updates onto real switches.

The only place where the controller core meets P4Runtime. ``Controller.start``
connects to every switch as primary; a switch without our pipeline (told by
the pipeline cookie, a digest of P4Info and JSON) gets it pushed plus the
rack's static entries, a switch that already runs it has its
table entries read back and the registry rebuilt from them (so a restarted
controller picks running jobs up). Afterwards every registry event is applied
under one lock: switch writes go out as one Write per switch, PBox writes go to
the ``pbox_sink`` callable (the PBox's control API is not part of this module).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from p4hub.controller.core import program as p
from p4hub.controller.core import rack, resync
from p4hub.controller.core.entries import EntryCodec
from p4hub.controller.core.errors import SetupError, UnavailableError
from p4hub.controller.core.job import Job, JoinReply
from p4hub.controller.core.job_entries import clear_new_jobs_counters
from p4hub.controller.core.job_writes import part_write
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.p4info_index import EntryError, P4InfoIndex
from p4hub.controller.core.rebuild import rebuild_from_entries, recover_unheard
from p4hub.controller.core.topology import SwitchConf, TlsConf, Topology
from p4hub.controller.core.updates import (
    DELETE,
    MODIFY,
    Entry,
    GroupWrite,
    PBoxJobWrite,
    Update,
)
from p4hub.controller.p4rt_client import P4RuntimeClient, P4RuntimeError
from p4hub.controller.pbox_control import PBoxControlError

log = logging.getLogger("p4hub.controller")

# returns True when a MODIFY had to (re)create the job: the PBox had lost it
PBoxSink = Callable[[PBoxJobWrite], bool | None]
ClientFactory = Callable[[SwitchConf], P4RuntimeClient]


class ControllerError(UnavailableError):
    """A switch or PBox refused a write or could not be reached; the message names it."""


@dataclass(frozen=True)
class PipelineConfig:
    p4info: p4info_pb2.P4Info
    bmv2_json: bytes

    @property
    def cookie(self) -> int:
        """A 64-bit digest of the program, stored on the switch with it: a restarted
        controller keeps a switch's state only if the switch runs this very program."""
        digest = hashlib.sha256(self.p4info.SerializeToString(deterministic=True))
        digest.update(self.bmv2_json)
        return int.from_bytes(digest.digest()[:8], "big")

    @classmethod
    def from_files(cls, bmv2_json: str | Path, p4info_txt: str | Path) -> PipelineConfig:
        """Read the compiler's outputs (p4lite-c or p4c-bm2-ss, text-format P4Info);
        raises SetupError when a file cannot be read or parsed."""
        try:
            info = text_format.Parse(Path(p4info_txt).read_text(), p4info_pb2.P4Info())
            return cls(info, Path(bmv2_json).read_bytes())
        except (OSError, UnicodeDecodeError, text_format.ParseError) as exc:
            raise SetupError(f"cannot read the pipeline: {exc}") from None


# The controller's election id. Operators' p4runtime-shell sessions with a lower one
# (e.g. (0, 1)) are backups that can read; a higher one would demote the controller.
ELECTION_ID = (0, 100)


def default_client(conf: SwitchConf, tls: TlsConf | None = None) -> P4RuntimeClient:
    return P4RuntimeClient(conf.grpc_addr, conf.device_id, election_id=ELECTION_ID, tls=tls)


def topology_clients(topo: Topology) -> ClientFactory:
    """The topology's switches reached with its TLS settings (plaintext without them)."""
    return lambda conf: default_client(conf, topo.tls)


class Controller:
    def __init__(
        self, topo: Topology, pipeline: PipelineConfig, *, pbox_sink: PBoxSink | None = None,
        client_factory: ClientFactory | None = None, epoch_seed: int = 1,
    ) -> None:
        self.topo = topo
        self.pipeline = pipeline
        self.codec = EntryCodec(P4InfoIndex(pipeline.p4info))
        self.pbox_sink = pbox_sink or (lambda write: None)
        self.client_factory = client_factory or topology_clients(topo)
        self.epoch_seed = epoch_seed
        self.clients: dict[str, P4RuntimeClient] = {}
        self.registry = JobRegistry(topo, epoch_seed)
        self.lock = threading.RLock()

    # -- lifecycle -----------------------------------------------------------------

    def start(self, now: float) -> dict[str, str]:
        """Connect every switch; returns switch -> "configured" | "rebuilt"."""
        with self.lock:
            existing: dict[str, list[Entry]] = {}
            fresh: list[str] = []
            for name, conf in sorted(self.topo.switches.items()):
                client = self._connect(conf)
                self.clients[name] = client
                if self._runs_our_pipeline(name, client):
                    existing[name] = self.read_entries(name)
                else:
                    self._call(name, client.set_pipeline, self.pipeline.p4info,
                               self.pipeline.bmv2_json, self.pipeline.cookie)
                    fresh.append(name)
            self.registry, repairs = rebuild_from_entries(self.topo, existing, now, self.epoch_seed,
                                                          self._pbox_jobs())
            for name in fresh:
                repairs += rack.rack_writes(self.topo, name)
            self.apply(repairs)
            return {**dict.fromkeys(existing, "rebuilt"), **dict.fromkeys(fresh, "configured")}

    def _pbox_jobs(self) -> dict[str, list[dict]] | None:
        """Each reachable PBox's jobs (for rebuilding jobs' PBox ranges); None from a
        sink that cannot list them."""
        lister = getattr(self.pbox_sink, "jobs", None)
        if lister is None:
            return None
        out = {}
        for name in sorted(self.topo.pboxes):
            try:
                out[name] = lister(name)
            except PBoxControlError as exc:
                log.warning("PBox %s: cannot list its jobs to rebuild from: %s", name, exc)
        return out

    def close(self) -> None:
        with self.lock:
            for client in self.clients.values():
                client.close()
            self.clients.clear()

    def _connect(self, conf: SwitchConf) -> P4RuntimeClient:
        client = self.client_factory(conf)
        try:
            client.connect()
        except P4RuntimeError as exc:
            raise ControllerError(f"switch {conf.name} at {conf.grpc_addr}: {exc}") from None
        return client

    def _runs_our_pipeline(self, name: str, client: P4RuntimeClient) -> bool:
        installed = self._call(name, client.get_pipeline)
        return installed is not None and installed[1] == self.pipeline.cookie

    def read_entries(self, name: str) -> list[Entry]:
        raw = self._call(name, self.clients[name].read_table_entries)
        try:
            return [self.codec.entry_from_pb(e) for e in raw if not e.is_default_action]
        except EntryError as exc:
            raise ControllerError(f"switch {name}: cannot decode its entries: {exc}") from None

    # -- applying updates ----------------------------------------------------------

    def apply(self, updates: list[Update]) -> None:
        """Send updates in order: consecutive writes to one switch share one Write."""
        with self.lock:
            batch: list[Update] = []
            for update in updates:
                if isinstance(update, PBoxJobWrite):
                    self._flush(batch)
                    batch = []
                    self._to_pbox(update)
                elif batch and batch[0].switch != update.switch:  # type: ignore[union-attr]
                    self._flush(batch)
                    batch = [update]
                else:
                    batch.append(update)
            self._flush(batch)

    def _to_pbox(self, update: PBoxJobWrite) -> bool:
        """Only the PBox control layer's error is a PBox failure; anything else the sink
        raises is a bug and goes up as it is (the API answers it as INTERNAL). True when a
        MODIFY had to recreate the job."""
        try:
            return bool(self.pbox_sink(update))
        except PBoxControlError as exc:
            raise ControllerError(f"PBox {update.pbox}: {exc}") from None

    def _flush(self, batch: list[Update]) -> None:
        if not batch:
            return
        name = batch[0].switch  # type: ignore[union-attr]
        try:
            messages = self.codec.updates(clear_new_jobs_counters(batch))
        except EntryError as exc:
            raise ControllerError(f"switch {name}: {exc}") from None
        self._call(name, self.clients[name].write, messages)

    @staticmethod
    def _call(name: str, method, *args):
        try:
            return method(*args)
        except P4RuntimeError as exc:
            raise ControllerError(f"switch {name}: {exc}") from None

    def check_switches(self) -> dict[str, str]:
        """Reattach every switch whose stream died (it restarted, or someone took
        primary): reconnect, push the pipeline if it no longer runs ours, and write
        everything the registry says it holds. Returns switch -> what happened, for
        the switches acted on (``down: ...`` when it is still unreachable)."""
        with self.lock:
            report = {}
            for name, conf in sorted(self.topo.switches.items()):
                client = self.clients.get(name)
                if client is not None and client.alive:
                    continue
                try:
                    report[name] = self._reattach(name, conf)
                    self.registry.unreachable.discard(name)
                except ControllerError as exc:
                    report[name] = f"down: {exc}"
                    self.registry.unreachable.add(name)
            return report

    def check_pboxes(self, now: float | None = None) -> list[str]:
        """Re-assert every PBox job (MODIFY). A PBox that restarted gets its jobs back,
        fresh, under a new epoch (their agents resynchronise); a job whose PBox cannot
        be reached moves to its rack's switch, or ends when the switch has no room.
        Returns what happened, in words."""
        report = []
        with self.lock:
            for job_id in sorted(self.registry.jobs):
                job = self.registry.jobs.get(job_id)
                if job is None:  # ended meanwhile
                    continue
                writes: list[Update] = [part_write(job, part, MODIFY) for part in job.parts]
                writes += self.registry.rack_pbox_writes(job, MODIFY)  # a tree's PBoxes
                for write in writes:
                    assert isinstance(write, PBoxJobWrite)
                    try:
                        recreated = self._to_pbox(write)
                    except ControllerError as exc:
                        report.append(self._pbox_lost(job_id, write.pbox, now, str(exc)))
                        break  # the job's parts changed
                    if recreated:
                        report.append(self._pbox_recreated(job, write.pbox, now))
                        if job.tree is not None:
                            break  # the tree's other PBoxes have the new epoch already
        return report

    def _pbox_recreated(self, job: Job, pbox: str, now: float | None) -> str:
        """``pbox`` had lost ``job`` and has it again, empty: a new epoch."""
        if job.tree is not None:
            self._event(lambda reg: (None, reg.tree_pbox_restarted(job, pbox, now)))
        else:
            self.registry.renew_epoch(job, now, f"PBox {pbox} had lost the job")
        return f"job {job.job_id}: PBox {pbox} had lost it: re-added, epoch {job.epoch}"

    def _pbox_lost(self, job_id: int, pbox: str, now: float | None, problem: str) -> str:
        reason = f"PBox {pbox} is unreachable ({problem})"
        try:
            self._event(lambda reg: (None, reg.pbox_lost(job_id, pbox, now, reason)))
        except ControllerError as exc:
            return f"job {job_id}: {reason}; moving its share failed: {exc}"
        job = self.registry.jobs.get(job_id)
        if job is None:
            return f"job {job_id} ended: {self.registry.ended[job_id].reason}"
        return f"job {job_id}: {job.moves[-1].reason}, epoch {job.epoch}"

    def rebalance(self, now: float) -> list[str]:
        """Re-split jobs' PBox shares by their measured rates (unless the topology says
        ``rebalance: false``); returns what moved."""
        if not self.topo.controller.rebalance:
            return []
        return self._moves(lambda reg: reg.rebalance(now))

    def recover_unheard(self, job_id: int,
                        routes: list[tuple[str, int, int, bool]] | None) -> None:
        """A heartbeat's PBox routes for a job rebuilt while some of its PBoxes did not
        answer (controller/core/rebuild.py ``recover_unheard``); the recovered ranges are
        made sure of on PBoxes that answer now (one still unreachable is lost by
        ``check_pboxes``, with its range known)."""
        with self.lock:
            job = self.registry.jobs.get(job_id)
            if job is None or not job.unheard:
                return
            unheard = set(job.unheard)
            if not recover_unheard(self.registry, job, routes):
                return
            log.info("job %d: PBox ranges recovered from an agent's map: %s", job_id,
                     ", ".join(f"{pt.pbox} {pt.slots.base}+{pt.slots.count}" for pt in job.parts))
            for part in job.parts:
                if part.pbox in unheard:
                    try:
                        self._to_pbox(part_write(job, part, MODIFY))
                    except ControllerError as exc:
                        log.warning("job %d: %s", job_id, exc)

    def _reattach(self, name: str, conf: SwitchConf) -> str:
        old = self.clients.pop(name, None)
        if old is not None:
            old.close()
        client = self._connect(conf)
        self.clients[name] = client
        state = "reconnected"
        others: list[Update] = []
        if not self._runs_our_pipeline(name, client):
            self._call(name, client.set_pipeline, self.pipeline.p4info, self.pipeline.bmv2_json,
                       self.pipeline.cookie)
            state = "reconfigured"
            # a restarted switch lost its registers: the rounds in flight of its jobs
            others = self.registry.switch_restarted(name, None)
        self._resync_switch(name, set(self.registry.expected_groups(name)))
        if others:  # the new epoch on the other switches of its jobs' trees
            self.apply(others)
        return state

    # -- job events (the job API server calls these) --------------------------------

    def join(self, name: str, world_size: int, rank: int, address: tuple[str, int],
             now: float, placement: str = "auto", lanes: int = p.DEFAULT_LANES,
             precision: float | None = None) -> JoinReply:
        return self._event(
            lambda reg: reg.join(name, world_size, rank, address, now, placement, lanes, precision)
        )

    def leave(self, job_id: int, rank: int, now: float | None = None) -> None:
        self._event(lambda reg: (None, reg.leave(job_id, rank, now)))

    def kill(self, job_id: int, now: float | None = None) -> None:
        self._event(lambda reg: (None, reg.kill(job_id, now)))

    def expire(self, now: float) -> None:
        self._event(lambda reg: (None, reg.expire(now)))

    def promote(self, now: float | None = None) -> list[str]:
        """Move PBox jobs that were placed there for want of switch slots onto the
        switch once it has room (their agents resynchronise); returns what moved."""
        return self._moves(lambda reg: reg.promote(now))

    def _moves(self, event: Callable[[JobRegistry], list[Update]]) -> list[str]:
        """Run a registry event that moves jobs with PBox ranges between aggregators;
        returns each move it made (the jobs whose epoch it changed), in words."""
        with self.lock:
            before = {job.job_id: job.epoch for job in self.registry.jobs.values() if job.parts}
            if not before:
                return []
            self._event(lambda reg: (None, event(reg)))
            return [f"job {job_id}: {job.moves[-1].reason}, epoch {job.epoch}"
                    for job_id, job in sorted(self.registry.jobs.items())
                    if before.get(job_id, job.epoch) != job.epoch]

    def _event(self, event):
        """Run a registry event and apply its updates, all or nothing: if the event is
        refused or a write fails, the registry's undo log puts it back where it was
        (the same object: barrier waiters keep looking at the live registry) and the
        switches and PBoxes touched are brought back in line with it; the error is
        raised. Nothing is copied: an event costs what it changes."""
        with self.lock:
            registry = self.registry
            registry.begin()
            try:
                result, updates = event(registry)
            except BaseException:
                registry.rollback()
                raise
            try:
                self.apply(updates)
            except BaseException:  # a write failed (ControllerError) or a bug: undo both
                registry.rollback()
                self._resync(updates)
                raise
            registry.commit()
            return result

    def _resync(self, failed: list[Update]) -> None:
        for name in sorted({u.switch for u in failed if not isinstance(u, PBoxJobWrite)}):
            touched = {u.group for u in failed if isinstance(u, GroupWrite) and u.switch == name}
            try:
                self._resync_switch(name, touched)
            except ControllerError as exc:
                log.error("switch %s may differ from the controller's view: %s", name, exc)
        for write in failed:
            if not isinstance(write, PBoxJobWrite):
                continue
            job = self.registry.jobs.get(write.job_id)
            part = next((pt for pt in job.parts if pt.pbox == write.pbox), None) if job else None
            if job is not None and part is not None:
                fix = part_write(job, part, MODIFY)
            else:
                fix = PBoxJobWrite(write.pbox, DELETE, write.job_id)
            try:
                self._to_pbox(fix)
            except ControllerError as exc:
                log.error("PBox %s may differ from the controller's view: %s", write.pbox, exc)

    def _resync_switch(self, name: str, groups_to_write: set[int]) -> None:
        """Write the difference between the switch's entries and the registry's, and
        rewrite the given multicast groups (and the flood group) as the registry has
        them: groups cannot be read back on every target."""
        self.apply(resync.table_writes(name, self.read_entries(name),
                                       self.registry.expected_entries(name)))
        groups = self.registry.expected_groups(name)
        for attempts in resync.group_writes(name, groups, groups_to_write):
            for attempt in attempts:
                try:
                    self._flush([attempt])
                    break
                except ControllerError:
                    continue  # not there (DELETE / MODIFY) or already there (INSERT)

    # -- observation ---------------------------------------------------------------

    def switch_view(self, name: str) -> dict:
        """Tables (read back), multicast groups (as the controller wrote them) and
        per-port counters of one switch, as plain JSON-able data."""
        with self.lock:
            entries = self.read_entries(name)
            groups = {g: list(reps) for g, reps in self.registry.expected_groups(name).items()}
            ports = {}
            attached = [(node.port, node.name) for node in self.topo.endpoints_of(name)]
            attached += [(port, peer) for port, peer, _ in self.topo.neighbours(name)]
            for port, node in attached:
                rx = self.counter(name, p.PORT_RX, port)
                tx = self.counter(name, p.PORT_TX, port)
                ports[port] = {"node": node, "rx": rx, "tx": tx}
            return {
                "name": name,
                "entries": [{"table": e.table, "match": {f.name: f.value for f in e.match},
                             "action": e.action, "params": dict(e.params),
                             **self._bitwidths(e)} for e in entries],
                "groups": {str(g): [{"port": port, "rid": rid} for port, rid in reps]
                           for g, reps in sorted(groups.items())},
                "ports": {str(port): info for port, info in sorted(ports.items())},
            }

    def _bitwidths(self, entry: Entry) -> dict[str, dict[str, int]]:
        """Bit widths of ``entry``'s match fields and parameters (P4Info), so that the
        CLI can print addresses as addresses."""
        table = self.codec.index.table(entry.table)
        params = {}
        if entry.action:
            action = self.codec.index.action(entry.action)
            params = {name: action.param(name).bitwidth for name, _ in entry.params}
        return {"match_bits": {f.name: table.field(f.name).bitwidth for f in entry.match},
                "param_bits": params}

    def counter(self, switch: str, name: str, index: int) -> dict[str, int]:
        counter_id = self.codec.index.counter(name).id
        cells = self._call(switch, self.clients[switch].read_counters, counter_id, index)
        data = cells[0].data if cells else None
        return {"packets": data.packet_count if data else 0, "bytes": data.byte_count if data else 0}

    def tree_counters(self, job_id: int) -> list[dict]:
        """A job over racks, level by level: the root spine (its contributions are the
        leaves' partials; under a root PBox, the PBox's leaf, which forwards to it: the
        PBox's own counters are in its stats) and each leaf with its traffic to the root;
        [] for a one-rack job."""
        with self.lock:
            job = self.registry.job(job_id)
            if job.tree is None:
                return []
            level = f"root: pbox {job.tree.root_pbox}" if job.tree.root_pbox else "root"
            root = {"switch": job.tree.root, "level": level, "children": len(job.tree.leaves),
                    "counters": self._packets(job.tree.root, p.JOB_STATS, job_id)}
            leaves = [{"switch": leaf.switch, "child": leaf.child,
                       # a rack on its PBox: the leaf only forwards (the PBox's own counters
                       # are in its stats)
                       "level": f"pbox {leaf.pbox}" if leaf.pbox else "leaf",
                       "workers": leaf.ranks,
                       "counters": {**self._packets(leaf.switch, p.JOB_STATS, job_id),
                                    **self._packets(leaf.switch, p.TREE_STATS, job_id)}}
                      for leaf in job.tree.leaves]
            return [root, *leaves]

    def _packets(self, switch: str, counter: str, job_id: int) -> dict[str, int]:
        return {kind: cell["packets"]
                for kind, cell in self._job_cells(switch, counter, job_id).items()}

    def _job_cells(self, switch: str, counter: str, job_id: int) -> dict[str, dict[str, int]]:
        """A per-job counter's cells of ``job_id`` on ``switch`` (job_stats or tree_stats),
        by kind."""
        kinds, names = {p.JOB_STATS: (p.JOB_STAT_KINDS, p.JOB_STAT_NAMES),
                        p.TREE_STATS: (p.TREE_STAT_KINDS, p.TREE_STAT_NAMES)}[counter]
        return {kind: self.counter(switch, counter, job_id * kinds + i)
                for i, kind in enumerate(names)}

    def job_counters(self, job_id: int) -> dict[str, tuple[int, int]]:
        """kind -> (packets, bytes) from the switch's job_stats counter."""
        with self.lock:
            job = self.registry.job(job_id)
            return {kind: (cell["packets"], cell["bytes"])
                    for kind, cell in self._job_cells(job.switch, p.JOB_STATS, job_id).items()}
