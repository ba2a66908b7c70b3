"""Every relative Markdown link in README.md, CHANGELOG.md and docs/ points to a file that exists.

Links inside fenced code blocks and links with a scheme (https:, mailto:) are not
checked. A link's #anchor, when it has one, must name a heading of the target file
(GitHub's rule: lower case, punctuation dropped, spaces as hyphens).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def _prose_lines(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks."""
    lines, in_fence = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            lines.append(line)
    return lines


def _slug(heading: str) -> str:
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for line in _prose_lines(path) if (m := HEADING.match(line))}


def _relative_links(path: Path) -> list[str]:
    links = [m.group(1) for line in _prose_lines(path) for m in LINK.finditer(line)]
    return [link for link in links if not re.match(r"^[a-z][a-z0-9+.-]*:", link)]


def test_the_documents_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in DOCS}
    assert {"README.md", "docs/DESIGN.md", "docs/notes/README.md"} <= names


@pytest.mark.parametrize("doc", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_relative_links_resolve(doc: Path):
    broken = []
    for link in _relative_links(doc):
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.name}")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_checker_sees_a_broken_link(tmp_path: Path):
    doc = tmp_path / "a.md"
    doc.write_text("# Title\n\n[ok](a.md#title) [gone](b.md) [bad](a.md#nope)\n"
                   "```\n[in code](c.md)\n```\n[web](https://example.org)\n")
    assert _relative_links(doc) == ["a.md#title", "b.md", "a.md#nope"]
    assert _anchors(doc) == {"title"}
