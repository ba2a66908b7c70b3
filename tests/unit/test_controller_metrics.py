"""The controller's Prometheus metrics (controller/metrics.py): a real scrape over HTTP of
an in-process controller (p4lite switch over P4Runtime, the job API, explicit clock),
parsed with prometheus-client's own parser; and the pure families from API answers."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from p4hub.controller import metrics
from p4hub.controller.core import program as p
from p4hub.hosts.wire import DEFAULT_LANES
from tests.support.running_job import run_one_round
from tests.unit.test_controller_api import stack  # noqa: F401 (fixture)
from tests.unit.test_controller_driver import pipeline  # noqa: F401 (fixture)


def scrape(port: int) -> tuple[str, dict[tuple[str, tuple], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        assert reply.status == 200
        text = reply.read().decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    return text, samples


@pytest.fixture
def scraped(stack):  # noqa: F811
    device, topo, _ctl, service, clock, client, _ = stack
    server, port = metrics.serve(service, "127.0.0.1:0")
    yield device, topo, clock, client, port
    server.shutdown()
    server.server_close()


def test_a_scrape_of_an_idle_controller_has_its_switches_and_pboxes(scraped):
    *_, port = scraped
    _, samples = scrape(port)
    assert samples[("p4hub_jobs", ())] == 0
    assert samples[("p4hub_switch_connected", (("switch", "s1"),))] == 1
    assert samples[("p4hub_switch_slots", (("switch", "s1"),))] == \
        samples[("p4hub_switch_free_slots", (("switch", "s1"),))] > 0
    assert samples[("p4hub_pbox_slots", (("pbox", "pb1"),))] > 0
    assert samples[("p4hub_metrics_read_errors", ())] == 0


def test_a_scrape_follows_a_running_job(scraped):
    device, topo, clock, client, port = scraped
    epoch = run_one_round(device, topo, clock, client)
    text, samples = scrape(port)
    job = (("job", "1"),)
    assert samples[("p4hub_jobs", ())] == 1
    assert samples[("p4hub_job_info", (("job", "1"), ("name", "resnet"), ("switch", "s1"),
                                       ("where", "switch")))] == 1
    assert samples[("p4hub_job_workers", job)] == samples[("p4hub_job_world_size", job)] == 2
    assert samples[("p4hub_job_epoch", job)] == epoch
    assert samples[("p4hub_job_switch_packets_total", (("job", "1"), ("kind", "contributions")))] == 2
    assert samples[("p4hub_job_switch_packets_total", (("job", "1"), ("kind", "completions")))] == 1
    assert samples[("p4hub_worker_results_per_second", (("job", "1"), ("rank", "0")))] == 500.0
    assert samples[("p4hub_worker_resend_ratio", (("job", "1"), ("rank", "0")))] == 0.1
    assert ("p4hub_worker_results_per_second", (("job", "1"), ("rank", "1"))) not in samples
    agg = (("aggregator", "s1"), ("job", "1"))
    assert samples[("p4hub_aggregator_slots", agg)] == 32
    rate = samples[("p4hub_aggregator_results_per_second", agg)]
    assert rate > 0
    assert samples[("p4hub_aggregator_bytes_per_second", agg)] == \
        pytest.approx(rate * (p.P4HUB_HEADER_BYTES + 4 * DEFAULT_LANES), rel=1e-3)
    assert samples[("p4hub_switch_free_slots", (("switch", "s1"),))] == \
        samples[("p4hub_switch_slots", (("switch", "s1"),))] - 32
    # no secrets: no worker address, MAC or P4Runtime address in the labels
    assert "10.0.0." not in text and "127.0.0.1" not in text and ":" not in "".join(
        v for s in samples for _, v in s[1])
    client.call("KillJob", job_id=1)
    _, after = scrape(port)
    assert after[("p4hub_jobs", ())] == 0 and ("p4hub_job_epoch", job) not in after


def test_a_failed_read_is_counted_not_raised():
    def ask(method: str, request: dict) -> dict:
        if method == "ShowJob":
            raise RuntimeError("the switch is down")
        answers: dict[str, dict] = {"Status": {"switches": {}, "pboxes": {}, "jobs": 1},
                                    "ListJobs": {"jobs": [{"job_id": 4}]}}
        return answers[method]

    got = {f.name: [s.value for s in f.samples] for f in metrics.collect_from(ask)}
    assert got["p4hub_metrics_read_errors"] == [1] and got["p4hub_jobs"] == [1]
    assert got["p4hub_job_info"] == []


@pytest.mark.parametrize("text,want", [(":9100", ("0.0.0.0", 9100)),
                                       ("127.0.0.1:0", ("127.0.0.1", 0)),
                                       ("[::1]:9100", ("::1", 9100))])
def test_metrics_addresses(text, want):
    assert metrics.parse_address(text) == want


@pytest.mark.parametrize("text", ["9100", "host:", "host:http", "h:70000"])
def test_a_bad_metrics_address_is_named(text):
    with pytest.raises(ValueError, match="HOST:PORT"):
        metrics.parse_address(text)
