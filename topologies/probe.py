"""A tiny independent aggregation client: exact int32 all-reduce, one window at a time.

It is deliberately simple (no exponents, no pipelining across windows) and shares no
code with the host agent, so it checks the PBox and the rack on their own:

    python -m topologies.probe --job 1 --rank 0 --world 4 --pbox 10.0.0.100:48879 \
        --blocks 256 --seed 1

Every rank derives every rank's input from the seed, so each can check the sum it gets
back. Prints one JSON line: {"rank", "ok", "blocks", "seconds", "retransmits", "digest"}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import sys
import time

import numpy as np

from p4hub.hosts import wire
from p4hub.hosts.wire import Header, K, PacketType


def probe_input(seed: int, rank: int, blocks: int) -> np.ndarray:
    rng = np.random.default_rng([seed, rank])
    return rng.integers(-(2**24), 2**24, (blocks, K), dtype=np.int32)


def run(job: int, rank: int, world: int, pbox: tuple[str, int], blocks: int, seed: int,
        window: int = 32, rto: float = 0.05, deadline: float = 60.0) -> dict:
    data = probe_input(seed, rank, blocks)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(rto)
    result = np.zeros((blocks, K), np.int64)
    retransmits = 0
    start = time.monotonic()
    for first in range(0, blocks, window):
        todo = set(range(first, min(first + window, blocks)))
        packets = {
            c: wire.encode(Header(type=PacketType.CONTRIB, job=job, rank=rank, slot=c % window,
                                  position=c, nelem=K, shadow=(c // window) % 2), data[c])
            for c in todo
        }
        resend = False
        while todo:
            if time.monotonic() - start > deadline:
                raise TimeoutError(f"rank {rank}: blocks {sorted(todo)[:8]} never completed")
            for c in sorted(todo):
                try:
                    sock.sendto(packets[c], pbox)
                except OSError:
                    pass  # an emulated OUTPUT drop (EPERM): the timer resends it
                retransmits += resend
            resend = True
            _collect(sock, todo, result)
    expected = sum(probe_input(seed, r, blocks).astype(np.int64) for r in range(world))
    return {
        "rank": rank, "ok": bool(np.array_equal(result, expected)), "blocks": blocks,
        "seconds": time.monotonic() - start, "retransmits": retransmits,
        "digest": hashlib.sha256(result.tobytes()).hexdigest()[:16],
    }


def _collect(sock: socket.socket, todo: set[int], result: np.ndarray) -> None:
    """Take results until the window is done or the socket stays quiet for one timeout."""
    while todo:
        try:
            datagram = sock.recv(2048)
        except TimeoutError:
            return
        try:
            header, lanes = wire.decode(datagram)
        except wire.WireError:
            continue
        if header.type == PacketType.RESULT and header.position in todo:
            result[header.position] = lanes
            todo.discard(header.position)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="p4hub.topologies.probe")
    parser.add_argument("--job", type=int, required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--pbox", required=True, help="HOST:PORT")
    parser.add_argument("--blocks", "--chunks", dest="blocks", type=int, default=256,
                        help="64-lane blocks to reduce (--chunks: the old name)")
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    host, _, port = args.pbox.rpartition(":")
    try:
        report = run(args.job, args.rank, args.world, (host, int(port)), args.blocks,
                     args.seed, args.window)
    except TimeoutError as exc:
        report = {"rank": args.rank, "ok": False, "error": str(exc)}
    print(json.dumps(report), flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
