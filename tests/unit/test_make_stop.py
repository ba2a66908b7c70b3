"""``make stop``'s pkill pattern, as make expands it: it matches every process p4hub starts
(switch, PBox, controller, however started) and nothing else, such as a test run.

make expands ``$`` in a recipe, so a regular expression written there can come out
changed; ``make -n stop`` prints the recipe as the shell will get it.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pattern() -> re.Pattern[str]:
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the Makefile is how p4hub is run)")
    recipe = subprocess.run(["make", "-s", "-n", "stop"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout
    (line,) = [x for x in recipe.splitlines() if x.lstrip().startswith("pkill")]
    words = shlex.split(line.split("2>")[0])
    assert words[:2] == ["pkill", "-f"], line
    return re.compile(words[2])  # pkill -f: an extended regex searched in the command line


@pytest.mark.parametrize("command", [
    "/repo/.venv/bin/python /repo/.venv/bin/p4lite-switch --device-id 0 -i 1@s1-eth1",
    "/repo/.venv/bin/python -m p4lite.switch.process.main --grpc-server-addr 0.0.0.0:50051",
    "/repo/.venv/bin/python /repo/.venv/bin/p4hub-pbox --listen 10.0.0.100:48879",
    "/repo/.venv/bin/python -m p4hub.hosts.pbox --listen 10.0.0.100:48879",
    "/repo/.venv/bin/python -m p4hub.hosts.pbox.cli --listen 10.0.0.100:48879",
    "/repo/.venv/bin/python -m p4hub.hosts.pbox",
    "/repo/.venv/bin/python /repo/.venv/bin/p4hub-controller --topology t.json",
])
def test_it_matches_what_p4hub_starts(pattern: re.Pattern[str], command: str):
    assert pattern.search(command), command


@pytest.mark.parametrize("command", [
    "/repo/.venv/bin/python -m pytest -q tests/unit/test_pbox.py",
    "/repo/.venv/bin/python -m pytest tests/unit/test_pbox_core.py -k hosts.pbox_stats",
    "vim hosts/pbox/core.py",
])
def test_it_leaves_other_processes_alone(pattern: re.Pattern[str], command: str):
    assert not pattern.search(command), command
