"""The original source lines, for the messages and ``source_info`` that quote them."""

from __future__ import annotations

from p4lite.compiler.errors import SourceLoc


class SourceText:
    """Reads original source lines to fill ``source_info.source_fragment``."""

    def __init__(self, texts: dict[str, str] | None = None) -> None:
        self._lines: dict[str, list[str]] = {}
        for name, text in (texts or {}).items():
            self._lines[name] = text.splitlines()

    def lines(self, file: str) -> list[str]:
        lines = self._lines.get(file)
        if lines is None:
            try:
                with open(file, encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().splitlines()
            except OSError:
                lines = []
            self._lines[file] = lines
        return lines

    def fragment(self, loc: SourceLoc, stop: str = ";") -> str:
        """The text from ``loc`` up to (not including) ``stop``, on at most 4 lines."""
        lines = self.lines(loc.file)
        if not 0 < loc.line <= len(lines):
            return ""
        parts: list[str] = []
        text = lines[loc.line - 1][loc.col - 1:]
        for extra in range(4):
            cut = _find_stop(text, stop)
            if cut >= 0:
                parts.append(text[:cut])
                break
            parts.append(text)
            next_line = loc.line + extra
            if next_line >= len(lines):
                break
            text = lines[next_line].strip()
        return " ".join(p.strip() for p in parts if p.strip())


def _find_stop(text: str, stop: str) -> int:
    depth = 0
    for i, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            if depth == 0 and stop in ")}]":
                return i
            depth -= 1
        elif ch == stop and depth == 0:
            return i
    return -1
