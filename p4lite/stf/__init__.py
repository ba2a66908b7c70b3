"""STF tests (p4c's packet/expect test format) for p4lite.

``python -m p4lite.stf PROG.p4 TEST.stf`` compiles PROG.p4 with p4lite's
compiler and runs TEST.stf on the in-process switch core;
``python -m p4lite.stf --json PROG.json TEST.stf`` runs a JSON that p4c wrote.
"""

from p4lite.stf.commands import StfSyntaxError
from p4lite.stf.harness import run_stf_on_json, run_stf_on_program
from p4lite.stf.parser import parse_stf, parse_stf_file
from p4lite.stf.runner import StfResult, StfRunner

__all__ = [
    "StfResult",
    "StfRunner",
    "StfSyntaxError",
    "parse_stf",
    "parse_stf_file",
    "run_stf_on_json",
    "run_stf_on_program",
]
