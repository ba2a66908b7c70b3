"""Digest batching and acknowledgement, sans-I/O (time in ns is an argument).

A digest is only streamed once the controller has configured it with a
DigestEntry (as PI does). Digests are batched into lists of at most
``max_list_size`` (0: unbounded), sent when the list is full or
``max_timeout_ns`` after its first digest (0: at once). Until a list is acked
(or ``ack_timeout_ns`` passes), digests with the same data are suppressed, so a
controller sees each learned value once (PI digest_mgr.cpp does the same).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class DigestConfig:
    max_timeout_ns: int = 0
    max_list_size: int = 1
    ack_timeout_ns: int = 0


@dataclass(frozen=True, slots=True)
class ReadyList:
    digest_id: int
    list_id: int
    values: list[tuple[int, ...]]
    timestamp_ns: int


@dataclass(slots=True)
class _Pending:
    first_ns: int
    values: list[tuple[int, ...]] = field(default_factory=list)


@dataclass(slots=True)
class _Sent:
    digest_id: int
    values: list[tuple[int, ...]]
    sent_ns: int


class DigestBuffer:
    def __init__(self) -> None:
        self.configs: dict[int, DigestConfig] = {}
        self._pending: dict[int, _Pending] = {}
        self._unacked: dict[int, _Sent] = {}  # list id -> what it carried
        self._suppressed: dict[int, set[tuple[int, ...]]] = {}
        self._next_list_id = 1

    def configure(self, digest_id: int, config: DigestConfig | None) -> None:
        """Insert/modify (config) or delete (None) the DigestEntry of ``digest_id``."""
        if config is None:
            self.configs.pop(digest_id, None)
            self._pending.pop(digest_id, None)
            self._suppressed.pop(digest_id, None)
        else:
            self.configs[digest_id] = config

    def add(self, digest_id: int, values: tuple[int, ...], now_ns: int) -> list[ReadyList]:
        config = self.configs.get(digest_id)
        if config is None:
            return []
        suppressed = self._suppressed.setdefault(digest_id, set())
        if values in suppressed:
            return []
        suppressed.add(values)
        pending = self._pending.setdefault(digest_id, _Pending(now_ns))
        pending.values.append(values)
        full = config.max_list_size > 0 and len(pending.values) >= config.max_list_size
        if full or config.max_timeout_ns == 0:
            return [self._send(digest_id, now_ns)]
        return []

    def poll(self, now_ns: int) -> list[ReadyList]:
        """Lists whose timeout expired; also forgets un-acked lists past their ack timeout."""
        ready = [self._send(d, now_ns) for d, p in list(self._pending.items())
                 if now_ns - p.first_ns >= self.configs[d].max_timeout_ns]
        for list_id, sent in list(self._unacked.items()):
            config = self.configs.get(sent.digest_id)
            if config is None or now_ns - sent.sent_ns >= config.ack_timeout_ns:
                self._release(list_id)
        return ready

    def ack(self, digest_id: int, list_id: int) -> bool:
        sent = self._unacked.get(list_id)
        if sent is None or sent.digest_id != digest_id:
            return False
        self._release(list_id)
        return True

    def _send(self, digest_id: int, now_ns: int) -> ReadyList:
        pending = self._pending.pop(digest_id)
        list_id = self._next_list_id
        self._next_list_id += 1
        self._unacked[list_id] = _Sent(digest_id, pending.values, now_ns)
        return ReadyList(digest_id, list_id, pending.values, now_ns)

    def _release(self, list_id: int) -> None:
        sent = self._unacked.pop(list_id)
        suppressed = self._suppressed.get(sent.digest_id)
        if suppressed is not None:
            suppressed.difference_update(sent.values)
