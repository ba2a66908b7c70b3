"""The one error type of the p4lite compiler, and source locations.

Every stage (preprocessor, lexer, parser, type checker, back end) raises
``CompileError``; its text always starts with the original ``file:line:col``
so an editor can jump to it, as p4c's and gcc's diagnostics do.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SourceLoc:
    """A position in an original source file; line and col are 1-based."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class CompileError(Exception):
    """A diagnostic that stops compilation: ``file:line:col: error: message``."""

    def __init__(self, message: str, loc: SourceLoc | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.warnings: list[str] = []  # warnings found before the error, printed first

    def __str__(self) -> str:
        if self.loc is None:
            return f"error: {self.message}"
        return f"{self.loc}: error: {self.message}"


def not_supported(what: str, loc: SourceLoc | None) -> CompileError:
    """The error for a valid P4_16 construct outside p4lite's subset."""
    return CompileError(f"not supported by p4lite: {what}", loc)
