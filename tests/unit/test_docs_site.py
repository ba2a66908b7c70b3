"""The documentation site (mkdocs.yml, docs/_hooks.py) builds in strict mode, with the
README as its home page; and strict mode does fail on a broken link, a missing anchor
and a page left out of the nav (a copy of the docs is spoiled, never the tree)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(root / "mkdocs.yml"), "-d", str(site)],
                          capture_output=True, text=True, timeout=240,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strict_with_the_readme_as_home(tmp_path):
    done = build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    home = (tmp_path / "site" / "index.html").read_text()
    assert "make run" in home and 'href="running/"' in home  # README's docs/running.md
    assert (tmp_path / "site" / "changelog" / "index.html").exists()
    assert (tmp_path / "site" / "notes" / "observability" / "index.html").exists()
    assert not (tmp_path / "site" / "_hooks.py").exists()


def test_strict_mode_fails_on_broken_links_anchors_and_pages_left_out(tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(REPO / "docs", root / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("mkdocs.yml", "README.md", "CHANGELOG.md"):
        shutil.copy2(REPO / name, root / name)
    with (root / "docs" / "limitations.md").open("a") as page:
        page.write("\n[gone](no-such-page.md) [nowhere](running.md#no-such-heading)\n")
    (root / "docs" / "notes" / "orphan.md").write_text("# Not in the nav\n")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    for needed in ("'no-such-page.md'", "'#no-such-heading'", "notes/orphan.md"):
        assert needed in done.stderr, (needed, done.stderr)
