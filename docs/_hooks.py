"""MkDocs hooks for the docs site (mkdocs.yml): the repository's README.md is the home
page and CHANGELOG.md a page, though both live outside docs/; links written for
GitHub (README -> docs/running.md, a note -> ../../CHANGELOG.md) are rewritten to the
site's pages. A link to anything else outside docs/ is left as written, so strict mode
reports it. Not shipped in the site (``exclude_docs``)."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parent.parent
# site page -> the repository file it is made from (outside docs/)
GENERATED = {"index.md": "README.md", "changelog.md": "CHANGELOG.md"}
SITE_OF = {repo: site for site, repo in GENERATED.items()}
LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")


def on_files(files: Files, config: Any) -> Files:
    for site, repo in GENERATED.items():
        files.append(File.generated(config, site, content=(REPO / repo).read_text()))
    return files


def site_target(page_uri: str, target: str) -> str | None:
    """Where ``target``, linked from site page ``page_uri``, points in the site (a path
    relative to the page); None when it is not a relative link to the repository."""
    if "://" in target or target.startswith(("/", "mailto:")):
        return None
    source = GENERATED.get(page_uri, posixpath.join("docs", page_uri))
    repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    if repo_path in SITE_OF:
        site_path = SITE_OF[repo_path]
    elif repo_path.startswith("docs/"):
        site_path = repo_path.removeprefix("docs/")
    else:
        return None
    return posixpath.relpath(site_path, posixpath.dirname(page_uri) or ".")


def on_page_markdown(markdown: str, page: Any, **_kwargs: Any) -> str:
    uri = page.file.src_uri

    def fix(match: re.Match[str]) -> str:
        target = site_target(uri, match.group(2))
        if target is None:
            return match.group(0)
        return f"{match.group(1)}{target}{match.group(3) or ''}{match.group(4)}"

    return LINK.sub(fix, markdown)
