"""The repository needs nothing outside itself at run or test time.

A fresh clone has only what is tracked, so any data the code reads must live in the
repository (or in the Python install, the OS, the temp dir). The first tests run the
``make run`` driver's workload loading under an audit hook that reports every file or
directory read outside those places.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4hub.workers import workload

REPO = Path(__file__).resolve().parents[2]

# ResNet-50 v1.5 as the bundled profile describes it (workers/workloads/README.md).
RESNET50_LAYERS = 54
RESNET50_PARAMS = 25_557_032

# The audit hook goes in before anything else is imported, so even the project's imports
# and module-level code are watched. argv: repo root, temp dir, then the code to run.
HARNESS = textwrap.dedent("""
    import json, os, sys

    REPO, TMP, CODE = sys.argv[1], sys.argv[2], sys.argv[3]
    ROOTS = [REPO, sys.prefix, sys.base_prefix, sys.exec_prefix,
             "/usr", "/lib", "/etc", "/proc", "/dev", "/sys", TMP]
    ROOTS = [os.path.realpath(r) for r in ROOTS]
    WATCHED = {"open", "os.listdir", "os.scandir"}
    violations = []

    def outside(path):
        real = os.path.realpath(os.fsdecode(path))
        return not any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in ROOTS)

    def hook(event, args):
        # args[0] is an fd (int) or None for opens that name no path: nothing to check.
        if event in WATCHED and args and isinstance(args[0], (str, bytes, os.PathLike)):
            if outside(args[0]):
                violations.append([event, os.fsdecode(args[0])])

    sys.addaudithook(hook)
    sys.path.insert(0, REPO)
    result = {}
    exec(CODE, {"result": result})
    print(json.dumps({"violations": violations, "result": result}))
""")

# What `make run` does before it touches the network: its defaults, then the workload.
RUN_DRIVER_LOAD = textwrap.dedent("""
    from p4hub.experiments import run
    from p4hub.workers import workload
    args = run.parse_args([])
    sizes = workload.layer_sizes(args.model, args.scale)
    grads = workload.gradients(sizes, args.seed, 0, 0)
    full = workload.layer_sizes(args.model, 1.0)
    result.update(model=args.model, scale=args.scale, sizes=sizes,
                  grad_sizes=[g.size for g in grads], layers=len(full), params=sum(full))
""")


def run_watched(code: str) -> dict:
    """Run ``code`` in a fresh interpreter under the audit hook; its violations and result."""
    # -I: no PYTHONPATH, user site or cwd on sys.path, which could point anywhere.
    proc = subprocess.run(
        [sys.executable, "-I", "-c", HARNESS, str(REPO), tempfile.gettempdir(), code],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_make_run_workload_reads_nothing_outside_the_repository() -> None:
    out = run_watched(RUN_DRIVER_LOAD)
    assert out["violations"] == []
    got = out["result"]
    assert Path(got["model"]).resolve().is_relative_to(REPO)
    assert got["layers"] == RESNET50_LAYERS
    assert got["params"] == RESNET50_PARAMS
    expected = [max(1, round(p * got["scale"])) for p in _profile_params("resnet50")]
    assert got["sizes"] == expected
    assert got["grad_sizes"] == expected


@pytest.fixture
def outside_dir() -> Iterator[Path]:
    """A fresh directory none of the harness's allowed roots contains, removed afterwards.

    pytest's tmp_path is under the temp dir, which is allowed, so it would prove nothing.
    """
    allowed = [REPO, Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
               Path(tempfile.gettempdir())]
    for parent in (Path("/var/tmp"), Path.home(), REPO.parent):
        real = parent.resolve()
        if not real.is_dir() or not os.access(real, os.W_OK):
            continue
        if any(real.is_relative_to(a.resolve()) for a in allowed):
            continue
        path = Path(tempfile.mkdtemp(prefix="p4hub-outside-", dir=real))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
        return
    pytest.skip("no writable directory outside the allowed roots")


def test_audit_hook_reports_a_read_outside_the_repository(outside_dir: Path) -> None:
    secret = outside_dir / "profile.json"
    secret.write_text('{"layers": []}')
    inside = REPO / "pyproject.toml"
    code = f"open({str(inside)!r}).read(); open({str(secret)!r}).read()"
    out = run_watched(code)
    paths = [path for _, path in out["violations"]]
    assert os.path.realpath(secret) in [os.path.realpath(p) for p in paths]
    assert str(inside) not in paths  # the repository itself is allowed


def test_no_file_names_a_path_outside_the_repository() -> None:
    # Built from pieces so this file does not match itself.
    needles = ["/work" + "/shared", ".." + "/shared"]
    hits = [f"{path.relative_to(REPO)}: {needle}"
            for path in _repository_files() for needle in needles
            if needle in _text(path)]
    assert hits == []


def test_bare_model_names_resolve_inside_the_repository() -> None:
    for name in ("resnet50", "vgg19", "bert_base"):
        path = workload.model_path(name)
        assert path.is_file()
        assert path.resolve().is_relative_to(REPO)
        assert json.loads(path.read_text())["model"] == name


def test_a_path_is_used_as_given(tmp_path: Path) -> None:
    profile = tmp_path / "tiny.json"
    profile.write_text(json.dumps({"layers": [{"params": 10}, {"params": 3}]}))
    assert workload.model_path(profile) == profile
    assert workload.layer_sizes(str(profile)) == [10, 3]


def test_an_unknown_model_names_the_choices() -> None:
    with pytest.raises(ValueError, match="resnet50, vgg19") as err:
        workload.model_path("alexnet")
    assert isinstance(err.value, workload.UnknownModelError)
    assert "alexnet" in str(err.value)


def test_a_relative_path_cannot_reach_a_bundled_name_elsewhere() -> None:
    # "x/vgg19" is a path, not a bare name: it must not silently pick the bundled file.
    with pytest.raises(workload.UnknownModelError):
        workload.model_path(Path("no-such-dir") / "vgg19")


def _profile_params(name: str) -> list[int]:
    layers = json.loads((REPO / "workers" / "workloads" / f"{name}.json").read_text())
    return [layer["params"] for layer in layers["layers"]]


def _repository_files() -> list[Path]:
    """Tracked files plus new ones not yet added (not the ignored ones), else a tree walk."""
    git = shutil.which("git")
    if git and (REPO / ".git").exists():
        proc = subprocess.run(
            [git, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO, capture_output=True, check=False)
        if proc.returncode == 0:
            names = [n for n in proc.stdout.decode().split("\0") if n]
            return [REPO / n for n in names if (REPO / n).is_file()]
    skip = {".venv", ".git", "build", ".stamps", "__pycache__"}
    return [p for p in REPO.rglob("*")
            if p.is_file() and not skip.intersection(p.relative_to(REPO).parts)]


def _text(path: Path) -> str:
    """The file's text, or "" for a binary file."""
    data = path.read_bytes()
    if b"\0" in data:
        return ""
    return data.decode("utf-8", errors="replace")
