"""``make stop`` on a rack left up by a hung run removes its nodes,
links and processes, and a decoy /tmp/*.log, which Mininet's ``mn -c`` would delete,
survives both the rack's start (what ``make run`` does first) and ``make stop`` (root)."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from p4hub.topologies.cleanup import read_processes
from p4hub.topologies.rack import link_names, our_links

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]


# Builds a rack with a PBox, says so, then hangs: what ``make stop`` is for (a run hung or
# left in another terminal). The test freezes it (SIGSTOP) so it cannot clean up itself.
CRASHING_RUN = """
import json, pathlib, sys, time
from p4hub.topologies.rack import Rack, RackConfig
rack = Rack(RackConfig(workers=2, log_root=pathlib.Path(sys.argv[1]), run_name="stop"))
rack.start()
rack.start_pbox(jobs=["1:2:0:1024"], workers=1)
print(json.dumps(rack.process_roots()["pbox"]), flush=True)
time.sleep(600)
"""
SHELLS = {"mininet:s1", "mininet:w1", "mininet:w2", "mininet:pbox"}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_make_stop_removes_a_hung_rack_and_keeps_a_decoy_log(tmp_path):
    decoy = Path("/tmp") / f"p4hub-decoy-{uuid.uuid4().hex}.log"
    decoy.write_text("not p4hub's\n")
    run = subprocess.Popen([sys.executable, "-c", CRASHING_RUN, str(tmp_path)], cwd=REPO,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout is not None
        pbox_pid = int(run.stdout.readline())
        run.send_signal(signal.SIGSTOP)
        shells = [p.pid for p in read_processes() if p.argv[-1] in SHELLS]
        assert len(shells) == 4 and _alive(pbox_pid)
        assert our_links(link_names())
        done = subprocess.run(["make", "-s", "stop"], cwd=REPO, capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert our_links(link_names()) == []
        assert not [pid for pid in [pbox_pid, *shells] if _alive(pid)]
        assert decoy.read_text() == "not p4hub's\n"
    finally:
        if run.poll() is None:
            run.kill()
        subprocess.run(["make", "-s", "stop"], cwd=REPO, capture_output=True, timeout=60)
        decoy.unlink(missing_ok=True)
