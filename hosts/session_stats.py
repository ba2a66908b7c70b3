"""The counters of one session (hosts/session.py), as an agent's ``stats`` shows them."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(slots=True)
class SessionStats:
    """Counters of one session (datagrams, not bytes)."""

    sent: int = 0  # first transmissions
    retransmitted: int = 0
    early_resends: int = 0  # of which sent before their timeout: later results showed a loss
    results: int = 0  # results accepted (DONEs included)
    dones: int = 0  # of which header-only DONEs of reduce-scatter blocks this rank does not own
    joins: int = 0  # first transmissions of header-only GATHER_JOINs (all-gather blocks of others)
    courtesy: int = 0  # resends after a resync of positions this rank had the result of
    resyncs: int = 0
    duplicates: int = 0  # results for a position not in flight (duplicate or stale)
    foreign: int = 0  # not a result of this job, or malformed
    float_blocks: int = 0  # first transmissions of float32 blocks (the precision option)
    cwnd: int = 0  # the congestion windows now, summed over aggregators (0: congestion control off)
    cwnd_cuts: int = 0  # halvings of the congestion window on a timeout
    cwnd_backoffs: int = 0  # rounds whose queueing delay shrank the congestion window

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
