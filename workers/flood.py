"""A UDP flood at a fixed rate: the traffic of a link straggler (experiments/straggler.py
starts it on an extra host of the rack, aimed at a PBox's discard port).

    python -m p4hub.workers.flood --flood 10.0.0.100:9 --mbit 5 [--seconds 10]
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

DISCARD_PORT = 9
DATAGRAM = 1000  # bytes of UDP payload per flood datagram


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
