"""p4hub.controller.core.doctor: each finding from hand-made snapshots (no switch, no clock)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from p4hub.controller.core import program as p
from p4hub.controller.core.doctor import (
    ERROR,
    INFO,
    WARNING,
    Cell,
    JobView,
    Member,
    PBoxView,
    SwitchView,
    diagnose,
    ended_report,
    render,
)

EPOCH = 7
PARAMS = (("world_size", 3), ("slot_base", 4), ("slot_count", 2), ("lane_code", 0),
          ("mcast_grp", 5), ("name_tag", 99), ("epoch", EPOCH))
GROUP = ((1, 160), (2, 161), (3, 162))


def job(**changes) -> JobView:
    base = JobView(
        job_id=5, name="resnet", world_size=3, where="switch", switch="s1", pbox="pb1",
        slot_base=4, slot_count=2, epoch=EPOCH, lanes=64, worker_timeout=30.0,
        members=tuple(Member(r, f"10.0.0.{r + 1}:4000", 1.0) for r in range(3)),
        expected_action=p.ACT_JOB_ON_SWITCH, expected_params=PARAMS, expected_group=GROUP,
    )
    return replace(base, **changes)


def cells(*open_: tuple[int, int, int, int]) -> tuple[Cell, ...]:
    """The job's four cells, complete unless listed as (slot, shadow, bitmap, counter)."""
    given = {(s, sh): (b, c) for s, sh, b, c in open_}
    return tuple(Cell(s, sh, EPOCH, *given.get((s, sh), (0b111, 0)))
                 for s in (4, 5) for sh in (0, 1))


def switch(**changes) -> SwitchView:
    base = SwitchView(
        job_action=p.ACT_JOB_ON_SWITCH, job_params=PARAMS, member_ranks=frozenset({0, 1, 2}),
        result_ranks=frozenset({0, 1, 2}), group=GROUP, cells=cells(),
        job_stats={"contributions": 300, "duplicates": 3, "completions": 100, "rejected": 0},
        agg_errors={"unknown_job": 0, "spoofed_source": 0},
    )
    return replace(base, **changes)


def codes(report) -> list[str]:
    return [f.code for f in report.findings]


def the(report, code: str):
    (finding,) = [f for f in report.findings if f.code == code]
    return finding


def test_a_job_with_nothing_wrong_is_healthy():
    report = diagnose(job(), switch(), None)
    assert report.healthy and codes(report) == ["healthy"]
    assert report.open_cells == ()
    assert render(report.as_dict()) == "info   job 5: healthy"


def test_a_rank_missing_from_every_open_cell_is_named_with_a_bitmap_dump():
    report = diagnose(job(), switch(cells=cells((4, 1, 0b011, 2), (5, 0, 0b011, 2))), None)
    assert not report.healthy
    finding = the(report, "ranks-not-contributing")
    assert (finding.severity, finding.ranks) == (ERROR, (2,))
    assert finding.message.startswith("rank(s) 2 have not contributed to any of the 2 open "
                                      "cell(s) of job 5")
    assert "slot 4/1: has 0, 1, waits for 2" in finding.message
    assert [(c.slot, c.shadow, c.missing) for c in report.open_cells] == [(4, 1, (2,)), (5, 0, (2,))]
    text = render(report.as_dict())
    assert "  4/1  2  0x00000003  2" in text.splitlines()


def test_open_cells_that_moved_between_the_two_reads_are_rounds_in_flight():
    before = cells((4, 0, 0b001, 1), (5, 0, 0b100, 1))
    now = cells((4, 0, 0b011, 2), (5, 0, 0b110, 2))
    report = diagnose(job(), switch(cells=now, cells_before=before), None, settle=1.0)
    assert report.healthy
    assert the(report, "rounds-in-flight").severity == INFO
    assert [c.stuck for c in report.open_cells] == [False, False]


def test_stuck_cells_waiting_for_different_ranks_are_a_warning():
    stuck = cells((4, 0, 0b011, 2), (5, 0, 0b110, 2))
    report = diagnose(job(), switch(cells=stuck, cells_before=stuck), None, settle=1.0)
    finding = the(report, "cells-stuck")
    assert (finding.severity, finding.ranks) == (WARNING, (0, 2))
    assert finding.message.startswith("2 open cell(s) of job 5, unchanged for 1 s; cells each "
                                      "rank has not contributed to: rank 0: 1, rank 2: 1")
    assert "ranks-not-contributing" not in codes(report)


def test_cells_of_another_job_instance_are_not_open():
    stale = tuple(replace(c, owner=EPOCH - 1, bitmap=0b1, counter=1) for c in cells())
    assert diagnose(job(), switch(cells=stale), None).open_cells == ()


def test_unreadable_registers_are_said_not_guessed():
    report = diagnose(job(), switch(cells=None, cells_error="UNIMPLEMENTED: no registers"), None)
    assert report.healthy and report.open_cells is None
    assert "UNIMPLEMENTED: no registers" in the(report, "slots-unread").message


def test_a_silent_member_is_named_with_its_silence_before_the_controller_ends_the_job():
    members = (Member(0, "10.0.0.1:4000", 1.0), Member(1, "10.0.0.2:4000", 12.5),
               Member(2, "10.0.0.3:4000", 2.0))
    finding = the(diagnose(job(members=members), switch(), None), "worker-silent")
    assert (finding.severity, finding.ranks) == (ERROR, (1,))
    assert finding.message == ("rank 1 (10.0.0.2:4000) has not been heard from for 12.5 s; the "
                               "controller ends the job after 30 s (17.5 s left)")


def test_ranks_that_never_joined_block_every_round():
    finding = the(diagnose(job(members=job().members[:1]), switch(member_ranks=frozenset({0}),
                                                                  result_ranks=frozenset({0})),
                           None), "ranks-not-joined")
    assert finding.ranks == (1, 2) and "1 of 3 ranks joined" in finding.message


@pytest.mark.parametrize(("change", "code", "words"), [
    ({"job_action": None}, "job-entry-missing", "dropped as an unknown job"),
    ({"job_params": (*PARAMS[:-1], ("epoch", 8))}, "job-entry-differs", "epoch=8 (want 7)"),
    ({"job_action": p.ACT_JOB_ON_PBOX}, "job-entry-differs", "action MyIngress.job_on_pbox"),
    ({"member_ranks": frozenset({0, 2})}, "member-entry-missing", "rank(s) 1: their contributions"),
    ({"result_ranks": frozenset({0, 1})}, "result-entry-missing", "rank(s) 2: results"),
    ({"group": None}, "group-missing", "no multicast group 5"),
    ({"group": GROUP[:2]}, "group-differs", "(port, rid) [(1, 160), (2, 161)]"),
    ({"error": "switch s1: UNAVAILABLE"}, "switch-unreachable", "could not be read"),
])
def test_what_the_switch_lacks_or_holds_differently_is_an_error(change, code, words):
    report = diagnose(job(), switch(**change), None)
    assert not report.healthy
    finding = the(report, code)
    assert finding.severity == ERROR and words in finding.message


def test_entries_for_ranks_the_controller_does_not_know_are_a_warning():
    finding = the(diagnose(job(), switch(member_ranks=frozenset({0, 1, 2, 3})), None),
                  "stale-member-entries")
    assert (finding.severity, finding.ranks) == (WARNING, (3,))


def test_a_group_that_cannot_be_read_back_is_only_information():
    report = diagnose(job(), switch(group=None, group_error="UNIMPLEMENTED"), None)
    assert report.healthy and the(report, "group-unread").severity == INFO


def test_drop_counters_by_reason():
    sw = switch(job_stats={"contributions": 10, "duplicates": 5, "rejected": 4},
                agg_errors={"unknown_job": 9, "spoofed_source": 2})
    report = diagnose(job(), sw, None)
    assert the(report, "switch-rejected").severity == WARNING
    assert "rejected 4 packet(s) of job 5: not a member" in the(report, "switch-rejected").message
    assert "slot outside 4..5" in the(report, "switch-rejected").message
    assert the(report, "spoofed-source").severity == WARNING
    assert the(report, "unknown-job-drops").severity == INFO
    assert "dropped 9 contribution(s)" in the(report, "unknown-job-drops").message
    assert the(report, "retransmissions").message.startswith("5 of 15 contributions")
    assert codes(report)[:2] == ["switch-rejected", "spoofed-source"]  # warnings before info


def test_no_contribution_yet_is_information():
    report = diagnose(job(), switch(job_stats={"contributions": 0}), None)
    assert report.healthy and "no-contributions" in codes(report)


PBOX_JOB = {"job_id": 5, "world_size": 3, "slot_base": 4, "slot_count": 2, "lanes": 64}


def pbox_job(**changes) -> JobView:
    return job(where="pbox", epoch=0, expected_action=p.ACT_JOB_ON_PBOX, expected_group=None,
               **changes)


def test_a_healthy_pbox_job_ignores_the_switch_registers():
    sw = switch(job_action=p.ACT_JOB_ON_PBOX, job_params=PARAMS, group=None,
                cells=None, job_stats={"forwarded": 10})
    report = diagnose(pbox_job(expected_params=PARAMS), sw, PBoxView("pb1", job=PBOX_JOB,
                                                                     stats={"rejected": {}},
                                                                     cells=()))
    assert report.healthy and report.open_cells == (), report.findings
    assert codes(report) == ["healthy"]


def test_a_pbox_job_is_diagnosed_from_the_pbox_cells():
    sw = switch(job_action=p.ACT_JOB_ON_PBOX, group=None, cells=None, job_stats={})
    pbox = PBoxView("pb1", job=PBOX_JOB, stats={}, cells=(Cell(5, 1, 0, 0b101, 2),))
    report = diagnose(pbox_job(expected_params=PARAMS), sw, pbox)
    assert the(report, "ranks-not-contributing").ranks == (1,)
    assert [(c.slot, c.shadow, c.missing) for c in report.open_cells] == [(5, 1, (1,))]
    unread = diagnose(pbox_job(expected_params=PARAMS), sw,
                      replace(pbox, cells=None, cells_error="unknown cmd 'open_cells'"))
    assert unread.healthy and "unknown cmd 'open_cells'" in the(unread, "slots-unread").message


@pytest.mark.parametrize(("pbox", "code", "words"), [
    (PBoxView("pb1", error="PBox at 10.0.0.100:7000: refused"), "pbox-unreachable", "refused"),
    (PBoxView("pb1"), "pbox-job-missing", "does not have job 5"),
    (PBoxView("pb1", job={**PBOX_JOB, "lanes": 256}), "pbox-job-differs", "lanes=256 (want 64)"),
    (PBoxView("pb1", job=PBOX_JOB, stats={"rejected": {"address": 3, "slot": 0}}),
     "pbox-rejected", "3 for address"),
])
def test_pbox_problems(pbox, code, words):
    sw = switch(job_action=p.ACT_JOB_ON_PBOX, group=None, cells=None, job_stats={})
    report = diagnose(pbox_job(expected_params=PARAMS), sw, pbox)
    assert not report.healthy and words in the(report, code).message


def test_an_ended_job_reports_why():
    report = ended_report(5, "job 5 ended 3.0 s ago: rank 2 (...) sent no heartbeat", 2)
    assert not report.healthy and report.findings[0].ranks == (2,)
    assert render(report.as_dict()).startswith("ERROR  job 5 ended 3.0 s ago: rank 2")


def test_a_recent_aggregator_change_is_named_without_making_the_job_unhealthy():
    moved = job(moves=((12.0, 5, "switch s1 restarted"),
                       (2.5, EPOCH, "its PBox is unreachable (refused); moved to switch s1")))
    report = diagnose(moved, switch(), None)
    assert report.healthy
    (finding,) = [f for f in report.findings if f.code == "aggregator-changed"]
    assert finding.message == ("the job's aggregator state was lost or moved 2.5 s ago: its PBox"
                               " is unreachable (refused); moved to switch s1; epoch 7, its "
                               "agents resynchronise on their next heartbeat (2 changes in all)")


def test_many_resends_are_a_warning_with_the_service_rate():
    report = diagnose(job(service=(1.5e6, 0.4)), switch(), None)
    (finding,) = [f for f in report.findings if f.code == "many-resends"]
    assert finding.message.startswith("40% of the job's packets are retransmissions (moving "
                                      "average over its workers' heartbeats, 1.500 MB/s")
    assert not report.healthy
    assert diagnose(job(service=(1.5e6, 0.05)), switch(), None).healthy
