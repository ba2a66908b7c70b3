"""Parse the STF test format: p4c's dialect, strictly, unless a file opts into p4lite's extensions.

The reference grammar is p4c's (``tools/stf`` plus the simple_switch_CLI
commands that ``backends/bmv2/bmv2stf.py`` adds); strict.py follows it and
refuses anything else with ``StfSyntaxError("file:line:col: ...")``. A
file whose first line is ``# p4lite-stf-extensions`` may also use p4lite's
older, looser forms (``check_register``, ``counter_reset``, ``remove``,
``lo..hi`` ranges, a lone ``*`` key, dotted IPv4 values, ``0o`` octal,
``check_counter c(i) == n``, comments after packet data, unquoted key names
with slices): such lines go to the lenient parser (lenient.py) when the strict
one refuses them. Such a file does not run on p4c's runner.

The parser only checks syntax; names (tables, keys, actions) are resolved
against the program's JSON by the runner. Every command (commands.py) carries
the line it came from so runtime failures can point back into the file.

One command per line (p4c's grammar would let some statements span lines;
p4lite does not); ``#`` starts a comment except on ``packet``/``expect`` lines,
where p4c's lexer rejects it. See docs/p4lite.md (STF tests) for the grammar.
"""

from __future__ import annotations

from p4lite.stf.commands import StfFile, StfSyntaxError
from p4lite.stf.lenient import parse_line_lenient
from p4lite.stf.line import Line
from p4lite.stf.strict import parse_line_strict

EXTENSIONS_MARKER = "# p4lite-stf-extensions"


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0].strip()


def parse_stf(text: str, filename: str = "<stf>", *, extensions: bool | None = None) -> StfFile:
    """Parse a whole STF text; raises StfSyntaxError at the first bad line.

    Lines must follow p4c's STF grammar. With ``extensions=None`` a file whose
    first line is ``# p4lite-stf-extensions`` may also use p4lite's older forms (a
    line the strict grammar refuses is read by the lenient parser); ``False`` is
    strict even then (the marker is an error), ``True`` allows them in any file.
    """
    marked = _first_line(text) == EXTENSIONS_MARKER
    if marked and extensions is False:
        raise StfSyntaxError(filename, 1, "this file opts into p4lite's STF extensions, "
                             "but p4c's grammar (strict mode) was asked for", 1)
    extended = marked if extensions is None else extensions
    result = StfFile(filename, extended=extended)
    for number, line in enumerate(text.splitlines(), start=1):
        ln = Line(filename, number)
        try:
            command = parse_line_strict(ln, line)
        except StfSyntaxError:
            if not extended:
                raise
            command = parse_line_lenient(ln, line)
        if command is not None:
            result.commands.append(command)
    return result


def parse_stf_file(path: str, *, extensions: bool | None = None) -> StfFile:
    with open(path, encoding="utf-8") as f:
        return parse_stf(f.read(), path, extensions=extensions)
