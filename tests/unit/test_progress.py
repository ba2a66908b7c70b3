"""experiments/progress.py: bars with elapsed and remaining time on a terminal, nothing at
all otherwise (logs, pipes, CI), and P4HUB_PROGRESS to force either way."""

from __future__ import annotations

import io

import pytest

from p4hub.experiments import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def plain_env(monkeypatch):
    monkeypatch.delenv("P4HUB_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")


def test_off_a_terminal_it_yields_the_items_and_draws_nothing():
    out = io.StringIO()
    assert list(progress.track(range(3), "sizes", total=3, stream=out)) == [0, 1, 2]
    with progress.Phases(["rack", "paths"], "make run", stream=out) as phases:
        phases.next()
        phases.next()
    assert out.getvalue() == ""


@pytest.mark.parametrize("env,term", [("0", "xterm"), (None, "dumb")])
def test_a_terminal_can_be_kept_quiet(monkeypatch, env, term):
    if env is not None:
        monkeypatch.setenv("P4HUB_PROGRESS", env)
    monkeypatch.setenv("TERM", term)
    out = Terminal()
    assert list(progress.track([1, 2], "x", stream=out)) == [1, 2]
    assert out.getvalue() == "" and not progress.enabled(out)


def test_on_a_terminal_the_bar_counts_and_times():
    out = Terminal()
    assert list(progress.track(["a", "b", "c"], "all-reduce racks", stream=out)) == ["a", "b", "c"]
    text = out.getvalue()
    assert "all-reduce racks" in text and "3/3" in text
    assert "elapsed" in text and "left" in text and "0:00:0" in text


def test_forced_on_a_pipe(monkeypatch):
    monkeypatch.setenv("P4HUB_PROGRESS", "1")
    out = io.StringIO()
    list(progress.track(range(2), "forced", stream=out))
    assert "forced" in out.getvalue() and "2/2" in out.getvalue()


def test_phases_name_the_running_phase_and_stop_after_the_last():
    out = Terminal()
    with progress.Phases(["rack", "PBox and controller", "train over switch"], "make run",
                         stream=out) as phases:
        assert phases._label() == "make run: rack"
        phases.next()
        assert phases._label() == "make run: PBox and controller"
        phases.next()
        phases.next()
        assert phases.done == 3 and phases._progress is None  # put away after the last
        phases.next()  # one too many: harmless
    assert "3/3" in out.getvalue() and "make run: done" in out.getvalue()
