"""A forged RESULT sent straight to a worker from another address (a host on the data
network, another tenant's worker) never reaches its session: the agent takes results
only from the aggregators it sends to (hosts/transport.py, docs/DESIGN.md §8)."""

from __future__ import annotations

import selectors
import socket
import threading
import time

import numpy as np

from p4hub.hosts import wire
from p4hub.hosts.agent import Agent
from p4hub.hosts.batchio import source_key
from p4hub.hosts.pbox.aggregator import Aggregator

JOB = 7
SLOTS = 8


class ForgingAggregator:
    """A one-worker job's aggregator on loopback beside an attacker: for every
    contribution, the attacker first sends the worker a RESULT with the same header and
    other lanes from its own socket; the true RESULT follows from the aggregator's."""

    def __init__(self) -> None:
        self.core = Aggregator()
        self.core.add_job(JOB, 1, 0, SLOTS)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.attacker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.attacker.bind(("127.0.0.1", 0))
        self.address = self.sock.getsockname()
        self.forged = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        while not self._stop.is_set():
            if not sel.select(0.05):
                continue
            data, src = self.sock.recvfrom(4096)
            for out, dst in self.core.receive(data, src, time.monotonic()):
                header, lanes = wire.decode(out)
                fake = wire.encode(header, (np.asarray(lanes) + 1000).astype(np.int32))
                self.attacker.sendto(fake, dst)  # first, and from another address
                self.forged += 1
                time.sleep(0.02)
                self.sock.sendto(out, dst)
        sel.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
        self.attacker.close()


def test_forged_results_from_another_address_are_dropped_and_the_sum_is_exact() -> None:
    agg = ForgingAggregator()
    values = np.arange(300, dtype=np.int32)
    try:
        with Agent(JOB, 0, 1, agg.address, slot_count=SLOTS, rto=1.0) as agent:
            got = agent.allreduce(values)
            stats = agent.stats
    finally:
        agg.close()
    assert agg.forged >= 1
    assert got.tobytes() == values.tobytes()  # the aggregator's sum, not the attacker's
    assert stats["foreign"] >= agg.forged


def test_source_keys_match_the_addresses_sent_to() -> None:
    """BatchReceiver.source_keys and source_key agree on what a source is."""
    from p4hub.hosts.batchio import BatchReceiver

    rx_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx_sock.bind(("127.0.0.1", 0))
    senders = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(3)]
    try:
        for s in senders:
            s.bind(("127.0.0.1", 0))
            s.sendto(b"x" * 8, rx_sock.getsockname())
        receiver = BatchReceiver(rx_sock, 8, 64, with_addresses=True)
        time.sleep(0.05)
        n = receiver.receive()
        assert n == 3
        keys = receiver.source_keys(n).tolist()
        assert keys == [source_key(s.getsockname()) for s in senders]
        assert len(set(keys)) == 3
    finally:
        rx_sock.close()
        for s in senders:
            s.close()
