"""Make one of the rack's PBoxes a straggler for experiments: CPU interference or link
contention.

PSLD's stragglers come from imbalanced assignment, bandwidth contention and CPU
interference. Two of them can be injected on a PBox of the rack (``pbox``: its name,
by default the first, ``pbox``) while a path runs (``topologies.run --straggler``, and
tests):

* ``cpu``: ``procs`` busy processes in the PBox's host compete with its workers for
  the cores. On the 2-core build machine they slow the whole emulation, not only
  the PBox, so the run's CPU column says CPU-bound: read such a row as "the PBox
  shares its cores", not as a figure about the design.
* ``link``: an extra host floods the PBox with UDP at ``mbit`` Mbit/s (to the discard
  port). The flood shares the switch-to-PBox link with the workers' contributions,
  as another tenant's traffic would.

``inject`` is a context manager; whatever it started is stopped on the way out, also
on failure.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

KINDS = ("none", "cpu", "link")
DISCARD_PORT = 9
DATAGRAM = 1000  # bytes of UDP payload per flood datagram
BURN = "import os\nwhile True:\n    os.getpid()\n"  # a busy loop that never sleeps


@contextmanager
def inject(rack, kind: str, *, mbit: float = 0.0, procs: int = 1,
           pbox: str = "pbox") -> Iterator[None]:
    """Make ``rack``'s PBox named ``pbox`` a straggler of ``kind`` (KINDS) while the block
    runs; ValueError for an unknown kind or a PBox the rack does not have."""
    from p4hub.topologies.rack import PYTHON, pbox_index, pbox_ip

    if kind not in KINDS:
        raise ValueError(f"straggler kind {kind!r} is not one of {KINDS}")
    index = pbox_index(pbox, rack.config.pboxes)
    started: list[subprocess.Popen] = []
    try:
        if kind == "cpu":
            host = rack.pbox_hosts[index]
            started += [host.popen([PYTHON, "-c", BURN]) for _ in range(procs)]
        elif kind == "link":
            if not rack.extras:
                raise ValueError("a link straggler needs an extra host to flood from "
                                 "(RackConfig(extra_hosts=1))")
            if mbit <= 0:
                raise ValueError(f"flood rate {mbit} Mbit/s must be positive")
            started.append(rack.extras[0].popen(
                [PYTHON, "-m", "p4hub.topologies.straggler", "--flood",
                 f"{pbox_ip(index)}:{DISCARD_PORT}", "--mbit", str(mbit)]))
        yield
    finally:
        for proc in started:
            proc.kill()
            proc.wait(timeout=5)


def pace(rate_bps: float, size: int, started: float, sent: int, now: float) -> float:
    """Seconds to wait before the next datagram of ``size`` bytes so that ``sent``
    datagrams since ``started`` keep to ``rate_bps`` (0 when behind)."""
    due = started + sent * size * 8 / rate_bps
    return max(0.0, due - now)


def flood(address: tuple[str, int], mbit: float, seconds: float | None = None) -> int:
    """Send DATAGRAM-byte UDP datagrams to ``address`` at ``mbit`` Mbit/s until killed
    (or for ``seconds``); returns how many were sent."""
    payload = bytes(DATAGRAM)
    rate = mbit * 1e6
    sent = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        started = time.monotonic()
        while seconds is None or time.monotonic() - started < seconds:
            wait = pace(rate, DATAGRAM + 28, started, sent, time.monotonic())  # + IP/UDP
            if wait:
                time.sleep(wait)
            try:
                sock.sendto(payload, address)
            except OSError:  # a full buffer or an unreachable moment: keep the pace
                pass
            sent += 1
    return sent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="UDP flood at a fixed rate (link straggler)")
    parser.add_argument("--flood", required=True, help="ip:port")
    parser.add_argument("--mbit", type=float, required=True)
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args(argv)
    host, _, port = args.flood.rpartition(":")
    flood((host, int(port)), args.mbit, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
