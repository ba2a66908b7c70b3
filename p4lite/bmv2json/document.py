"""A whole BMv2 JSON document: ``load`` (validated once) and ``dump``."""

from __future__ import annotations

from p4lite.bmv2json.check import check_program
from p4lite.bmv2json.codec import Json, decode_obj, encode_obj
from p4lite.bmv2json.model import Program
from p4lite.bmv2json.where import Where


def load(doc: Json) -> Program:
    """The model of ``doc`` (a dict as json.loads returns it); raises Bmv2JsonError
    naming the JSON object and path on anything malformed or that BMv2 would refuse."""
    prog = decode_obj(Program, doc, Where())
    check_program(prog)
    return prog


def dump(prog: Program) -> dict[str, Json]:
    """The JSON document of ``prog``: for a loaded one, equal to what was loaded, key
    order included."""
    return encode_obj(prog)
