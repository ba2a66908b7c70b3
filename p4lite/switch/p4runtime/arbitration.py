"""Client arbitration (primary / backup election), sans-I/O.

One ``Arbitration`` per (device, role). Streams are opaque hashable keys (the class
is generic in their type, so the adapter gets its own stream objects back). Each
call returns the ``Notice``s to send; the gRPC adapter turns them into
``MasterArbitrationUpdate`` messages. Rules (P4Runtime spec "Client
Arbitration", PI pi_server.cpp):

* the connected stream with the highest election id is the primary;
* every stream that arbitrates gets an answer: OK if it is the primary,
  ALREADY_EXISTS if it is a backup, NOT_FOUND if there is no primary, always
  carrying the primary's election id (or the highest one seen);
* when the primary changes (a higher id arrives, the primary leaves or lowers
  its id), every stream is told;
* errors end the stream: an id another stream holds -> INVALID_ARGUMENT, a
  stream switching device -> FAILED_PRECONDITION, an unknown device -> NOT_FOUND.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from google.rpc import code_pb2

from p4lite.switch.p4runtime.errors import P4RuntimeError

S = TypeVar("S", bound=Hashable)  # the adapter's stream type


@dataclass(frozen=True, slots=True)
class Notice(Generic[S]):
    stream: S
    election_id: int | None  # (high << 64) | low; None when no id was ever seen
    status: int  # google.rpc code


class Arbitration(Generic[S]):
    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self._ids: dict[S, int | None] = {}  # stream -> election id (None: not given)
        self._highest_seen: int | None = None

    # -- queries --------------------------------------------------------------
    def primary(self) -> S | None:
        best: S | None = None
        best_id = -1
        for stream, eid in self._ids.items():
            if eid is not None and eid > best_id:
                best, best_id = stream, eid
        return best

    def primary_election_id(self) -> int | None:
        primary = self.primary()
        return None if primary is None else self._ids[primary]

    def allows_write(self, election_id: int | None) -> bool:
        """Whether a Write / SetForwardingPipelineConfig with this election id may proceed.

        Like PI, a request without an election id (or 0) is accepted while no
        stream is open at all, so a one-shot tool can program the switch.
        """
        if not self._ids:
            return not election_id
        primary_id = self.primary_election_id()
        return primary_id is not None and election_id == primary_id

    def is_primary(self, stream: S) -> bool:
        return stream in self._ids and self.primary() == stream

    def streams(self) -> list[S]:
        return list(self._ids)

    # -- events ---------------------------------------------------------------
    def update(self, stream: S, device_id: int, election_id: int | None,
               previous_device_id: int | None = None) -> list[Notice[S]]:
        """A MasterArbitrationUpdate arrived on ``stream``; raises P4RuntimeError to end it."""
        if previous_device_id is not None and device_id != previous_device_id:
            raise P4RuntimeError(code_pb2.FAILED_PRECONDITION,
                                 f"device id changed from {previous_device_id} to {device_id}")
        if device_id != self.device_id:
            raise P4RuntimeError(code_pb2.NOT_FOUND, f"unknown device id {device_id}")
        if election_id is not None:
            for other, eid in self._ids.items():
                if other != stream and eid == election_id:
                    raise P4RuntimeError(code_pb2.INVALID_ARGUMENT,
                                         f"election id {election_id} is already used by another client")
        before = self.primary()
        self._ids[stream] = election_id
        if election_id is not None and (self._highest_seen is None or election_id > self._highest_seen):
            self._highest_seen = election_id
        if self.primary() != before:
            return self._notify_all()
        return [self._notice(stream)]

    def close(self, stream: S) -> list[Notice[S]]:
        """``stream`` ended; returns the notices for the others if the primary changed."""
        if stream not in self._ids:
            return []
        before = self.primary()
        del self._ids[stream]
        if before == stream:
            return self._notify_all()
        return []

    def _notify_all(self) -> list[Notice[S]]:
        return [self._notice(s) for s in self._ids]

    def _notice(self, stream: S) -> Notice[S]:
        primary = self.primary()
        if primary is None:
            return Notice(stream, self._highest_seen, code_pb2.NOT_FOUND)
        status = code_pb2.OK if primary == stream else code_pb2.ALREADY_EXISTS
        return Notice(stream, self._ids[primary], status)
