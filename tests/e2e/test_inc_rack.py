"""The whole in-network aggregation stack on a Mininet rack (root).

One rack for the module: the P4 switch (p4lite-switch, or simple_switch_grpc when
installed) running p4src/aggregate.p4, the PBox, p4hub-controller in the root
namespace, workers w1..w6 and an outsider x1. Workers join through the controller's
job API and all-reduce with the host agent (workers/worker.py --backend job
--check): every worker must get exactly the sum of the quantized inputs.
The switch has 64 slots and gives each job 32, so two jobs fit and a third goes to the
PBox. Every test kills whatever jobs it left, and the rack is torn down even on failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from p4hub.experiments.jobrun import JobRun
from p4hub.topologies import linkem
from p4hub.topologies.rack import PBOX_IP, PYTHON, Rack, RackConfig, host_mac, worker_ip
from tests.support.racks import job_api
from tests.support.wait import wait_settled

pytestmark = pytest.mark.root

SLOTS, JOB_SLOTS = 64, 32


@pytest.fixture(scope="module")
def rack():
    config = RackConfig(workers=6, extra_hosts=1, bw=None, p4=True, grpc_port=50151,
                        controller_port=50161, run_name="inc-e2e", lock_timeout=120.0)
    with Rack(config) as r:
        r.start_pbox(workers=1)
        r.start_controller(r.controller_topology(slots=SLOTS, job_slots=JOB_SLOTS))
        yield r


@pytest.fixture
def api(rack):
    """The job API; afterwards the rack is as the module set it up (tests/support)."""
    with job_api(rack) as api:
        yield api


def _set_loss(rack: Rack, percent: float) -> None:
    probability = linkem.check_loss(percent)
    for host in [*rack.hosts, *rack.extras]:
        linkem.clear_loss(host)
        linkem.apply_loss(host, probability, [f"{host.name}-eth0"])


@pytest.mark.parametrize("loss", [1.0, 5.0])
def test_exact_results_on_every_worker_under_loss(rack, api, loss):
    client, runs = api
    _set_loss(rack, loss)
    run = JobRun(rack, rack.workers[:4], f"inc-loss{int(loss)}", iterations=2)
    runs.append(run)
    run.finish()
    assert run.where() == {"switch"}
    retransmitted = sum(run.events(r, "done")[0]["agent_stats"]["retransmitted"]
                        for r in run.lines)
    assert retransmitted > 0  # the loss really hit the job


def test_exact_under_ten_percent_loss_with_duplicated_packets(rack, api):
    """10% loss on every link and 5% of every host's datagrams sent twice (nft dup), for a
    job on the switch and one on the PBox at once: exact, identical, no hang; the
    aggregators saw the duplicates."""
    client, runs = api
    _set_loss(rack, 10.0)
    for host in [*rack.hosts, *rack.extras]:
        linkem.apply_duplication(host, 0.05, [f"{host.name}-eth0"])
    on_switch = JobRun(rack, rack.workers[:4], "inc-dup-sw", iterations=3)
    on_pbox = JobRun(rack, rack.workers[4:6], "inc-dup-pb", iterations=3,
                     extra=["--placement", "pbox"])
    runs += [on_switch, on_pbox]
    on_switch.wait_for("joined", timeout=30)
    on_pbox.wait_for("joined", timeout=30)
    job_ids = [on_switch.joined[0]["job_id"], on_pbox.joined[0]["job_id"]]
    on_switch.wait_for("iteration", count=2, timeout=90)
    shown = client.call("ShowJob", job_id=job_ids[0])
    assert shown["counters"]["duplicates"]["packets"] > 0
    # the workers' heartbeats report the service they get: results flow, with resends
    assert shown["service"]["result_bytes_per_s"] > 0 and shown["service"]["resend_ratio"] > 0
    listed = rack.workers[0].cmd(f"nft list table ip {linkem.DUP_TABLE}")
    assert int(re.search(r"counter packets (\d+)", listed).group(1)) > 0, listed  # really sent twice
    on_switch.finish()
    on_pbox.finish()
    assert on_switch.where() == {"switch"} and on_pbox.where() == {"pbox"}


def test_two_concurrent_jobs_each_correct(rack, api):
    client, runs = api
    a = JobRun(rack, rack.workers[0:2], "inc-a", iterations=3, hold=True)
    b = JobRun(rack, rack.workers[2:4], "inc-b", iterations=3, extra=["--scale", "0.003"],
               hold=True)
    runs += [a, b]
    a.wait_for("joined")
    b.wait_for("joined")
    ranges = [(j["job_id"], j["slot_base"], j["slot_count"]) for j in (a.joined[0], b.joined[0])]
    (ja, base_a, count_a), (jb, base_b, count_b) = ranges
    assert ja != jb
    assert base_a + count_a <= base_b or base_b + count_b <= base_a  # no shared slot
    # the operator's view: `p4hub jobs --json` and `p4hub switch show s1 --json`
    cli = [PYTHON, "-m", "p4hub.controller.cli", "--controller", rack.controller_address, "--json"]
    jobs = json.loads(subprocess.run([*cli, "jobs"], capture_output=True, text=True,
                                     check=True).stdout)
    listed = {j["job_id"]: j["where"] for j in jobs["jobs"]}
    assert listed[ja] == listed[jb] == "switch"
    switch = json.loads(subprocess.run([*cli, "switch", "show", "s1"], capture_output=True,
                                       text=True, check=True).stdout)
    assert {str(ja), str(jb)} <= set(switch["groups"])  # one multicast group per job
    a.release()
    b.release()
    a.finish()
    b.finish()
    assert a.where() == b.where() == {"switch"}


def test_third_job_when_the_switch_is_full_runs_on_the_pbox_then_on_the_switch(rack, api):
    """Placed on the PBox while the switch is full, the third job moves to the switch
    when a switch job ends (its workers resynchronise onto the switch's slots), exact
    throughout."""
    client, runs = api
    a = JobRun(rack, rack.workers[0:2], "inc-full-a", iterations=2, hold=True)
    b = JobRun(rack, rack.workers[2:4], "inc-full-b", iterations=2, hold=True)
    runs += [a, b]
    a.wait_for("joined")
    b.wait_for("joined")
    assert client.call("Status")["switches"]["s1"]["free_slots"] == SLOTS - 2 * JOB_SLOTS == 0
    c = JobRun(rack, rack.workers[4:6], "inc-full-c", iterations=2, hold=True)
    runs.append(c)
    c.wait_for("joined")
    assert {j["where"] for j in c.joined} == {"pbox"}
    assert {j["aggregator"] for j in c.joined} == {f"{PBOX_IP}:48879"}
    c.wait_for("iteration", count=2)
    a.release()
    a.finish()  # job A's workers leave: its slots are free
    c.wait_for("resync", timeout=30)
    done = min(len(c.events(r, "iteration")) for r in c.lines)
    c.wait_for("iteration", count=done + 2)
    job = client.call("ShowJob", job_id=c.joined[0]["job_id"])
    assert job["where"] == "switch" and "free slots again" in job["moves"][-1]["reason"]
    c.release()
    b.release()
    c.finish()
    b.finish()
    assert c.where() == {"pbox", "switch"}
    assert a.where() == b.where() == {"switch"}


CRAFT = r"""
import struct, sys, time
from scapy.all import Ether, IP, UDP, Raw, sendp
job, seconds, my_mac, pbox_mac = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
lanes = struct.pack("!64i", *([1 << 20] * 64))
def contrib(job, rank, slot, kind=1):
    return struct.pack("!BBHHHIIbbH", 0x10 | kind, 0, job, rank, 1, slot, 0, 0, 0, 64) + lanes
frames = []
for rank in range(4):
    for slot in range(0, 64, 3):
        # its own address; w1's IP from another port; w2's; and rank r's full identity
        # (IP and agent port), which only the switch-port key of `members` catches
        for src, sport in (("10.0.0.201", 47000), ("10.0.0.1", 40000), ("10.0.0.2", 47001),
                           (f"10.0.0.{rank + 1}", 47000)):
            frames.append(Ether(src=my_mac, dst=pbox_mac) / IP(src=src, dst="10.0.0.100")
                          / UDP(sport=sport, dport=48879) / Raw(contrib(job, rank, slot)))
frames.append(Ether(src=my_mac, dst=pbox_mac) / IP(src="10.0.0.201", dst="10.0.0.100")
              / UDP(sport=47000, dport=48879) / Raw(contrib(job, 0, 0, kind=3)))
end, sent = time.monotonic() + seconds, 0
while time.monotonic() < end:
    sendp(frames, iface="x1-eth0", verbose=0)
    sent += len(frames)
print(sent)
"""

# RESULTs "from the PBox" to w1's agent for every position g its job will use: slot
# base + g mod W, shadow (g // W) mod 2, position g. Crafted once with scapy, then sent with
# the position and slot patched in, over a raw socket (scapy is too slow for 25k frames).
FORGE_RESULTS = r"""
import socket, struct, sys, time
from scapy.all import Ether, IP, UDP, Raw
job, base, window, positions, seconds = map(int, sys.argv[1:6])
my_mac, w1_mac = sys.argv[6], sys.argv[7]
head = struct.pack("!BBHHHIIbbH", 0x12, 0, job, 0xFFFF, 4, 0, 0, 0, 0, 64)
template = bytes(Ether(src=my_mac, dst=w1_mac) / IP(src="10.0.0.100", dst="10.0.0.1")
                 / UDP(sport=48879, dport=47000, chksum=0)
                 / Raw(head + struct.pack("!64i", *([1 << 24] * 64))))
off = len(template) - 276
frames = []
for g in range(positions):
    frame = bytearray(template)
    frame[off + 1] = (g // window) % 2
    struct.pack_into("!II", frame, off + 8, base + g % window, g)
    frames.append(bytes(frame))
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
sock.bind(("x1-eth0", 0))
end, sent = time.monotonic() + seconds, 0
while time.monotonic() < end:
    for frame in frames:
        try:
            sock.send(frame)
            sent += 1
        except OSError:
            time.sleep(0.001)  # pacing: the socket's send buffer is full
print(sent)
"""


def test_outsider_crafted_contributions_change_no_result(rack, api):
    client, runs = api
    run = JobRun(rack, rack.workers[:4], "inc-victim", iterations=3, hold=True)
    runs.append(run)
    run.wait_for("joined")
    job_id = run.joined[0]["job_id"]
    x1 = rack.extras[0]
    out = rack.popen(x1, [PYTHON, "-c", CRAFT, str(job_id), "3", x1.MAC(), host_mac(PBOX_IP)],
                     "x1-craft")
    sent = int(out.communicate(timeout=60)[0].strip().splitlines()[-1])
    assert sent > 0
    # the job still runs; its counters once the switch drained x1's backlog
    counters = wait_settled(lambda: client.call("ShowJob", job_id=job_id)["counters"],
                            lambda c: c["rejected"]["packets"] >= sent)
    assert counters["completions"]["packets"] > 0
    # then forged results towards w1 (the switch drops them: wrong port for the PBox's IP)
    joined = run.joined[0]
    results = rack.popen(x1, [PYTHON, "-c", FORGE_RESULTS, str(job_id), str(joined["slot_base"]),
                              str(joined["window"]), "30000", "4", x1.MAC(), rack.workers[0].MAC()],
                         "x1-forge-results")
    assert int(results.communicate(timeout=60)[0].strip().splitlines()[-1]) > 30000
    assert run.procs[0].poll() is None, "the job ended before the forged results were sent"
    run.release()
    run.finish(timeout=120)
    assert run.where() == {"switch"}
    assert counters["rejected"]["packets"] >= sent  # every forged packet dropped and counted


def test_controller_restart_mid_job_loses_no_job(rack, api):
    client, runs = api
    run = JobRun(rack, rack.workers[:4], "inc-restart", iterations=3, hold=True)
    runs.append(run)
    run.wait_for("iteration", count=1)
    job_id = run.joined[0]["job_id"]
    rack.kill_controller()
    time.sleep(1.0)  # the outage itself: the jobs ride out a controller down a while
    rack.start_controller()
    jobs = {j["job_id"]: j for j in client.call("ListJobs")["jobs"]}
    assert job_id in jobs and jobs[job_id]["workers"] == 4 and jobs[job_id]["where"] == "switch"
    done_before = len(run.events(0, "iteration"))
    run.wait_for("iteration", count=done_before + 3)  # iterations after the restart
    run.release()
    run.finish()
    assert run.where() == {"switch"}
    # the workers left through the restarted controller: the job is gone, its slots free
    assert job_id not in {j["job_id"] for j in client.call("ListJobs")["jobs"]}
    assert client.call("Status")["switches"]["s1"]["free_slots"] == SLOTS


def _doctor(rack: Rack, job_id: int) -> dict:
    """`p4hub doctor JOB --json` as an operator runs it: exit 0 healthy, 2 not."""
    out = subprocess.run([PYTHON, "-m", "p4hub.controller.cli", "--controller", rack.controller_address,
                          "--json", "doctor", str(job_id)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode in (0, 2), out.stderr
    (report,) = json.loads(out.stdout)["reports"]
    return report


def _finding(report: dict, code: str) -> str:
    return " ".join(f["message"] for f in report["findings"] if f["code"] == code)


def _findings(report: dict, code: str) -> list[dict]:
    return [f for f in report["findings"] if f["code"] == code]


def _named(report: dict, code: str) -> list[int]:
    return [r for f in report["findings"] if f["code"] == code for r in f["ranks"]]


def test_a_dead_worker_ends_its_job_and_the_doctor_names_it(rack, api):
    """Worker 2 of 3 is killed mid-job: `p4hub doctor` names rank 2 (missing from the open
    cells, then silent), the controller ends the job after worker_timeout and frees its
    slots, and the same job name runs again on the freed slots with a restarted worker."""
    client, runs = api
    original = rack.topology
    timeout = 10.0
    rack.kill_controller()
    rack.start_controller(rack.controller_topology(slots=SLOTS, job_slots=JOB_SLOTS,
                                                   worker_timeout=timeout))
    try:
        run = JobRun(rack, rack.workers[:3], "inc-dead", iterations=2, hold=True)
        runs.append(run)
        run.wait_for("iteration", count=1)
        job_id, base = run.joined[0]["job_id"], run.joined[0]["slot_base"]
        entries = {"job-entry-missing", "job-entry-differs", "member-entry-missing",
                   "result-entry-missing", "group-missing", "group-differs"}
        assert not entries & {f["code"] for f in _doctor(rack, job_id)["findings"]}
        run.procs[2].kill()  # SIGKILL: no LeaveJob, heartbeats stop
        killed = time.monotonic()
        # from the open cells' bitmaps; where the switch cannot read its registers (real
        # simple_switch_grpc answers RegisterEntry reads UNIMPLEMENTED: "slots-unread"),
        # from its silence on the job API
        named: list[int] = []
        code = "ranks-not-contributing"
        while not named and time.monotonic() - killed < timeout - 2:
            time.sleep(0.5)
            report = _doctor(rack, job_id)
            if _findings(report, "slots-unread"):
                code = "worker-silent"
            named = _named(report, code)
        assert named == [2], f"the doctor did not name rank 2 ({code})"
        ended = None
        while time.monotonic() - killed < timeout + 15:
            shown = client.call("ShowJob", job_id=job_id)
            if shown["state"] == "ended":
                ended = shown
                break
            time.sleep(0.5)
        assert ended is not None, "the controller did not end the job of a dead worker"
        assert (ended["cause"], ended["rank"]) == ("silent", 2)
        assert "rank 2 (10.0.0.3:" in ended["reason"]
        assert client.call("Status")["switches"]["s1"]["free_slots"] == SLOTS
        assert _named(_doctor(rack, job_id), "job-ended") == [2]
        # the survivors learn it from their heartbeat: their all-reduce fails, naming rank 2
        run.release()
        for proc in run.procs[:2]:
            proc.wait(timeout=15)
        for rank in (0, 1):
            (error,) = run.events(rank, "error")
            assert "the controller ended the job" in error["error"], error
            assert "rank 2 (10.0.0.3:" in error["error"], error
        run.stop()
        again = JobRun(rack, rack.workers[:3], "inc-dead", iterations=2)  # w3 restarted
        runs.append(again)
        again.finish()
        assert again.joined[0]["job_id"] != job_id and again.where() == {"switch"}
        assert again.joined[0]["slot_base"] == base
    finally:
        rack.kill_controller()
        rack.start_controller(original)


def test_worker_addresses_match_the_controller_topology(rack):
    topo = rack.controller_topology()
    for rank, host in enumerate(rack.workers):
        conf = topo["hosts"][host.name]
        assert (conf["ip"], conf["mac"]) == (worker_ip(rank), host.MAC())
        assert rack.switch.ports[host.intf().link.intf2] == conf["port"]
    pbox = topo["pboxes"]["pbox"]
    assert rack.switch.ports[rack.pbox.intf().link.intf2] == pbox["port"]
    assert pbox["mac"] == rack.pbox.MAC()


def _resyncs(run: JobRun) -> list[list[dict]]:
    return [run.events(r, "resync") for r in run.lines]


def test_a_switch_restart_mid_job_resyncs_and_the_job_finishes_exactly(rack, api):
    """The switch process dies mid-job under 2% loss and comes back a second later with
    empty registers and no entries: the controller configures it again under new epochs,
    every worker resynchronises (courtesy resends for peers that lost a result), and
    every iteration is exact and identical on every rank."""
    client, runs = api
    _set_loss(rack, 2.0)
    run = JobRun(rack, rack.workers[:4], "inc-swrestart", iterations=2, hold=True)
    runs.append(run)
    run.wait_for("iteration", count=1)
    job_id = run.joined[0]["job_id"]
    rack.restart_switch(down_for=1.0)
    done_before = max(len(run.events(r, "iteration")) for r in run.lines)
    run.wait_for("resync", timeout=30)
    run.wait_for("iteration", count=done_before + 3, timeout=90)
    moves = client.call("ShowJob", job_id=job_id)["moves"]
    assert [m["reason"] for m in moves] == ["switch s1 restarted"]
    assert "switch s1 restarted" in _finding(_doctor(rack, job_id), "aggregator-changed")
    run.release()
    run.finish()
    epochs = {tuple(e["epoch"] for e in r) for r in _resyncs(run)}
    assert epochs == {(moves[0]["epoch"],)}, epochs  # every rank followed the new epoch


def test_a_job_whose_pbox_dies_moves_to_the_switch_and_finishes_exactly(rack, api):
    """The job runs on the PBox, which is SIGKILLed mid-job under 2% loss: the
    controller moves the job to the switch (new slots, new epoch), the workers
    resynchronise onto it, and every iteration is exact and identical on every rank."""
    client, runs = api
    _set_loss(rack, 2.0)
    run = JobRun(rack, rack.workers[:4], "inc-pboxdies", iterations=2, hold=True,
                 extra=["--placement", "pbox"])
    runs.append(run)
    run.wait_for("iteration", count=1)
    job_id = run.joined[0]["job_id"]
    assert run.joined[0]["where"] == "pbox"
    rack.kill_pbox()
    run.wait_for("resync", timeout=30)
    done_before = max(len(run.events(r, "iteration")) for r in run.lines)
    run.wait_for("iteration", count=done_before + 2, timeout=90)
    shown = client.call("ShowJob", job_id=job_id)
    assert shown["where"] == "switch"
    assert "PBox pbox is unreachable" in shown["moves"][-1]["reason"]
    assert "PBox pbox is unreachable" in _finding(_doctor(rack, job_id), "aggregator-changed")
    run.release()
    run.finish()
    assert run.where() == {"pbox", "switch"}
    assert {e["slot_base"] for r in _resyncs(run) for e in r} == {shown["slot_base"]}


CHAOS_SEED = "P4HUB_CHAOS_SEED"
CHAOS_TARGETS = {"switch": "switch s1", "pbox": "PBox pbox", "controller": "the controller",
                 "worker": "job A rank 3"}


def chaos_seed() -> int:
    """$P4HUB_CHAOS_SEED if set (to rerun a failed order), else a new one per run."""
    given = os.environ.get(CHAOS_SEED)
    return int(given) if given else int(time.time()) % 1000


def chaos_failure(row, seed: int, sequence: list[str]) -> str:  # noqa: ANN001 - a FaultRow
    """Which fault failed (kind, target, time) and how to rerun the same order."""
    return (f"fault {row.fault} on {CHAOS_TARGETS[row.fault]} at {row.at_s} s "
            f"(sequence {sequence}): recovered={row.recovered} exact={row.exact} "
            f"recover_s={row.recover_s} {row.detail!r}; rerun: {CHAOS_SEED}={seed}")


def test_chaos_every_fault_once_under_loss(rack, api):
    """Switch, PBox and controller die and come back at random points of two running
    jobs (one on the switch, one on the PBox) under 5% loss; then a worker dies. Every
    completed all-reduce is exact and identical on every rank, both jobs recover from
    every fault, and the dead worker's peers fail naming it within the deadline.

    The order of the faults comes from a seed, printed at the start; set
    P4HUB_CHAOS_SEED to that seed to rerun the same order. A failure names the fault
    (kind, target, time since the run started), the order and the seed."""
    from p4hub.experiments.chaos import Chaos, fault_sequence

    seed = chaos_seed()
    print(f"chaos seed {seed} (rerun: {CHAOS_SEED}={seed})", flush=True)
    original = rack.topology
    rack.kill_controller()
    rack.start_controller(rack.controller_topology(slots=SLOTS, job_slots=JOB_SLOTS,
                                                   worker_timeout=8.0))
    chaos = Chaos(rack, loss_percent=5.0)
    try:
        sequence = fault_sequence(seed=seed)  # every order in time
        for fault in sequence:
            row = chaos.inject(fault)
            assert row.recovered and row.exact, chaos_failure(row, seed, sequence)
        row = chaos.kill_worker()
        assert row.recovered and row.exact, chaos_failure(row, seed, sequence)
        assert row.recover_s is not None and row.recover_s < 8.0 + 15.0, \
            chaos_failure(row, seed, sequence)
        assert chaos.finish(), f"job B did not end exact after {sequence}; rerun: {CHAOS_SEED}={seed}"
    finally:
        chaos.stop()
        rack.kill_controller()
        rack.start_controller(original)


@pytest.mark.parametrize("placement", ["auto", "pbox"])
def test_the_selftest_checks_the_path_from_a_worker(rack, api, placement):
    """`p4hub-selftest` on a worker host: a one-worker job of its own through the switch
    (or the PBox), exact sums back, the job gone afterwards."""
    client, _ = api
    out = rack.workers[5].cmd(PYTHON, "-m", "p4hub.hosts.selftest", "--controller",
                              rack.controller_address, "--address",
                              f"{rack.workers[5].IP()}:47999", "--placement", placement,
                              "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert report["ok"], report
    assert report["where"] == ("switch" if placement == "auto" else "pbox")
    assert report["job_id"] not in {j["job_id"] for j in client.call("ListJobs")["jobs"]}
    # a controller that is not there: the failed step is named
    out = rack.workers[5].cmd(PYTHON, "-m", "p4hub.hosts.selftest", "--controller", "10.0.0.1:1",
                              "--address", f"{rack.workers[5].IP()}:47999", "--timeout", "1",
                              "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert (report["ok"], report["step"]) == (False, "join")
    assert "did not answer" in report["detail"]


def test_another_tenant_can_neither_see_nor_touch_a_running_job(rack, api):
    """From w6, a host of the rack that is not in the job: the CLI without credentials,
    with another job's token and in plaintext; the job runs on, exact, and the
    administrator (this process: the rack's state directory) sees it."""
    client, runs = api
    run = JobRun(rack, rack.workers[:2], "inc-tenant", iterations=2, hold=True)
    runs.append(run)
    run.wait_for("iteration", count=1)
    job_id = run.joined[0]["job_id"]
    assert "job_token" not in run.joined[0]  # the launcher brought it: never emitted

    def cli(*argv: str, **env: str) -> tuple[str, str]:
        """(exit status, output) of the CLI on w6, as another tenant: no administrator
        token (a state directory of its own), the run's CA unless told otherwise."""
        settings = {"P4HUB_STATE_DIR": "/nonexistent", **env}
        out = rack.workers[5].cmd("env", *(f"{k}={v}" for k, v in settings.items()), PYTHON,
                                  "-m", "p4hub.controller.cli", "--controller",
                                  rack.controller_address, *argv, "; echo rc=$?")
        status = out.strip().splitlines()[-1]
        return status, out

    for argv in (["jobs"], ["status"], ["job", "kill", str(job_id)], ["doctor"]):
        status, out = cli(*argv)
        assert status == "rc=1" and "UNAUTHENTICATED" in out and "administrator" in out, out
    other = "o" * 43
    shown = {j: cli("job", "show", str(j), P4HUB_JOB_TOKEN=other)[1] for j in (job_id, 77)}
    for out in shown.values():
        assert "PERMISSION_DENIED" in out, out
    assert shown[job_id].replace(f"job {job_id}", "job N") == \
        shown[77].replace("job 77", "job N")
    status, out = cli("job", "show", str(job_id), P4HUB_INSECURE="1")  # plaintext
    assert status == "rc=1" and "UNAVAILABLE" in out, out
    assert client.call("ShowJob", job_id=job_id)["state"] == "running"
    run.release()
    run.finish()  # exact sums on both ranks
