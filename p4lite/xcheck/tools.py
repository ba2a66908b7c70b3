"""Finding the reference toolchain: p4c-bm2-ss, simple_switch and p4c's STF runner.

Only ``PATH`` and environment variables are consulted (the convention of a p4c/BMv2
install's ``env.sh``), never a fixed folder:

* ``p4c-bm2-ss``, ``simple_switch``, ``simple_switch_CLI``: on ``PATH``, else in
  ``$P4REF/bin``;
* the STF runner: ``$P4C_SRC/backends/bmv2/run-bmv2-test.py`` (``P4C_SRC`` defaults
  to ``$P4REF/p4c``); its ``build/config.h`` is copied when present;
* ``REF_PY``: the Python that runs the runner (default ``$P4REF/venv/bin/python``,
  else ``python3`` on ``PATH``); it must import ``ptf``, ``ply`` and ``scapy``;
* ``BM_PYTHONPATH``: ``PYTHONPATH`` for the runner, where BMv2's ``runtime_CLI``
  lives (default ``$P4REF/lib/bmv2-python`` when that exists).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

RUNNER_REL = Path("backends/bmv2/run-bmv2-test.py")
RUNNER_MODULES = ("ptf", "ply", "scapy")
HOW_TO = (
    "source the env.sh of your p4c/BMv2 install (it puts p4c-bm2-ss and simple_switch on PATH "
    "and sets P4C_SRC, REF_PY, BM_PYTHONPATH, LD_LIBRARY_PATH), or set those variables by hand; "
    "see docs/p4lite.md, 'Cross-check against real p4c and BMv2'"
)


@dataclass(frozen=True)
class Tools:
    """Where each reference tool is, and the environment to run them in."""

    p4c: Path  # p4c-bm2-ss
    simple_switch: Path
    runner: Path  # run-bmv2-test.py
    p4c_src: Path
    ref_py: Path
    bm_pythonpath: str
    env: dict[str, str]  # os.environ plus PATH/PYTHONPATH for the reference tools

    def runner_env(self) -> dict[str, str]:
        """The environment for p4c's STF runner (its PYTHONPATH is BM_PYTHONPATH)."""
        env = dict(self.env)
        if self.bm_pythonpath:
            env["PYTHONPATH"] = self.bm_pythonpath
        else:
            env.pop("PYTHONPATH", None)
        return env

    def describe(self) -> list[str]:
        return [
            f"p4c-bm2-ss     {self.p4c}",
            f"simple_switch  {self.simple_switch}",
            f"STF runner     {self.runner}",
            f"REF_PY         {self.ref_py}",
            f"BM_PYTHONPATH  {self.bm_pythonpath or '(none)'}",
        ]


class ToolsMissing(Exception):
    """One line per missing piece, then how to get the tools found."""

    def __init__(self, missing: list[str]) -> None:
        self.missing = missing
        super().__init__(self.message())

    def message(self) -> str:
        lines = ["xcheck: the reference toolchain is not complete:"]
        lines += [f"  missing: {m}" for m in self.missing]
        lines.append(f"xcheck: {HOW_TO}")
        return "\n".join(lines)


def _which(name: str, env: Mapping[str, str], extra: list[Path]) -> Path | None:
    search = os.pathsep.join([env.get("PATH", ""), *map(str, extra)])
    found = shutil.which(name, path=search)
    return Path(found) if found else None


def _python_imports(python: Path, modules: tuple[str, ...], env: Mapping[str, str]) -> list[str]:
    """The modules of ``modules`` that ``python`` cannot import (all of them if it won't run)."""
    code = (
        "import importlib.util, sys\n"
        f"print(' '.join(m for m in {list(modules)!r} if importlib.util.find_spec(m) is None))"
    )
    try:
        proc = subprocess.run(
            [str(python), "-c", code], env=dict(env), capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return list(modules)
    if proc.returncode != 0:
        return list(modules)
    return proc.stdout.split()


def find_tools(env: Mapping[str, str] | None = None, check_python: bool = True) -> Tools:
    """The reference toolchain, from ``env`` (default ``os.environ``); raises ToolsMissing."""
    env = dict(os.environ if env is None else env)
    prefix = Path(env["P4REF"]) if env.get("P4REF") else None
    extra_bin = [prefix / "bin"] if prefix else []
    missing: list[str] = []

    found: dict[str, Path] = {}
    for name in ("p4c-bm2-ss", "simple_switch", "simple_switch_CLI"):
        path = _which(name, env, extra_bin)
        if path is None:
            missing.append(f"{name} (not on PATH{' nor in $P4REF/bin' if prefix else ''})")
        else:
            found[name] = path

    p4c_src_text = env.get("P4C_SRC") or (str(prefix / "p4c") if prefix else "")
    p4c_src = Path(p4c_src_text) if p4c_src_text else None
    runner = p4c_src / RUNNER_REL if p4c_src else None
    if runner is None:
        missing.append(f"p4c's STF runner (set P4C_SRC: the p4c tree with {RUNNER_REL})")
    elif not runner.is_file():
        missing.append(f"p4c's STF runner {runner} (P4C_SRC={p4c_src})")

    ref_py_text = env.get("REF_PY") or ""
    if not ref_py_text and prefix and (prefix / "venv/bin/python").exists():
        ref_py_text = str(prefix / "venv/bin/python")
    if not ref_py_text:
        ref_py_text = shutil.which("python3", path=env.get("PATH", "")) or ""
    ref_py = Path(ref_py_text) if ref_py_text else None

    bm_pythonpath = env.get("BM_PYTHONPATH", "")
    if not bm_pythonpath and prefix and (prefix / "lib/bmv2-python").is_dir():
        bm_pythonpath = str(prefix / "lib/bmv2-python")

    # Child processes find simple_switch(_CLI) by name: put the folders found on PATH.
    dirs = [str(p.parent) for p in found.values()]
    run_env = dict(env)
    run_env["PATH"] = os.pathsep.join(dict.fromkeys([*dirs, env.get("PATH", "")]))

    if ref_py is None or not ref_py.exists():
        missing.append("a Python for p4c's STF runner (set REF_PY)")
    elif check_python:
        missing += _runner_python_lacks(ref_py, run_env, bm_pythonpath)
    if missing:
        raise ToolsMissing(missing)
    assert runner is not None and p4c_src is not None and ref_py is not None
    return Tools(
        p4c=found["p4c-bm2-ss"],
        simple_switch=found["simple_switch"],
        runner=runner,
        p4c_src=p4c_src,
        ref_py=ref_py,
        bm_pythonpath=bm_pythonpath,
        env=run_env,
    )


def _runner_python_lacks(ref_py: Path, run_env: Mapping[str, str], bm_pythonpath: str
                         ) -> list[str]:
    """What the STF runner's Python cannot import: the runner's modules, BMv2's CLI."""
    py_env = dict(run_env)
    if bm_pythonpath:
        py_env["PYTHONPATH"] = bm_pythonpath
    missing = []
    lacking = _python_imports(ref_py, RUNNER_MODULES, py_env)
    if lacking:
        missing.append(f"Python modules {', '.join(lacking)} for p4c's STF runner in REF_PY={ref_py}")
    if not _python_imports_ok_cli(ref_py, py_env):
        missing.append("BMv2's runtime_CLI Python module (set BM_PYTHONPATH to the folder holding "
                       "runtime_CLI.py)")
    return missing


def _python_imports_ok_cli(python: Path, env: Mapping[str, str]) -> bool:
    return not _python_imports(python, ("runtime_CLI",), env)
