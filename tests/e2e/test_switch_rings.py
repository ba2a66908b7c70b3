"""p4lite-switch's packet I/O on real veths, both paths (``--packet-io mmap``: PACKET_MMAP
rings; ``socket``: recv/send per frame): bursts, a partial batch, and a port whose
veth is deleted under the running switch. Namespaces ``p4lrh1..3``, switch-side veths
``p4lrs1-eth1..3`` (tests/e2e/p4/netns.py's Rack with its own prefix: no clash with
Mininet's names or the other e2e tests).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.p4 import frames as F
from tests.e2e.p4.netns import Rack, Sniffer, SwitchProcess, compile_program, flood, send_frames, sh
from tests.support.wait import wait_until

pytestmark = pytest.mark.root

P4 = Path(__file__).parent / "p4" / "p4l_ports.p4"  # 1 -> 2, 2 -> 1, 3 -> 2
BURST = 3000  # well inside the RX ring (16 384 slots) and the old socket buffer


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_program(P4, tmp_path_factory.mktemp("p4lr-build"))[0]


@pytest.fixture
def rack() -> Iterator[Rack]:
    r = Rack(3, prefix="p4lr")
    try:
        yield r
    finally:
        r.close()  # also after a failure: namespaces and veths removed


@pytest.fixture(params=["mmap", "socket"])
def switch(request: pytest.FixtureRequest, rack: Rack, program: Path,
           tmp_path: Path) -> Iterator[SwitchProcess]:
    s = SwitchProcess(rack.ports, tmp_path, json_path=program, cpu_port=None,
                      extra_target=("--packet-io", request.param))
    try:
        wait_forwarding(rack)
        yield s
    finally:
        s.stop()


def wait_forwarding(rack: Rack, seconds: float = 15.0) -> None:
    """Until a probe frame gets from host 1 to host 2. p4lite-switch opens its interfaces
    after its gRPC server listens (which is all SwitchProcess waits for), so a burst sent
    at once can meet ports not open yet: seen once, while the machine was installing
    Debian packages (0 of 3000 and 51 of 200 arrived; CPU load alone did not do it)."""
    h1, h2 = rack.hosts[0], rack.hosts[1]
    deadline = time.monotonic() + seconds
    while True:
        sniffer = Sniffer(h2, 0.5, until=b"p4lr-probe")
        send_frames(h1, F.udp(h1, h2.ip, tag=b"p4lr-probe"))
        if F.with_tag(sniffer.frames(), b"p4lr-probe"):
            return
        assert time.monotonic() < deadline, f"the switch forwarded nothing for {seconds} s"


def burst_through(rack: Rack, src: int, dst: int, count: int, tag: bytes) -> int:
    """Frames carrying ``tag`` from host ``src`` that reached host ``dst``."""
    sniffer = Sniffer(rack.hosts[dst - 1], 20.0, limit=count)
    sent = flood(rack.hosts[src - 1], F.udp(rack.hosts[src - 1], rack.hosts[dst - 1].ip, tag=tag), count)
    assert sent == count
    return len(F.with_tag(sniffer.frames(), tag))


def test_bursts_and_a_partial_batch_arrive_whole(rack: Rack, switch: SwitchProcess) -> None:
    assert burst_through(rack, 1, 2, BURST, b"p4lr-burst") == BURST
    assert burst_through(rack, 2, 1, BURST, b"p4lr-back") == BURST
    h1, h2 = rack.hosts[0], rack.hosts[1]
    sniffer = Sniffer(h2, 10.0, limit=3)
    send_frames(h1, *(F.udp(h1, h2.ip, tag=b"p4lr-three") for _ in range(3)))  # < one batch
    assert len(F.with_tag(sniffer.frames(), b"p4lr-three")) == 3
    assert switch.alive()


def test_a_vanished_port_is_logged_once_and_the_others_go_on(rack: Rack,
                                                             switch: SwitchProcess) -> None:
    assert burst_through(rack, 1, 2, 200, b"p4lr-before") == 200
    sh("ip", "link", "del", rack.hosts[2].switch_iface)  # port 3's veth, under the switch
    wait_until(lambda: "went away" in switch.log())  # the switch noticed (its socket's error)
    assert burst_through(rack, 1, 2, BURST, b"p4lr-after") == BURST
    assert burst_through(rack, 2, 1, BURST, b"p4lr-after-back") == BURST
    assert switch.alive()
    log = switch.log()
    assert log.count("went away") == 1, log[-2000:]
    assert switch.stop() == 0
