"""Running one pair (``X.p4`` + ``X.stf``) one way, or compiling one program with real p4c.

Every run works in its own folder (the P4 and STF files are copied there: p4c's runner
writes ``X.p4.obs`` next to the program) and has a timeout. The result is an
``Outcome``: PASS, FAIL (the program ran, an expectation did not hold) or ERROR
(a compile error, a crash, a timeout, a runner that skipped the test).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import p4lite
from p4lite.xcheck.tools import Tools

WAY_REF = "p4c+bmv2"
WAY_LITEC_BMV2 = "p4lite-c json on bmv2"
WAY_P4C_LITE = "p4c json on p4lite"
WAYS = (WAY_REF, WAY_LITEC_BMV2, WAY_P4C_LITE)
WAY_COMPILE = "p4c compile"

PASS, FAIL, ERROR = "PASS", "FAIL", "ERROR"

# run-bmv2-test.py exits 0 without running anything when config.h lacks this define.
HAVE_BMV2_DEFINE = "HAVE_SIMPLE_SWITCH"
SKIPPED_MARK = "Will skip running BMv2 tests"
LOG_TAIL = 6000


@dataclass(frozen=True)
class Pair:
    name: str
    p4: Path
    stf: Path


@dataclass
class Outcome:
    """The result of one run."""

    status: str  # PASS, FAIL or ERROR
    reason: str = ""
    seconds: float = 0.0
    log: str = ""
    warnings: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == PASS


def find_pairs(folder: Path) -> list[Pair]:
    """Every ``X.p4`` of ``folder`` that has an ``X.stf``, by name."""
    return [
        Pair(p4.stem, p4, p4.with_suffix(".stf"))
        for p4 in sorted(folder.glob("*.p4"))
        if p4.with_suffix(".stf").is_file()
    ]


@dataclass
class _Proc:
    rc: int | None  # None: timed out
    output: str
    seconds: float


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> _Proc:
    start = time.monotonic()
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            start_new_session=True,  # so a timeout can end the switch the runner started
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or b""
        return _Proc(None, _text(out), time.monotonic() - start)
    except OSError as exc:
        return _Proc(127, f"cannot run {cmd[0]}: {exc}", time.monotonic() - start)
    return _Proc(proc.returncode, _text(proc.stdout), time.monotonic() - start)


def _text(data: bytes | str) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _short(line: str, limit: int = 90) -> str:
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


_DIAG = re.compile(r"\berror\b", re.IGNORECASE)
_WARN = re.compile(r"\bwarning\b", re.IGNORECASE)


_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*)?(Error|Exception)\b[^:]*: ")
_GENERIC = ("Test failed", "Error compiling", "Received packet", "Expected packet")


def first_error(output: str) -> str:
    """The most telling line of a failed run's output, shortened."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    bare = [ln.removeprefix("ERROR: ").removeprefix("ERROR:").strip() for ln in lines]
    exceptions = [ln for ln in bare if _EXCEPTION.match(ln) and not ln.startswith("ERROR")]
    if exceptions:  # a traceback's last line says what went wrong
        return _short(exceptions[-1])
    for line in bare:  # a compiler or CLI diagnostic ...
        if re.search(r"\berror:", line, re.IGNORECASE) and not line.startswith(_GENERIC):
            return _short(line)
    for line, text in zip(lines, bare, strict=True):  # ... then the runner's own complaint
        if line.startswith("ERROR") and text and not text.startswith(_GENERIC):
            return _short(text)
    warnings = [ln.removeprefix("WARNING: ") for ln in lines if re.search(r"\bwarning:", ln)]
    if warnings:  # nothing but "Test failed": the compiler's warning is the best lead
        return _short("no reason given; p4c " + warnings[-1].split("warning:", 1)[1].strip())
    return _short(lines[-1]) if lines else "no output"


def count_warnings(output: str) -> int:
    return sum(1 for line in output.splitlines() if _WARN.search(line))


# -- p4c's STF runner (ways 1 and 2) ------------------------------------------------


def compiler_script(python: str | None = None) -> str:
    """A p4c-bm2-ss stand-in that runs p4lite-c with the arguments it is given."""
    python = python or sys.executable
    root = Path(p4lite.__file__).resolve().parent.parent
    return (
        "#!/bin/sh\n"
        "# p4lite-c standing in for p4c-bm2-ss (written by p4lite.xcheck)\n"
        f"PYTHONPATH='{root}'${{PYTHONPATH:+:$PYTHONPATH}}; export PYTHONPATH\n"
        f"exec '{python}' -m p4lite.compiler \"$@\"\n"
    )


def write_config_h(tools: Tools, dest: Path) -> None:
    """p4c's build/config.h, with the define that tells the runner BMv2 is installed."""
    src = tools.p4c_src / "build" / "config.h"
    text = src.read_text(encoding="utf-8") if src.is_file() else ""
    if not re.search(rf"^\s*#\s*define\s+{HAVE_BMV2_DEFINE}\b", text, re.MULTILINE):
        text += (
            f"\n/* added by p4lite.xcheck: simple_switch is on PATH */\n"
            f"#define {HAVE_BMV2_DEFINE} 1\n"
        )
    dest.write_text(text, encoding="utf-8")


def prepare_build_dir(tools: Tools, build: Path, compiler: str | None) -> None:
    """BUILD/ for run-bmv2-test.py: config.h and p4c-bm2-ss (real, or p4lite-c if given)."""
    build.mkdir(parents=True, exist_ok=True)
    write_config_h(tools, build / "config.h")
    target = build / "p4c-bm2-ss"
    if compiler is None:
        target.symlink_to(tools.p4c)
    else:
        target.write_text(compiler, encoding="utf-8")
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _stage(pair: Pair, workdir: Path) -> tuple[Path, Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    p4 = workdir / pair.p4.name
    stf = workdir / pair.stf.name
    shutil.copyfile(pair.p4, p4)
    shutil.copyfile(pair.stf, stf)
    return p4, stf


def run_on_bmv2(
    tools: Tools, pair: Pair, workdir: Path, timeout: float, compiler: str | None = None
) -> Outcome:
    """p4c's STF runner on real simple_switch, compiling with real p4c or ``compiler``."""
    p4, stf = _stage(pair, workdir)
    prepare_build_dir(tools, workdir / "BUILD", compiler)
    cmd = [
        str(tools.ref_py), str(tools.runner), str(tools.p4c_src),
        "-bd", "BUILD", "-tf", stf.name, p4.name,
    ]  # fmt: skip
    proc = _run(cmd, workdir, tools.runner_env(), timeout)
    return classify_runner(proc.rc, proc.output, proc.seconds, timeout)


def classify_runner(rc: int | None, output: str, seconds: float, timeout: float) -> Outcome:
    log = output[-LOG_TAIL:]
    if rc is None:
        return Outcome(ERROR, f"timeout after {timeout:g}s", seconds, log)
    if SKIPPED_MARK in output:
        return Outcome(ERROR, "runner skipped BMv2 (config.h)", seconds, log)
    if rc == 0:
        return Outcome(PASS, "", seconds, log)
    if "Error compiling" in output:
        return Outcome(ERROR, "compile: " + first_error(output), seconds, log)
    if "Traceback" in output and "Test failed" not in output:
        return Outcome(ERROR, "runner: " + first_error(output), seconds, log)
    return Outcome(FAIL, first_error(output), seconds, log)


# -- real p4c's JSON on p4lite (way 3) and compile only ---------------------------------


def compile_with_p4c(tools: Tools, p4: Path, out_json: Path, timeout: float) -> Outcome:
    """Real p4c-bm2-ss on ``p4``; PASS when it exits 0 and prints no error."""
    out_json.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(tools.p4c), "-o", str(out_json), str(p4)]
    proc = _run(cmd, out_json.parent, tools.env, timeout)
    log = proc.output[-LOG_TAIL:]
    warnings = count_warnings(proc.output)
    note = f"{warnings} warning{'s' if warnings != 1 else ''}" if warnings else ""
    if proc.rc is None:
        return Outcome(ERROR, f"p4c timeout after {timeout:g}s", proc.seconds, log, warnings)
    if proc.rc != 0 or _DIAG.search(proc.output) or not out_json.is_file():
        reason = first_error(proc.output) if proc.output.strip() else f"exit {proc.rc}"
        return Outcome(ERROR, "p4c: " + reason, proc.seconds, log, warnings)
    return Outcome(PASS, note, proc.seconds, log, warnings)


def run_p4c_json_on_p4lite(tools: Tools, pair: Pair, workdir: Path, timeout: float) -> Outcome:
    """Real p4c's JSON, run by ``python -m p4lite.stf --strict --json``."""
    p4, stf = _stage(pair, workdir)
    out_json = workdir / f"{pair.name}.json"
    compiled = compile_with_p4c(tools, p4, out_json, timeout)
    if not compiled.ok:
        return compiled
    env = dict(os.environ)
    root = str(Path(p4lite.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "p4lite.stf", "--strict", "--json", out_json.name, stf.name]
    proc = _run(cmd, workdir, env, timeout)
    seconds = compiled.seconds + proc.seconds
    log = (compiled.log + "\n" + proc.output)[-LOG_TAIL:]
    if proc.rc is None:
        return Outcome(ERROR, f"p4lite.stf timeout after {timeout:g}s", seconds, log)
    if proc.rc == 0:
        return Outcome(PASS, "", seconds, log)
    reason = _stf_failure(proc.output)
    return Outcome(FAIL if proc.rc == 1 else ERROR, reason, seconds, log)


def _stf_failure(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    exceptions = [ln for ln in lines if _EXCEPTION.match(ln)]
    if exceptions:
        return _short(exceptions[-1])
    for line in lines:
        if line.startswith("error:"):
            return _short(line)
    for line in lines:  # p4lite.stf prints file:line: message for each failure
        if re.match(r"\S+\.stf:\d+", line) and "passed" not in line:
            return _short(line)
    return _short(lines[-1]) if lines else "no output"
