"""topologies.straggler: the flood's pacing, and a real flood on loopback."""

from __future__ import annotations

import socket
import threading

import pytest

from topologies import straggler


def test_pace_keeps_the_rate_and_never_waits_when_behind():
    # 1000-byte datagrams at 8 Mbit/s: one per millisecond
    assert straggler.pace(8e6, 1000, started=10.0, sent=5, now=10.002) == pytest.approx(0.003)
    assert straggler.pace(8e6, 1000, started=10.0, sent=5, now=10.009) == 0.0


def test_a_flood_on_loopback_sends_at_about_its_rate():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink:
        sink.bind(("127.0.0.1", 0))
        sink.settimeout(0.5)
        got = []

        def drain() -> None:
            try:
                while True:
                    got.append(len(sink.recv(2048)))
            except OSError:
                pass

        reader = threading.Thread(target=drain)
        reader.start()
        sent = straggler.flood(sink.getsockname(), mbit=4.0, seconds=0.5)
        reader.join()
    # 4 Mbit/s of 1028-byte IP datagrams for 0.5 s: about 243
    assert 200 <= sent <= 260 and len(got) > 0.9 * sent


def test_unknown_kinds_and_missing_flood_hosts_are_refused():
    class NoExtras:
        extras: list = []

    with pytest.raises(ValueError, match="not one of"), straggler.inject(NoExtras(), "disk"):
        pass
    with pytest.raises(ValueError, match="extra host"), straggler.inject(NoExtras(), "link",
                                                                         mbit=1.0):
        pass
