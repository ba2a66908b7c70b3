"""Why a session failed for lack of progress: the reason its tensors fail with.

It names what an operator needs to find the cause: the oldest position still waiting,
its slot, class and aggregator, how often it was resent, and the usual suspects.
"""

from __future__ import annotations

import numpy as np

from p4hub.hosts.routes import RouteMap


def stuck_reason(slot_pos: np.ndarray, silent: float, route_map: RouteMap,
                 retries: np.ndarray, *, job: tuple[int, int, int], window: int,
                 classes: int, deadline: float) -> str:
    """The reason after ``silent`` seconds without a result (``slot_pos``: each window
    slot's position in flight or -1; ``job``: job id, rank, world size)."""
    job_id, rank, world_size = job
    in_flight = np.flatnonzero(slot_pos >= 0)
    if not in_flight.size:
        return f"no progress for {silent:.3f} s with nothing in flight (job {job_id})"
    k = int(in_flight[np.argmin(slot_pos[in_flight])])
    pos = int(slot_pos[k])
    where = f" of priority class {k // window}" if classes > 1 else ""
    if not route_map.one_destination:
        where += f" on aggregator {route_map.routes[route_map.route_of[k]].aggregator}"
    return (
        f"no result for {silent:.3f} s (deadline {deadline} s): job {job_id} rank"
        f" {rank}, oldest position {pos}{where} in slot {route_map.wire_slot[k]} (shadow"
        f" {(pos // window) & 1}) resent {int(retries[k])} times,"
        f" {in_flight.size} slots waiting; the aggregator or a peer is silent (are all"
        f" {world_size} ranks running and reducing the same tensor sizes in the"
        " same order? is the job configured on the aggregator with this slot range,"
        " and is this rank's source address the one it used before?)"
    )
