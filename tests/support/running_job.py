"""A job with a measured round on the in-process controller stack of
tests/unit/test_controller_api.py (``stack``), shared by the tests of what reads the
job API while a job runs (metrics, ``p4hub top``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from p4hub.controller.core import program as p
from p4hub.hosts.wire import DEFAULT_LANES
from tests.unit.test_aggregate_p4 import contrib, udp_frame


def run_one_round(device: Any, topo: Any, clock: Any, client: Any) -> int:
    """Job 1 "resnet" of two ranks on s1: one round summed by the switch, rank 0's rates
    measured over 2 s (1,000 results, 100 resent); returns the job's epoch."""
    for rank in (0, 1):
        client.join("resnet", 2, rank, f"10.0.0.{rank + 1}:{4001 + rank}")
    pbox = topo.pboxes["pb1"]
    for rank in (0, 1):
        h = topo.hosts[f"h{rank + 1}"]
        device.receive(udp_frame((h.mac, h.ip, 4001 + rank), (pbox.mac, pbox.ip, p.AGG_UDP_PORT),
                                 contrib(1, rank, 0, values=np.ones(DEFAULT_LANES))), rank + 1)
    epoch = int(client.call("ShowJob", job_id=1)["epoch"])
    client.call("Heartbeat", job_id=1, rank=0, sent=0, retransmitted=0, results=0,
                epoch=epoch, routes=[[0, 0.0]])
    clock.now = 2.0
    client.call("Heartbeat", job_id=1, rank=0, sent=1000, retransmitted=100, results=1000,
                epoch=epoch, routes=[[1000, 2.0]])
    return epoch
