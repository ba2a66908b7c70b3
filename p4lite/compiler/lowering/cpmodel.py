"""The control-plane view of a compiled program, filled in by lowering.

P4Info is built from this model rather than from the AST or the BMv2 JSON,
so the two outputs share names and widths but neither depends on the other.
Names are the control-plane names p4c uses (``MyIngress.ipv4_lpm``). ``fixed_id``
is a declaration's ``@id`` and ``id_loc`` where that annotation is written (for
the duplicate-@id error).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from p4lite.compiler.errors import SourceLoc

SCOPE_TABLE_AND_DEFAULT = "TABLE_AND_DEFAULT"
SCOPE_TABLE_ONLY = "TABLE_ONLY"
SCOPE_DEFAULT_ONLY = "DEFAULT_ONLY"


@dataclass(slots=True)
class CpAction:
    name: str
    params: list[tuple[str, int]]  # (name, bitwidth), ids are 1..n in this order
    fixed_id: int | None = None
    annotations: list[str] = field(default_factory=list)
    id_loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(slots=True)
class CpKey:
    name: str
    bitwidth: int
    match_type: str  # exact | lpm | ternary | range | optional


@dataclass(slots=True)
class CpTable:
    name: str
    keys: list[CpKey]
    actions: list[tuple[str, str]]  # (action name, scope)
    default_action: str
    default_args: list[int]
    default_is_const: bool
    size: int
    is_const: bool
    has_entries: bool
    direct_counter: str | None = None
    direct_meter: str | None = None
    support_timeout: bool = False
    fixed_id: int | None = None
    default_explicit: bool = True  # p4c writes initial_default_action only for these
    id_loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(slots=True)
class CpCounter:
    name: str
    size: int
    unit: str  # BYTES | PACKETS | BOTH
    direct_table: str | None = None
    fixed_id: int | None = None
    id_loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(slots=True)
class CpMeter:
    name: str
    size: int
    unit: str  # BYTES | PACKETS
    direct_table: str | None = None
    fixed_id: int | None = None
    id_loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(slots=True)
class CpRegister:
    name: str
    size: int
    bitwidth: int
    fixed_id: int | None = None
    id_loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(slots=True)
class CpStructType:
    """A named struct/header type referenced from type_info (digests)."""

    name: str
    members: list[tuple[str, int]]  # (name, bitwidth); bool members have width 0
    is_header: bool = False


@dataclass(slots=True)
class CpDigest:
    name: str  # the struct type name, as p4c names digests
    type_name: str


@dataclass(slots=True)
class CpControllerHeader:
    name: str  # "packet_in" / "packet_out"
    fields: list[tuple[str, int]]
    fixed_id: int | None = None
    id_loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(slots=True)
class ControlPlaneModel:
    tables: list[CpTable] = field(default_factory=list)
    actions: list[CpAction] = field(default_factory=list)
    counters: list[CpCounter] = field(default_factory=list)
    meters: list[CpMeter] = field(default_factory=list)
    registers: list[CpRegister] = field(default_factory=list)
    digests: list[CpDigest] = field(default_factory=list)
    controller_headers: list[CpControllerHeader] = field(default_factory=list)
    struct_types: dict[str, CpStructType] = field(default_factory=dict)

    def action(self, name: str) -> CpAction:
        for action in self.actions:
            if action.name == name:
                return action
        raise KeyError(name)
