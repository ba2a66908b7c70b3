"""What the Mininet e2e modules do between tests on their shared rack."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from p4hub.experiments.jobrun import JobRun
from p4hub.topologies import linkem


@contextmanager
def job_api(rack) -> Iterator[tuple[object, list[JobRun]]]:
    """The job API client and a list for the test's job runs. Afterwards the runs are
    stopped, a dead controller or PBox is started again, any job left is killed and
    link loss is cleared, so the next test finds the rack as the module set it up."""
    from p4hub.controller.client import JobClient

    client = JobClient(rack.controller_address, timeout=10.0)
    runs: list[JobRun] = []
    try:
        yield client, runs
    finally:
        for run in runs:
            run.stop()
        if rack.controller_proc is None or rack.controller_proc.poll() is not None:
            rack.start_controller()
        for name in rack.pbox_names:
            if not rack.pbox_alive(name):
                rack.start_pbox(workers=1, name=name)
        for job in client.call("ListJobs")["jobs"]:
            client.call("KillJob", job_id=job["job_id"])
        for host in [*rack.hosts, *rack.extras]:
            linkem.clear_loss(host)
        client.close()
