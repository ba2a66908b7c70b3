"""The root guard: without root, `make test` stops before anything runs and a pytest run
that selects root-marked tests fails them (never skips them); `-m "not root"` and `make
unit` still run. A non-root user is played through the guard's seams (RUN_UID for the
Makefile, root_guard.effective_uid for pytest), so no privilege changes are needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import root_guard

REPO = Path(__file__).resolve().parents[2]

SAMPLE = '''
import pytest

@pytest.mark.root
def test_needs_a_network():
    pass

def test_needs_nothing():
    pass
'''


def _pytest_as(uid: int, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run pytest on SAMPLE in a fresh interpreter whose guard sees ``uid``."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    root: needs root\n")
    (tmp_path / "conftest.py").write_text(
        "from tests.support import root_guard\n"
        f"root_guard.effective_uid = lambda: {uid}\n"
        "from tests.support.root_guard import pytest_runtest_setup\n")
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rA", *args, str(tmp_path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                          check=False)


def test_a_selected_root_test_fails_without_root_and_says_how_to_run_it(tmp_path: Path) -> None:
    run = _pytest_as(1000, tmp_path)
    assert run.returncode == 1, run.stdout
    # it fails in setup, before any fixture builds a network: pytest counts that an error
    assert "1 passed, 1 error" in run.stdout and "skipped" not in run.stdout
    assert "test_needs_a_network needs root (network namespaces, Mininet)" in run.stdout
    assert '-m "not root"' in run.stdout


def test_not_root_deselects_the_root_tests_and_passes_without_root(tmp_path: Path) -> None:
    run = _pytest_as(1000, tmp_path, "-m", "not root")
    assert run.returncode == 0, run.stdout
    assert "1 passed, 1 deselected" in run.stdout


def test_root_runs_the_root_tests(tmp_path: Path) -> None:
    run = _pytest_as(0, tmp_path)
    assert run.returncode == 0, run.stdout
    assert "2 passed" in run.stdout


def test_the_guard_refuses_only_root_tests_for_a_non_root_user(monkeypatch: pytest.MonkeyPatch) -> None:
    class Item:
        nodeid = "t.py::x"

        def __init__(self, keywords: set[str]) -> None:
            self.keywords = keywords

    monkeypatch.setattr(root_guard, "effective_uid", lambda: 1000)
    assert root_guard.refusal(Item({"root"})) == f"t.py::x {root_guard.NEEDS_ROOT}"  # type: ignore[arg-type]
    assert root_guard.refusal(Item(set())) is None  # type: ignore[arg-type]
    monkeypatch.setattr(root_guard, "effective_uid", lambda: 0)
    assert root_guard.refusal(Item({"root"})) is None  # type: ignore[arg-type]


def _make(target: str, uid: int) -> subprocess.CompletedProcess[str]:
    """``make -n`` (print, run nothing) as user ``uid``."""
    return subprocess.run(["make", "-n", "--no-print-directory", "-C", str(REPO), target, f"RUN_UID={uid}"],
                          capture_output=True, text=True, timeout=60, check=False)


def test_make_test_without_root_stops_before_anything_with_one_message() -> None:
    run = _make("test", 1000)
    assert run.returncode != 0
    assert run.stdout == ""  # not even a command printed
    assert "make test needs root (Mininet, network namespaces): run it as root, or `make unit`" \
        in run.stderr


def test_make_unit_and_make_test_as_root_pass_the_guard() -> None:
    unit = _make("unit", 1000)
    assert unit.returncode == 0 and '-m "not root"' in unit.stdout, unit.stderr
    test = _make("test", 0)
    assert test.returncode == 0 and "pytest -q" in test.stdout, test.stderr
