"""The installed distribution: two import names (p4hub, p4lite), its commands, its public API.

A wheel is built from a copy of the tracked tree (so nothing is written into the
repository) and installed with no dependencies into a fresh venv. The venv reaches this
venv's third-party packages (numpy, grpc, torch, ...) through a plain path line, which
adds their directory to sys.path without running the ``.pth`` files in it, so the
editable install of the repository is not visible there: every ``p4hub`` and ``p4lite``
import in the fresh venv comes from the wheel.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BARE_NAMES = ("hosts", "controller", "topologies", "experiments", "workers", "sim")


def _tracked_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src, out = REPO / name, dest / name
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            out.symlink_to(src.readlink())
        elif src.is_file():
            shutil.copy2(src, out)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.fail("the distribution test needs a git checkout (it builds from tracked files)")
    root = tmp_path_factory.mktemp("dist")
    src = _tracked_copy(root / "src")
    out = root / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(src)], check=True,
                   cwd=root, capture_output=True)
    (found,) = out.glob("p4hub-*.whl")
    return found


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # this venv's third-party packages, as a plain directory (its .pth files are not run)
    Path(site, "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True)
    return venv


def _run(venv: Path, code: str, tmp_path: Path) -> str:
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_wheel_installs_two_top_level_names(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()
                if not name.split("/")[0].endswith(".dist-info")}
        names = set(archive.namelist())
    assert tops == {"p4hub", "p4lite"}
    for needed in ("p4hub/__init__.py", "p4hub/torch.py", "p4hub/controller/main.py",
                   "p4hub/hosts/agent.py", "p4hub/workers/workloads/resnet50.json",
                   "p4lite/p4include/v1model.p4", "p4hub/sim/cli.py",
                   "p4hub/sim/scenarios/default.toml"):
        assert needed in names, needed


def test_the_public_api_imports_from_the_wheel(fresh_venv: Path, tmp_path: Path):
    out = _run(fresh_venv, "\n".join([
        "import sys, importlib.util",
        "import p4hub, p4lite, p4hub.torch, torch.distributed as dist",
        "from p4hub.hosts.agent import Agent",
        "from p4hub.controller.client import JobClient",
        "from p4hub.hosts.pbox import core",
        "print(p4hub.__file__)",
        "print(p4lite.__file__)",
        "print(p4hub.torch.BACKEND_NAME in dist.Backend.backend_list)",
        f"print([n for n in {BARE_NAMES!r} if importlib.util.find_spec(n) is not None])",
    ]), tmp_path)
    p4hub_file, p4lite_file, registered, bare = out.splitlines()
    assert p4hub_file.startswith(str(fresh_venv)) and p4lite_file.startswith(str(fresh_venv))
    assert registered == "True"
    assert bare == "[]", f"the wheel claims generic top-level names: {bare}"


@pytest.mark.parametrize("command", ["p4hub", "p4hub-controller", "p4hub-pbox", "p4hub-selftest",
                                     "p4lite-c", "p4lite-switch", "p4hub-sim"])
def test_the_commands_start_from_the_wheel(fresh_venv: Path, tmp_path: Path, command: str):
    proc = subprocess.run([str(fresh_venv / "bin" / command), "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage" in proc.stdout.lower()


def test_no_code_imports_the_bare_folder_names():
    """In a clone the folders are importable as bare names too (the repository root is on
    sys.path); a module imported under both names would be two modules. Product code,
    tests and benches all import p4hub.<name>."""
    bad = []
    for folder in ("p4hub", "p4lite", *BARE_NAMES, "bench", "tests"):
        for path in (REPO / folder).rglob("*.py"):
            if folder == "p4hub" and path.parent != REPO / "p4hub":
                continue  # p4hub/<name> links to the folders scanned under their own names
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                         else [])
                bad += [f"{path.relative_to(REPO)}:{node.lineno}: {n}" for n in names
                        if n.split(".")[0] in BARE_NAMES]
    assert not bad, "\n".join(bad)


def test_the_wheel_declares_the_torch_backends_entry_point(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = archive.read(name).decode()
    section = text.split("[torch.backends]")[1].split("[")[0]
    assert section.split() == ["p4hub", "=", "p4hub.torch_autoload:register"], text


def test_import_torch_names_the_backend_and_loads_none_of_its_code(fresh_venv: Path,
                                                                    tmp_path: Path):
    """What every torch program pays once p4hub is installed: the entry point's module."""
    out = _run(fresh_venv, "\n".join([
        "import sys, torch.distributed as dist",
        "print('p4hub' in dist.Backend.backend_list)",
        "print(sorted(m for m in sys.modules if m.startswith('p4hub')))",
        "from p4hub.hosts.pytorch.backend import BACKEND_NAME",
        "from p4hub.torch_autoload import BACKEND_NAME as NAMED",
        "print(BACKEND_NAME == NAMED)",
    ]), tmp_path)
    assert out.splitlines() == ["True", "['p4hub', 'p4hub.torch_autoload']", "True"]


# A user's script: no p4hub import. MODE "default": p4hub is the default group; "group":
# Gloo is, and new_group(backend="p4hub") sums. Each rank writes rank<N>.json (the
# ranks share torchrun's stdout, where their lines can interleave).
NO_IMPORT_SCRIPT = """
import json, pathlib, sys, torch, torch.distributed as dist
mode = sys.argv[1]
loaded_before = "p4hub.hosts.pytorch" in sys.modules
dist.init_process_group("p4hub" if mode == "default" else "gloo")
group = dist.new_group(backend="p4hub") if mode == "group" else None
rank = dist.get_rank()
t = torch.arange(1000, dtype=torch.int32) * (rank + 1)
dist.all_reduce(t, group=group)
pathlib.Path(f"rank{rank}.json").write_text(json.dumps({
    "rank": rank, "loaded_before": loaded_before, "backend": dist.get_backend(group),
    "sum": t.tolist()[:3]}))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("mode,job", [("default", 1), ("group", 2)])
def test_a_script_with_no_p4hub_import_uses_the_backend_under_torchrun(
        fresh_venv: Path, tmp_path: Path, mode: str, job: int):
    from tests.unit.test_torch_backend import free_port, pbox_serving

    script = tmp_path / "train.py"
    script.write_text(NO_IMPORT_SCRIPT)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("P4HUB_", "PYTHON", "TORCH_DEVICE_BACKEND"))}
    with pbox_serving([f"--job={job}:2:0:64"]) as pbox:
        env.update(P4HUB_AGGREGATOR=pbox, P4HUB_JOB_ID=str(job), P4HUB_SLOT_BASE="0",
                   P4HUB_SLOT_COUNT="64")
        proc = subprocess.run(
            [str(fresh_venv / "bin" / "python"), "-m", "torch.distributed.run",
             "--nproc-per-node", "2", "--rdzv-backend", "c10d",
             "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--max-restarts", "0",
             str(script), mode], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert lines == [{"rank": r, "loaded_before": False, "backend": "p4hub", "sum": [0, 3, 6]}
                     for r in range(2)]
