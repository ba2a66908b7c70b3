"""A running rack seen from outside (root): Prometheus scrapes the controller's metrics
and ``p4hub top --once --json`` reads the job API while a two-worker job runs on the
P4 switch (held running until both have looked)."""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from p4hub.experiments.jobrun import JobRun
from p4hub.topologies.rack import PYTHON, REPO, Rack, RackConfig

pytestmark = [pytest.mark.root, pytest.mark.timeout(240)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_scrape_and_top_follow_a_job_on_the_rack(tmp_path):
    config = RackConfig(workers=2, bw=None, p4=True, grpc_port=50171, controller_port=50181,
                        run_name="observability-e2e", log_root=tmp_path, lock_timeout=120.0)
    port = _free_port()
    with Rack(config) as rack:
        rack.start_pbox(workers=1)
        rack.start_controller(rack.controller_topology(), extra=["--metrics", f"127.0.0.1:{port}"])
        run = JobRun(rack, rack.workers, "observed", iterations=2, hold=True)
        try:
            run.wait_for("iteration", count=2)
            job_id = run.joined[0]["job_id"]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20) as r:
                text = r.read().decode()
            top = subprocess.run([PYTHON, "-m", "p4hub.controller.cli", "--controller",
                                  rack.controller_address, "top", "--once", "--json"],
                                 cwd=REPO, capture_output=True, text=True, timeout=60)
        finally:
            run.release()
        run.finish()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    job = (("job", str(job_id)),)
    assert samples[("p4hub_jobs", ())] == 1
    assert samples[("p4hub_job_workers", job)] == 2
    assert samples[("p4hub_switch_connected", (("switch", "s1"),))] == 1
    assert samples[("p4hub_job_switch_packets_total",
                    (("job", str(job_id)), ("kind", "completions")))] > 0
    assert samples[("p4hub_aggregator_slots", (("aggregator", "s1"), ("job", str(job_id))))] > 0
    assert samples[("p4hub_metrics_read_errors", ())] == 0
    assert top.returncode == 0, top.stderr
    view = json.loads(top.stdout)
    (shown,) = view["jobs"]
    assert (shown["job_id"], shown["name"], shown["where"]) == (job_id, "observed", "switch")
    assert shown["workers"] == 2 and view["load"]["switches"]["s1"]["jobs"] == 1
