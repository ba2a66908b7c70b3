"""p4hub.experiments.straggler (which PBox, which host, what it starts) and p4hub.workers.flood
(its pacing, and a real flood on loopback)."""

from __future__ import annotations

import socket
import subprocess
import threading

import pytest

from p4hub.experiments import straggler
from p4hub.topologies import rack
from p4hub.topologies.rack import RackConfig
from p4hub.workers import flood


def test_pace_keeps_the_rate_and_never_waits_when_behind():
    # 1000-byte datagrams at 8 Mbit/s: one per millisecond
    assert flood.pace(8e6, 1000, started=10.0, sent=5, now=10.002) == pytest.approx(0.003)
    assert flood.pace(8e6, 1000, started=10.0, sent=5, now=10.009) == 0.0


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
        sent = flood.flood(sink.getsockname(), mbit=4.0, seconds=0.5)
        reader.join()
    # 4 Mbit/s of 1028-byte IP datagrams for 0.5 s: about 243
    assert 200 <= sent <= 260 and len(got) > 0.9 * sent


class FakeHost:
    """A Mininet host's popen, recording the commands instead of running them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.commands: list[list[str]] = []

    def popen(self, args: list[str]) -> subprocess.Popen:
        self.commands.append(args)
        return subprocess.Popen(["sleep", "30"])


class FakeRack:
    def __init__(self, pboxes: int = 1, extras: int = 0) -> None:
        self.config = RackConfig(pboxes=pboxes, extra_hosts=extras)
        self.pbox_hosts = [FakeHost(rack.pbox_name(i)) for i in range(pboxes)]
        self.extras = [FakeHost(f"x{i + 1}") for i in range(extras)]


def test_unknown_kinds_and_missing_flood_hosts_are_refused():
    with pytest.raises(ValueError, match="not one of"), straggler.inject(FakeRack(), "disk"):
        pass
    with pytest.raises(ValueError, match="extra host"), straggler.inject(FakeRack(), "link",
                                                                         mbit=1.0):
        pass


def test_a_pbox_the_rack_lacks_is_refused_before_anything_starts():
    fake = FakeRack(pboxes=2, extras=1)
    with pytest.raises(ValueError, match="no PBox 'pbox3'"), straggler.inject(
            fake, "cpu", pbox="pbox3"):
        pass
    assert all(not h.commands for h in [*fake.pbox_hosts, *fake.extras])


def test_the_cpu_burner_runs_in_the_chosen_pbox_only():
    fake = FakeRack(pboxes=3)
    with straggler.inject(fake, "cpu", procs=2, pbox="pbox2"):
        assert [len(h.commands) for h in fake.pbox_hosts] == [0, 2, 0]
    with straggler.inject(fake, "cpu"):  # the first PBox by default, as with one PBox
        assert [len(h.commands) for h in fake.pbox_hosts] == [1, 2, 0]


@pytest.mark.parametrize(("pbox", "target"), [("pbox", "10.0.0.100:9"), ("pbox3", "10.0.0.102:9")])
def test_the_link_flood_targets_the_chosen_pbox(pbox, target):
    fake = FakeRack(pboxes=3, extras=1)
    with straggler.inject(fake, "link", mbit=5.0, pbox=pbox):
        (command,) = fake.extras[0].commands
    assert command[command.index("--flood") + 1] == target
    assert command[command.index("--mbit") + 1] == "5.0"
