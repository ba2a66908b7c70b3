"""A worker that dies of a fatal signal leaves its Python stacks in its stderr, and
``make run``'s summary names the rank, its host, the signal and that log
(hosts/crashdump.py, experiments/exits.py)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from p4hub.experiments import train_run
from p4hub.experiments.exits import describe_exit, exit_problems, signal_name
from p4hub.experiments.launch import WorkerRun
from p4hub.topologies.rack import CRASH_DUMP_ENV

ROOT = Path(__file__).resolve().parents[2]
LOGS = {0: Path("logs/run/w1-switch.err"), 1: Path("logs/run/w2-switch.err")}
HOSTS = {0: "w1", 1: "w2"}

# A process with a second thread parked in a named function, then a SIGSEGV to itself:
# what a worker with a completion thread looks like when libtorch dereferences null.
DIE = """
import os, signal, threading
{enable}
parked = threading.Event()
def completion_thread_waits():
    parked.set()
    threading.Event().wait()
threading.Thread(target=completion_thread_waits, daemon=True).start()
parked.wait()
def reducer_dereferences_null():
    os.kill(os.getpid(), signal.SIGSEGV)
reducer_dereferences_null()
"""


def die_of_sigsegv(tmp_path: Path, enable: str, env: dict[str, str] | None = None
                   ) -> tuple[int, str]:
    err = tmp_path / "w2.err"
    with open(err, "w") as stderr:
        proc = subprocess.run([sys.executable, "-c", DIE.format(enable=enable)], cwd=ROOT,
                              stderr=stderr, env={**os.environ, "PYTHONPATH": str(ROOT),
                                                  **(env or {})}, timeout=60)
    return proc.returncode, err.read_text()


def assert_stacks_of_both_threads(text: str) -> None:
    assert "Fatal Python error: Segmentation fault" in text, text
    assert "reducer_dereferences_null" in text, text  # the crashing thread's stack
    assert "completion_thread_waits" in text, text  # and the other thread's


def test_the_helper_leaves_every_threads_stack_in_stderr(tmp_path):
    code, text = die_of_sigsegv(tmp_path, "from p4hub.hosts import crashdump; crashdump.enable()")
    assert code == -signal.SIGSEGV
    assert_stacks_of_both_threads(text)


def test_the_racks_environment_does_the_same_before_any_import(tmp_path):
    code, text = die_of_sigsegv(tmp_path, "", env=CRASH_DUMP_ENV)
    assert code == -signal.SIGSEGV
    assert_stacks_of_both_threads(text)


def test_without_either_a_crash_leaves_nothing(tmp_path):
    """The control: the stacks above come from the handler, not from Python itself."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    err = tmp_path / "w2.err"
    with open(err, "w") as stderr:
        proc = subprocess.run([sys.executable, "-c", DIE.format(enable="")], cwd=ROOT,
                              stderr=stderr, env={**env, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert proc.returncode == -signal.SIGSEGV
    assert "reducer_dereferences_null" not in err.read_text()


def test_the_entry_points_enable_it():
    """The training loop, the synthetic worker and the PBox turn it on first thing, so a
    process started by hand or by torchrun gets it without the rack's environment."""
    code = ("import faulthandler, importlib, sys\n"
            "for name in ('p4hub.workers.train.loop', 'p4hub.workers.worker', "
            "'p4hub.hosts.pbox.cli'):\n"
            "    faulthandler.disable()\n"
            "    try:\n"
            "        importlib.import_module(name).main(['--help'])\n"
            "    except SystemExit:\n"
            "        pass\n"
            "    print(name, faulthandler.is_enabled(), file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(ROOT)}, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("p4hub.")]
    assert lines == [f"{name} True" for name in ("p4hub.workers.train.loop",
                                                 "p4hub.workers.worker", "p4hub.hosts.pbox.cli")
                     ], proc.stderr[-2000:]


# -- the summary's words -------------------------------------------------------------


def test_signal_and_status_wording():
    assert signal_name(11) == "SIGSEGV"
    assert signal_name(99) == "signal 99"
    assert describe_exit(-11) == "killed by SIGSEGV"
    assert describe_exit(-6) == "killed by SIGABRT"
    assert describe_exit(1) == "exited with status 1"
    assert describe_exit(None) == "did not exit"


def test_a_segfault_is_named_with_its_rank_host_and_log():
    assert exit_problems({0: 0, 1: -11}, HOSTS, LOGS) == [
        "rank 1 (w2) killed by SIGSEGV; Python stacks in logs/run/w2-switch.err"]


def test_a_reported_error_is_not_named_twice_but_a_signal_always_is():
    reported = {0: "BackendError: ...", 1: "BackendError: ..."}
    assert exit_problems({0: 1, 1: -11}, HOSTS, LOGS, reported) == [
        "rank 1 (w2) killed by SIGSEGV; Python stacks in logs/run/w2-switch.err"]
    assert exit_problems({0: 1}, HOSTS, LOGS) == [
        "rank 0 (w1) exited with status 1; its stderr is in logs/run/w1-switch.err"]


def test_a_non_fatal_signal_points_at_stderr_not_at_stacks():
    """SIGKILL (the OOM killer) runs no handler: there are no stacks to point at."""
    assert exit_problems({1: -9}, HOSTS, LOGS) == [
        "rank 1 (w2) killed by SIGKILL; its stderr is in logs/run/w2-switch.err"]


def test_ranks_the_driver_killed_are_said_to_be_so():
    assert exit_problems({0: -9, 1: None}, HOSTS, LOGS, killed={0, 1}) == [
        "rank 0 (w1) was killed by the driver after the time-out; its stderr is in "
        "logs/run/w1-switch.err",
        "rank 1 (w2) was killed by the driver after the time-out; its stderr is in "
        "logs/run/w2-switch.err"]


def test_make_runs_training_summary_names_the_signal(monkeypatch):
    """The issue's case: rank 1 dies of SIGSEGV in the last step, rank 0 completes. The
    path's problems used to say ``workers exited with {1: -11}``."""
    args = argparse.Namespace(workers=2, batch=4, epochs=1, bw=5.0, loss=0.0, path_timeout=10.0,
                              seed=1, agent_timeout=5.0)

    def fake_run_ranks(_rack: object, _command: Callable[[int], list[str]], _timeout: float,
                       on_line: Callable[[int, dict], None], run: WorkerRun, tag: str = "",
                       env: object = None) -> None:
        on_line(0, {"event": "step", "epoch": 0, "step": 0, "rank": 0, "loss": 1.0,
                    "seconds": 0.1})
        run.hosts.update(HOSTS)
        run.err_logs.update({r: Path(f"logs/run/w{r + 1}{tag}.err") for r in HOSTS})
        run.returncodes.update({0: 0, 1: -11})

    monkeypatch.setattr(train_run, "run_ranks", fake_run_ranks)
    result = train_run.run_path(object(), train_run.PATHS["switch"], 0, args)
    assert "rank 1 (w2) killed by SIGSEGV; Python stacks in logs/run/w2-switch.err" in \
        result.problems
    assert not any("{1: -11}" in p for p in result.problems)


@pytest.mark.parametrize("code", [-signal.SIGSEGV, -signal.SIGABRT])
def test_worker_run_is_not_ok_after_a_signal(code):
    run = WorkerRun(returncodes={0: 0, 1: code}, hosts=HOSTS, err_logs=LOGS)
    assert not run.ok
    assert run.exit_problems()[0].startswith(f"rank 1 (w2) killed by {signal_name(-code)}")
