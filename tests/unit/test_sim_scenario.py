"""Scenario files (sim/scenario.py, sim/units.py): every field refused when missing,
unknown, of the wrong type or out of range, with the file and ``[section.field]`` named;
the checks across fields; sweeps; units; the shipped scenarios."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import pytest

from p4hub.sim import scenario, units
from p4hub.sim.errors import ScenarioError, SimError

REPO = Path(__file__).resolve().parents[2]
SOURCE = Path("case.toml")


def base() -> dict[str, Any]:
    """A valid leaf-spine scenario that sets no optional field (so each may be added)."""
    return {"topology": {"kind": "leafspine", "workers": 4, "racks": 2},
            "links": {"bandwidth": "10Gbit"},
            "job": {"model": "resnet50", "paths": ["switch", "ps"]}}


def refused(raw: dict[str, Any]) -> ScenarioError:
    with pytest.raises(ScenarioError) as caught:
        scenario.parse(raw, SOURCE)
    return caught.value


def with_value(section: str, key: str, value: Any) -> dict[str, Any]:
    raw = base()
    raw.setdefault(section, {})[key] = value
    return raw


FIELDS = [f"{section}.{key}" for section, fields in scenario.SCHEMA.items() for key in fields]
REQUIRED = [f"{section}.{key}" for section, fields in scenario.SCHEMA.items()
            for key, spec in fields.items() if spec.default is scenario.REQUIRED]

# one value of the wrong type per field
WRONG_TYPE: dict[str, Any] = {
    "topology.kind": 1, "topology.workers": "4", "topology.racks": 2.0, "topology.spines": True,
    "topology.pboxes": "1", "topology.pods": 2.0, "links.core_oversubscription": "2",
    "links.bandwidth": 10e9, "links.fabric_bandwidth": 10, "links.oversubscription": "2",
    "links.delay": 1e-6, "links.queue": 512000, "links.loss": "0.1", "links.duplicate": False,
    "links.reorder": [0.1], "links.overhead": 66, "links.pbox_bandwidth": 5e6,
    "job.rebalance": "yes", "straggler.node": 2, "straggler.factor": "4x",
    "hosts.datagram_cost": 0, "hosts.gpu_speed": "fast",
    "pbox.cores": 8.0, "pbox.packets_per_core": "1e6",
    "switch.pipeline_latency": 1, "switch.slots": "128", "switch.spine_slots": 1.0,
    "job.model": 50, "job.scale": "0.5", "job.elements": 1.5, "job.iterations": "2",
    "job.lanes": "64", "job.schedule": 1, "job.paths": "switch", "job.window": "32",
    "job.classes": 8.0, "job.class_window": [16], "job.slice_params": "40k",
    "job.rto_max": 0.2,
    "run.tier": 1, "run.seed": "0", "run.memory": 8,
}
# values of the right type but out of range, unknown or malformed, per field
OUT_OF_RANGE: dict[str, list[Any]] = {
    "topology.kind": ["torus", "Rack"],
    "topology.workers": [0, 4097],
    "topology.racks": [0, 1025],
    "topology.spines": [0, 65],
    "topology.pboxes": [-1, 17],
    "topology.pods": [0, 1025],
    "links.core_oversubscription": [0.5, 0.0, float("inf")],
    "links.bandwidth": ["0Gbit", "10", "10GB", "fast", "1e999Gbit"],
    "links.fabric_bandwidth": ["0bit", "-1Gbit", "10Gbyte"],
    "links.oversubscription": [0.5, 0.0, float("inf"), float("nan")],
    "links.delay": ["-1us", "1", "1min"],
    "links.queue": ["0B", "512", "1.5B", "512kb"],
    "links.loss": [-0.1, 1.0],
    "links.duplicate": [-0.01, 1.0],
    "links.reorder": [1.5, float("nan")],
    "links.overhead": ["-1B", "66", "1.5B"],
    "links.pbox_bandwidth": ["0bit", "5"],
    "job.rebalance": [1, "true"],
    "straggler.node": ["x1", "w0", "p1", "p0.1", "s1"],
    "straggler.factor": [0.5, float("inf")],
    "hosts.datagram_cost": ["-1ns", "1 hour"],
    "hosts.gpu_speed": [0, -1.0, float("inf")],
    "pbox.cores": [0, 257],
    "pbox.packets_per_core": [0, -5],
    "switch.pipeline_latency": ["-1ns", "1Gbit"],
    "switch.slots": [0, 65537],
    "switch.spine_slots": [-1, 65537],
    "job.model": ["resnet51", ""],
    "job.scale": [0, 1.5, -0.1],
    "job.elements": [-1, 2**31],
    "job.iterations": [0, 1001],
    "job.lanes": [0, 128, 512],
    "job.schedule": ["lifo", "P3"],
    "job.paths": [[], ["tree"], ["ring", "ring"], [1]],
    "job.window": [0, 65537],
    "job.classes": [0, 65],
    "job.class_window": [0, 65537],
    "job.slice_params": [0, -40000],
    "job.rto_max": ["0s", "-1s", "200", "10ms"],  # 10 ms: below the first timeout, 20 ms
    "run.tier": ["Q", "m"],
    "run.seed": [-1, 2**63],
    "run.memory": ["0B", "8 gallons", "0.5B"],
}


def test_every_field_has_its_refusal_cases():
    """A field added to the schema without cases here fails this test."""
    assert sorted(WRONG_TYPE) == sorted(FIELDS)
    assert sorted(OUT_OF_RANGE) == sorted(FIELDS)


def test_the_base_scenario_is_valid():
    (s,) = scenario.parse(base(), SOURCE)
    assert s.topology.total_workers == 8 and s.job.paths == ("switch", "ps")
    assert s.name == "case" and s.source == SOURCE and s.point == {}


@pytest.mark.parametrize("key", REQUIRED)
def test_a_missing_required_field_is_refused(key: str):
    section, name = key.split(".")
    raw = base()
    del raw[section][name]
    error = refused(raw)
    assert error.field == key and "missing" in error.reason
    assert str(error).startswith(f"{SOURCE}: [{key}] ")


@pytest.mark.parametrize("section", list(scenario.SCHEMA))
def test_an_unknown_field_is_refused_in_every_section(section: str):
    error = refused(with_value(section, "colour", 1))
    assert error.field == f"{section}.colour" and "unknown field" in error.reason


@pytest.mark.parametrize("key", FIELDS)
def test_a_wrong_type_is_refused(key: str):
    section, name = key.split(".")
    error = refused(with_value(section, name, WRONG_TYPE[key]))
    assert error.field == key, str(error)
    assert error.path == SOURCE


@pytest.mark.parametrize(("key", "value"), [(k, v) for k, vs in OUT_OF_RANGE.items() for v in vs])
def test_an_out_of_range_value_is_refused(key: str, value: Any):
    section, name = key.split(".")
    error = refused(with_value(section, name, value))
    assert error.field == key, str(error)
    assert str(error).startswith(f"{SOURCE}: [{key}] ")


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("topology.workers", 4096, 4096), ("topology.racks", 1024, 1024),
    ("topology.spines", 64, 64), ("topology.pboxes", 16, 16),
    ("links.delay", "0s", 0.0), ("links.loss", 0.999, 0.999), ("hosts.gpu_speed", 2, 2.0),
    ("pbox.cores", 256, 256), ("switch.slots", 65536, 65536), ("job.scale", 1, 1.0),
    ("job.lanes", 256, 256), ("job.iterations", 1000, 1000), ("run.tier", "F", "F"),
    ("run.memory", "512MiB", 512 * 2**20), ("job.schedule", "p3", "p3"),
    ("job.rto_max", "20ms", 0.02), ("job.rto_max", "200ms", 0.2),
    ("switch.spine_slots", 65536, 65536),
])
def test_values_at_the_edges_are_accepted(key: str, value: Any, expected: Any):
    section, name = key.split(".")
    raw = with_value(section, name, value)
    raw["job"]["paths"] = ["ring", "ps"]  # the slot aggregators' own limits are tested below
    (s,) = scenario.parse(raw, SOURCE)
    assert s.value(key) == expected


def test_defaults():
    (s,) = scenario.parse(base(), SOURCE)
    assert (s.topology.spines, s.topology.pboxes) == (1, 1)
    assert s.links.delay == pytest.approx(1e-6) and s.links.queue == 512_000
    assert (s.links.loss, s.links.duplicate, s.links.reorder) == (0.0, 0.0, 0.0)
    assert (s.hosts.datagram_cost, s.hosts.gpu_speed) == (0.0, 1.0)
    assert (s.pbox.cores, s.pbox.packets_per_core) == (8, 1e6)
    assert s.switch.pipeline_latency == pytest.approx(1e-6) and s.switch.slots == 4096
    assert (s.job.scale, s.job.elements, s.job.iterations, s.job.lanes, s.job.schedule) == (
        1.0, 0, 2, 64, "fifo")
    assert (s.run.tier, s.run.seed, s.run.memory) == ("M", 0, 8 * 2**30)
    assert s.job.rto_max == 1.0  # the sessions' own default (SessionConfig.rto_max)
    assert s.switch.spine_slots == 0  # the spines as the leaves


# -- the file as a whole ------------------------------------------------------------------


def test_unknown_section_and_non_table_section_are_refused():
    assert refused({**base(), "network": {}}).field == "network"
    assert refused({**base(), "links": "10Gbit"}).field == "links"


@pytest.mark.parametrize("name", ["a b", "../x", "", 3, "-lead"])
def test_a_bad_name_is_refused(name: Any):
    assert refused({**base(), "name": name}).field == "name"


def test_the_name_defaults_to_the_file_stem_and_may_be_given():
    assert scenario.parse(base(), Path("dir/rack-8.toml"))[0].name == "rack-8"
    assert scenario.parse({**base(), "name": "mine_1.0"}, SOURCE)[0].name == "mine_1.0"


def test_load_reads_a_file_and_refuses_bad_toml_and_missing_files(tmp_path: Path):
    good = tmp_path / "good.toml"
    good.write_text('[topology]\nkind = "rack"\nworkers = 8\n[links]\nbandwidth = "10Gbit"\n'
                    '[job]\nmodel = "synthetic"\nelements = 1024\npaths = ["switch"]\n')
    (s,) = scenario.load(good)
    assert (s.name, s.topology.kind, s.job.elements, s.source) == ("good", "rack", 1024, good)
    bad = tmp_path / "bad.toml"
    bad.write_text("[topology\nkind = 1\n")
    with pytest.raises(ScenarioError, match=r"bad\.toml: not valid TOML"):
        scenario.load(bad)
    with pytest.raises(ScenarioError, match=r"missing\.toml: cannot read the scenario"):
        scenario.load(tmp_path / "missing.toml")


def test_scenario_error_is_a_sim_error_and_a_value_error_and_pickles():
    error = refused(with_value("topology", "workers", 0))
    assert isinstance(error, SimError) and isinstance(error, ValueError)
    copy_ = pickle.loads(pickle.dumps(error))
    assert (copy_.path, copy_.field, copy_.reason, str(copy_)) == (
        error.path, error.field, error.reason, str(error))


# -- checks across fields -----------------------------------------------------------------


def rack() -> dict[str, Any]:
    raw = base()
    raw["topology"] = {"kind": "rack", "workers": 8}
    return raw


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("topology.racks", 2, "leafspine"), ("topology.spines", 2, "leafspine"),
    ("links.fabric_bandwidth", "10Gbit", "no fabric"), ("links.oversubscription", 2.0, "no fabric"),
])
def test_a_rack_refuses_fabric_fields(key: str, value: Any, reason: str):
    section, name = key.split(".")
    raw = rack()
    raw[section][name] = value
    error = refused(raw)
    assert error.field == key and reason in error.reason


def test_a_rack_of_one_rack_and_one_spine_is_fine():
    raw = rack()
    raw["topology"].update(racks=1, spines=1)
    (s,) = scenario.parse(raw, SOURCE)
    assert s.links.oversubscription == 1.0 and s.links.fabric_bandwidth == s.links.bandwidth


def test_fabric_bandwidth_and_oversubscription_exclude_each_other_and_derive_each_other():
    raw = base()
    raw["topology"].update(workers=16, spines=2)
    raw["links"].update(fabric_bandwidth="40Gbit", oversubscription=2.0)
    assert refused(raw).field == "links.oversubscription"
    del raw["links"]["fabric_bandwidth"]
    (s,) = scenario.parse(raw, SOURCE)
    assert s.links.fabric_bandwidth == pytest.approx(16 * 10e9 / (2 * 2.0))
    raw["links"] = {"bandwidth": "10Gbit", "fabric_bandwidth": "40Gbit"}
    (s,) = scenario.parse(raw, SOURCE)
    assert s.links.oversubscription == pytest.approx(16 * 10e9 / (2 * 40e9))
    raw["links"] = {"bandwidth": "10Gbit"}  # default: uplinks as fast as host links
    (s,) = scenario.parse(raw, SOURCE)
    assert s.links.fabric_bandwidth == 10e9 and s.links.oversubscription == pytest.approx(8.0)


@pytest.mark.parametrize("path", scenario.PBOX_PATHS)
def test_a_pbox_path_needs_pboxes(path: str):
    raw = with_value("topology", "pboxes", 0)
    raw["job"]["paths"] = ["switch", path]
    error = refused(raw)
    assert error.field == "job.paths" and path in error.reason
    raw["job"]["paths"] = ["switch", "ring"]
    assert scenario.parse(raw, SOURCE)[0].topology.pboxes == 0


def test_synthetic_needs_elements_and_takes_no_scale_and_profiles_take_no_elements():
    raw = with_value("job", "model", "synthetic")
    assert refused(raw).field == "job.elements"
    raw["job"]["elements"] = 524288
    assert scenario.parse(raw, SOURCE)[0].job.elements == 524288
    raw["job"]["scale"] = 0.5
    assert refused(raw).field == "job.scale"
    error = refused(with_value("job", "elements", 100))  # model resnet50
    assert error.field == "job.elements" and "synthetic" in error.reason


@pytest.mark.parametrize("model", ["resnet50", "vgg19", "bert_base"])
def test_every_bundled_profile_is_a_model(model: str):
    assert scenario.parse(with_value("job", "model", model), SOURCE)[0].job.model == model


@pytest.mark.parametrize(("lanes", "smallest"), [(64, 66 + 20 + 256), (256, 66 + 20 + 1024)])
def test_the_queue_holds_at_least_one_frame(lanes: int, smallest: int):
    raw = with_value("job", "lanes", lanes)
    raw["links"]["queue"] = f"{smallest - 1}B"
    assert refused(raw).field == "links.queue"
    raw["links"]["queue"] = f"{smallest}B"
    assert scenario.parse(raw, SOURCE)[0].links.queue == smallest


def test_an_aggregator_sums_at_most_32_members_in_every_tier():
    """The cells' bitmaps of aggregate.p4 and of the PBox core: a flat job (one PBox, one
    rack) holds 32 ranks; a fabric's switch path is a tree of up to 32 racks of 32 (in
    tier P, up to the controller's fabric description's 99 workers)."""
    for tier in ("P", "M", "F"):
        for path in ("switch", "pbox"):
            raw = with_value("run", "tier", tier)
            raw["switch"] = {"slots": 1024}
            raw["job"]["paths"] = [path]
            raw["topology"].update(workers=16, racks=2)
            assert scenario.parse(raw, SOURCE)[0].topology.total_workers == 32
            raw["topology"].update(workers=11, racks=3)
            if path == "switch":
                assert scenario.parse(raw, SOURCE)[0].topology.total_workers == 33
                continue
            error = refused(raw)
            assert error.field == "topology.workers" and "at most 32" in error.reason
        raw = with_value("run", "tier", tier)
        raw["job"]["paths"] = ["switch"]
        raw["topology"] = {"kind": "rack", "workers": 33}
        error = refused(raw)
        assert error.field == "topology.workers" and "at most 32" in error.reason
        assert "one aggregator" in error.reason
    raw = with_value("run", "tier", "P")
    raw["switch"] = {"slots": 1024}
    raw["job"]["paths"] = ["switch"]
    raw["topology"].update(workers=25, racks=4)
    error = refused(raw)
    assert error.field == "topology.workers" and "at most 99 workers" in error.reason
    raw = with_value("run", "tier", "M")
    raw["job"]["paths"] = ["switch"]
    raw["topology"].update(workers=32, racks=32)
    assert scenario.parse(raw, SOURCE)[0].topology.total_workers == 1024
    raw["topology"].update(workers=33, racks=2)
    error = refused(raw)
    assert error.field == "topology.workers" and "a rack" in error.reason
    raw["topology"].update(workers=2, racks=33)
    error = refused(raw)
    assert error.field == "topology.racks" and "33 racks" in error.reason
    raw = base()
    raw["job"]["paths"] = ["ring", "ps"]  # no slot aggregation: no such limit
    raw["topology"].update(workers=64, racks=16)
    assert scenario.parse(raw, SOURCE)[0].topology.total_workers == 1024


def test_tier_p_keeps_to_the_switch_program_and_the_controllers_topologies():
    raw = with_value("run", "tier", "P")
    assert refused(raw).field == "switch.slots"  # the default 4096 > aggregate.p4's 1024
    raw["switch"] = {"slots": 1024}
    assert scenario.parse(raw, SOURCE)[0].switch.slots == 1024
    for key, value in (("racks", 9), ("spines", 5), ("pboxes", 2)):
        bad = copy.deepcopy(raw)
        bad["topology"].update({key: value, "workers": 2})  # at most 32 workers in all
        assert refused(bad).field == f"topology.{key}"
    rack = copy.deepcopy(raw)
    rack["topology"] = {"kind": "rack", "workers": 4, "pboxes": 9}
    assert refused(rack).field == "topology.pboxes"
    raw["job"]["paths"] = ["ring", "ps"]  # no slot aggregation: none of this applies
    raw["topology"].update(racks=9, spines=5, pboxes=2)
    raw["switch"] = {"slots": 4096}
    assert scenario.parse(raw, SOURCE)[0].topology.racks == 9
    raw["run"]["tier"] = "M"  # the model switch and the simulator's own placement
    raw["job"]["paths"] = ["switch"]
    raw["topology"]["workers"] = 2
    assert scenario.parse(raw, SOURCE)[0].run.tier == "M"


def test_a_straggler_names_a_node_of_the_topology():
    raw = base()  # 2 racks of 4 workers, one PBox a rack
    raw["straggler"] = {"node": "w8", "factor": 4.0}
    assert scenario.parse(raw, SOURCE)[0].straggler.node == "w8"
    for node in ("w9", "p3.1", "p1.2"):
        raw["straggler"]["node"] = node
        error = refused(raw)
        assert error.field == "straggler.node" and node in error.reason
    raw["straggler"] = {"factor": 2.0}
    assert refused(raw).field == "straggler.factor"
    raw["straggler"] = {"node": "p2.1"}  # factor 1: the link at its rate
    assert scenario.parse(raw, SOURCE)[0].straggler.factor == 1.0


def test_the_job_needs_no_more_slots_than_the_switch_has():
    raw = with_value("switch", "slots", 128)
    raw["job"]["window"] = 129
    assert refused(raw).field == "job.window"
    raw["job"].update(window=128, schedule="p3", classes=8, class_window=17)
    assert refused(raw).field == "job.class_window"
    raw["job"]["class_window"] = 16
    assert scenario.parse(raw, SOURCE)[0].job.class_window == 16


# -- sweeps -------------------------------------------------------------------------------


def test_a_sweep_is_the_cartesian_product_in_order():
    raw = {**base(), "sweep": {"topology.workers": [2, 4, 8],
                               "links.bandwidth": ["10Gbit", "100Gbit"]}}
    points = scenario.parse(raw, SOURCE)
    assert [(p.topology.workers, p.links.bandwidth) for p in points] == [
        (w, b) for w in (2, 4, 8) for b in (10e9, 100e9)]
    assert points[1].point == {"topology.workers": 2, "links.bandwidth": "100Gbit"}
    assert points[1].label == "case workers=2 bandwidth=100Gbit"
    assert points[1].value("links.bandwidth") == 100e9
    assert all(p.name == "case" for p in points)


@pytest.mark.parametrize(("sweep", "field", "reason"), [
    ({"topology.colour": [1]}, 'sweep."topology.colour"', "not a scenario field"),
    ({"workers": [1]}, 'sweep."workers"', "not a scenario field"),
    ({"topology.workers": 8}, 'sweep."topology.workers"', "non-empty array"),
    ({"topology.workers": []}, 'sweep."topology.workers"', "non-empty array"),
    ({"topology.workers": [4, 4]}, 'sweep."topology.workers"', "listed twice"),
    ({"topology.workers": [4, 0]}, 'sweep."topology.workers"[1]', "out of range"),
    ({"links.bandwidth": ["1Gbit", "1GB"]}, 'sweep."links.bandwidth"[1]', "unit"),
    ({"job.paths": [["ring"]]}, 'sweep."job.paths"', "cannot be swept"),
])
def test_bad_sweeps_are_refused(sweep: dict[str, Any], field: str, reason: str):
    error = refused({**base(), "sweep": sweep})
    assert error.field == field and reason in error.reason, str(error)


def test_a_sweep_that_is_not_a_table_is_refused():
    assert refused({**base(), "sweep": [1]}).field == "sweep"


def test_a_point_that_breaks_a_cross_check_names_the_point():
    raw = {**base(), "sweep": {"topology.pboxes": [1, 0]}}
    error = refused(raw)
    assert error.field == "job.paths" and "topology.pboxes = 0" in error.reason


def test_a_sweep_too_large_is_refused():
    raw = {**base(), "sweep": {"topology.workers": list(range(1, 102)),
                               "job.iterations": list(range(1, 101))}}
    assert refused(raw).field == "sweep"


def test_with_fields_revalidates_and_keeps_the_point():
    raw = {**base(), "sweep": {"topology.workers": [2, 4]}}
    point = scenario.parse(copy.deepcopy(raw), SOURCE)[1]
    single = scenario.with_fields(point, {"job.paths": ["ring"], "run.tier": "F"})
    assert single.job.paths == ("ring",) and single.run.tier == "F"
    assert single.topology.workers == 4 and single.point == {"topology.workers": 4}
    assert point.job.paths == ("switch", "ps")  # the original is untouched
    moved = scenario.with_fields(point, {"topology.workers": 16})
    assert moved.point == {"topology.workers": 16} and moved.topology.total_workers == 32
    with pytest.raises(ScenarioError) as caught:
        scenario.with_fields(point, {"topology.pboxes": 0})
    assert caught.value.field == "job.paths"
    with pytest.raises(ScenarioError) as caught:
        scenario.with_fields(point, {"topology.size": 3})
    assert caught.value.field == "topology.size"


def test_scenarios_pickle_for_worker_processes():
    (s,) = scenario.parse(base(), SOURCE)
    assert pickle.loads(pickle.dumps(s)) == s


# -- units --------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "bits"), [
    ("10Gbit", 10e9), ("5Mbit", 5e6), ("100kbit", 1e5), ("1Tbit", 1e12), ("12bit", 12.0),
    ("2.5Gbit", 2.5e9), ("10gbit", 10e9), ("10Gbps", 10e9), ("1e2Mbit", 1e8), (" 1 Gbit ", 1e9),
])
def test_bandwidths(text: str, bits: float):
    assert units.bandwidth(text) == pytest.approx(bits)


@pytest.mark.parametrize(("text", "seconds"), [
    ("1us", 1e-6), ("1µs", 1e-6), ("250ns", 250e-9), ("2ms", 2e-3), ("1.5s", 1.5), ("0us", 0.0),
])
def test_durations(text: str, seconds: float):
    assert units.duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "size"), [
    ("512KB", 512_000), ("8GiB", 8 * 2**30), ("1500B", 1500), ("1.5KB", 1500), ("0.3KB", 300),
    ("2MiB", 2 * 2**20), ("1MB", 10**6), ("1e3B", 1000),
])
def test_sizes(text: str, size: int):
    assert units.size(text) == size and isinstance(units.size(text), int)


@pytest.mark.parametrize(("parse", "text"), [
    (units.bandwidth, "10"), (units.bandwidth, "10GB"), (units.bandwidth, 10),
    (units.bandwidth, "Gbit"), (units.duration, "1 us us"), (units.duration, "1US"),
    (units.duration, True), (units.size, "1.5B"), (units.size, "512kb"), (units.size, "512 Kb"),
    (units.size, "-1B"),
])
def test_malformed_quantities_are_refused(parse: Any, text: Any):
    with pytest.raises(ValueError):
        parse(text)


def test_formats():
    assert units.format_bandwidth(100e9) == "100Gbit" and units.format_bandwidth(5e6) == "5Mbit"
    assert units.format_duration(0.0123) == "12.3 ms" and units.format_duration(2e-7) == "200 ns"


# -- the shipped scenarios ----------------------------------------------------------------

SHIPPED = sorted((REPO / "sim" / "scenarios").glob("*.toml"))


def test_the_scenarios_are_shipped():
    assert {p.stem for p in SHIPPED} >= {"default", "rack-4-emulator", "sweep-workers"}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_scenario_parses(path: Path):
    points = scenario.load(path)
    assert points and all(p.name == path.stem for p in points)


def test_the_default_scenario_is_the_documented_one():
    (s,) = scenario.load(REPO / "sim" / "scenarios" / "default.toml")
    assert (s.topology.kind, s.topology.racks, s.topology.workers, s.topology.spines) == (
        "leafspine", 2, 32, 2)
    assert s.topology.total_workers == 64 and s.links.bandwidth == 1e9
    assert s.job.model == "resnet50" and s.job.paths == ("switch", "ring", "ps")


def test_the_emulator_scenario_matches_the_emulator():
    (s,) = scenario.load(REPO / "sim" / "scenarios" / "rack-4-emulator.toml")
    assert s.topology.total_workers == 4 and s.links.bandwidth == 5e6 and s.run.tier == "P"
    assert s.job.model == "synthetic" and s.job.elements * 4 == 2 * 2**20


def test_the_worker_sweep_runs_4_to_32_workers():
    points = scenario.load(REPO / "sim" / "scenarios" / "sweep-workers.toml")
    assert [p.topology.total_workers for p in points] == [4, 8, 16, 32]


def test_the_scale_sweep_runs_64_to_1024_workers_as_two_level_trees():
    points = scenario.load(REPO / "sim" / "scenarios" / "sweep-scale.toml")
    assert [s.topology.total_workers for s in points] == [64, 128, 256, 512, 1024]
    assert all(s.topology.workers == 32 and s.run.tier == "F" for s in points)


def test_the_elastic_scenario_is_the_emulators_benchmark():
    """bench/elastic.py's workers all-reduce ResNet-50 x 0.005 fused into one tensor
    (--fuse) with --rto-max 0.2 for 8 iterations: the scenario the validation runs."""
    from p4hub.workers import workload

    points = scenario.load(REPO / "sim" / "scenarios" / "elastic-straggler.toml")
    assert len(points) == 4
    for s in points:
        assert s.job.model == "synthetic" and s.job.rto_max == 0.2 and s.job.iterations == 8
        assert s.job.elements == sum(workload.layer_sizes("resnet50", 0.005))
        assert s.links.bandwidth == 2.5e6 and s.links.pbox_bandwidth == 5e6
        assert s.topology.total_workers == 4 and s.topology.pboxes == 3


def test_narrowed_spines_are_for_tier_ps_fabric() -> None:
    """switch.spine_slots narrows the spines for the controller's placement, which only
    tier P runs, and a rack has no spine."""
    raw = with_value("switch", "spine_slots", 1)
    raw["switch"]["slots"] = 1024
    raw["run"] = {"tier": "P"}
    assert scenario.parse(raw, SOURCE)[0].switch.spine_slots == 1
    for tier in ("M", "F"):
        raw["run"] = {"tier": tier}
        error = refused(raw)
        assert error.field == "switch.spine_slots" and "tier P" in error.reason
    raw["run"] = {"tier": "P"}
    raw["topology"] = {"kind": "rack", "workers": 4}
    error = refused(raw)
    assert error.field == "switch.spine_slots" and "no spine" in error.reason


@pytest.mark.parametrize("layout", ["2x4", "4x2"])
def test_the_fabric_scenarios_are_the_emulators_benchmark(layout: str) -> None:
    """bench/hierarchy.py's setup, read from its own defaults: each layout's racks and
    workers, every link at its --bw, ResNet-50 x its --scale fused into one tensor (make
    run --mode allreduce without --per-layer), its --lanes and --iterations, the
    controller's default job slots (the window), the agents' default largest timeout;
    the switch path rooted at a PBox by a spine without room, as its pbox-root path."""
    from bench import hierarchy
    from p4hub.workers import workload

    args = hierarchy.parse_args([])
    assert layout in args.layouts
    racks, per_rack = hierarchy.layout(layout)
    ns = hierarchy.run_args(args, racks, per_rack)
    points = scenario.load(REPO / "sim" / "scenarios" / f"fabric-{layout}.toml")
    assert [p.switch.spine_slots for p in points] == [0, 1]
    for s in points:
        assert (s.topology.kind, s.topology.racks, s.topology.workers) == (
            "leafspine", racks, per_rack)
        assert (s.topology.spines, s.topology.pboxes) == (ns.spines, 1)
        assert s.links.bandwidth == s.links.pbox_bandwidth == s.links.fabric_bandwidth \
            == args.bw * 1e6
        assert s.links.overhead == 42  # the emulator's shapers (bench/sim_validation.py)
        assert not ns.per_layer and s.job.model == "synthetic"
        assert s.job.elements == sum(workload.layer_sizes(ns.model, ns.scale))
        assert (s.job.lanes, s.job.iterations) == (ns.lanes, ns.iterations)
        assert s.job.window == ns.job_slots == 32  # the controller's job slots: the window
        assert ns.rto_max == 0 and s.job.rto_max == 1.0  # the agents' default
        assert s.job.paths == ("switch", "pbox", "ring")
