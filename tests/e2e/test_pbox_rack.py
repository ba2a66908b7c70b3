"""4 workers + the PBox on the Mininet rack, with loss on every link (root).

Each worker runs workers.worker with the host agent; it recomputes every rank's
inputs from the seed and checks its result bit for bit against the sum of the quantized
inputs (workers.workload.quantized_sum, built on hosts.quantize). The test also
checks that all workers got the same bytes and that the loss really happened.
"""

from __future__ import annotations

import subprocess

import pytest

from p4hub.experiments.launch import run_workers
from p4hub.topologies.rack import PBOX_IP, PYTHON, Rack, RackConfig

pytestmark = [pytest.mark.root, pytest.mark.timeout(170)]

WORKERS = 4
ITERATIONS = 2
SCALE = "0.004"  # ~100k parameters (410 kB) per iteration over 54 ResNet-50 layers
# Under 5% loss per link the agent's default rto_max (1 s) lets backed-off timers
# dominate (tens of seconds per iteration); the rack's RTT is sub-millisecond, so cap
# the retransmission timeout at 0.2 s to keep each test well under two minutes.
RTO_MAX = "0.2"


def _our_links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()]
    ours = {"s1", "pbox-eth0"} | {f"w{i}-eth0" for i in range(1, 9)}
    return [n for n in names if n in ours or n.startswith("s1-eth")]


@pytest.mark.parametrize("loss", [1.0, 5.0])
def test_every_worker_gets_the_exact_quantized_sum_under_loss(loss, tmp_path):
    config = RackConfig(workers=WORKERS, bw=100, loss=loss, log_root=tmp_path, run_name="e2e")
    with Rack(config) as rack:
        rack.start_pbox(jobs=[f"1:{WORKERS}:0:1024"], workers=2)
        run = run_workers(rack, lambda rank: [
            "--backend", "pbox", "--job", "1", "--pbox", f"{PBOX_IP}:48879",
            "--rank", str(rank), "--world", str(WORKERS), "--scale", SCALE, "--rto-max", RTO_MAX,
            "--iterations", str(ITERATIONS), "--seed", str(int(loss * 10)), "--check",
            "--timeout", "30"], timeout=120)
        final = rack.stop_pbox()
    assert not run.errors and not run.timed_out, (run.errors, rack.log_dir)
    assert all(code == 0 for code in run.returncodes.values()), run.returncodes
    assert len(run.iterations) == ITERATIONS
    for key, by_rank in run.iterations.items():
        assert sorted(by_rank) == list(range(WORKERS)), key
        assert all(line["exact"] for line in by_rank.values()), (key, by_rank)
        assert len({line["digest"] for line in by_rank.values()}) == 1, key
        assert all(line["max_abs_err"] < 1e-5 for line in by_rank.values())
    counters = final[-1]["jobs"]["1"]
    assert sum(counters["rejected"].values()) == 0
    # Loss on every link really happened: contributions were retransmitted.
    assert counters["duplicates"] > 0
    assert final[-1]["global"]["internal_errors"] == 0


def test_rack_cleans_up_after_a_failure(tmp_path):
    procs = []
    with pytest.raises(RuntimeError, match="boom"):
        with Rack(RackConfig(workers=2, bw=None, log_root=tmp_path)) as rack:
            rack.start_pbox(jobs=["1:2"], workers=2)
            jobs = rack.pbox_request({"cmd": "list_jobs"})["jobs"]
            assert [j["job_id"] for j in jobs] == [1]
            procs.append(rack.popen(rack.workers[0], [PYTHON, "-c", "import time; "
                                                      "time.sleep(600)"], "sleeper"))
            assert rack.workers[0].cmd("ping -c1 -W1", PBOX_IP).count("1 received") == 1
            assert _our_links()
            raise RuntimeError("boom")
    assert all(proc.poll() is not None for proc in procs)
    assert _our_links() == []
    assert rack.net is None


RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(("0.0.0.0", 9999)); s.settimeout(2.0)
print("ready", flush=True)
n = 0
try:
    while True:
        s.recv(2048); n += 1
except TimeoutError:
    pass
print(n, flush=True)
"""

SENDER = """
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
errors = 0
for i in range(10000):
    try:
        s.sendto(b"x" * 100, ("%s", 9999))
    except OSError:
        errors += 1
    if i %% 100 == 99:
        time.sleep(0.002)  # stay far below any queue limit: only emulated loss counts
print(errors, flush=True)
"""


def test_loss_emulation_drops_the_configured_fraction_on_each_link(tmp_path):
    """5% per link direction: w1 -> s1 -> pbox delivers (0.95)^2 = 90.25% of datagrams,
    and the sender never sees an error (the nft egress drop is silent, like a wire)."""
    with Rack(RackConfig(workers=1, bw=None, loss=5.0, log_root=tmp_path)) as rack:
        receiver = rack.popen(rack.pbox, [PYTHON, "-c", RECEIVER], "receiver")
        assert receiver.stdout.readline().strip() == "ready"
        sender = rack.popen(rack.workers[0], [PYTHON, "-c", SENDER % PBOX_IP], "sender")
        send_errors = int(sender.stdout.readline())
        received = int(receiver.stdout.readline())
    assert send_errors == 0
    # Binomial(10000, 0.9025): standard deviation 0.3%; the band is more than 8 sigma wide.
    assert 0.875 <= received / 10000 <= 0.93, received
