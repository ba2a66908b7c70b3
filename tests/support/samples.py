"""Hand-built BMv2 JSON programs, shaped like p4c-bm2-ss output, for the tests.

``ProgramBuilder`` writes the boilerplate (standard_metadata, scalars, errors,
field aliases, a parser/deparser, ingress/egress pipelines); ``l3_router`` and
``register_lanes`` are the two benchmark programs of the p4lite issue.
Frames for them are built by bench/_frames.py.
"""

from __future__ import annotations

from typing import Any

# A BMv2 JSON header type's "fields": [name, bit width, signed] per field, as JSON lists.
HeaderFields = list[list[Any]]

STANDARD_METADATA_FIELDS = [
    ["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False],
    ["instance_type", 32, False], ["packet_length", 32, False], ["enq_timestamp", 32, False],
    ["enq_qdepth", 19, False], ["deq_timedelta", 32, False], ["deq_qdepth", 19, False],
    ["ingress_global_timestamp", 48, False], ["egress_global_timestamp", 48, False],
    ["mcast_grp", 16, False], ["egress_rid", 16, False], ["checksum_error", 1, False],
    ["parser_error", 32, False], ["priority", 3, False], ["_padding", 3, False],
]
ERRORS = [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2], ["StackOutOfBounds", 3],
          ["HeaderTooShort", 4], ["ParserTimeout", 5], ["ParserInvalidArgument", 6]]
ALIASES = [
    ["queueing_metadata.enq_timestamp", ["standard_metadata", "enq_timestamp"]],
    ["queueing_metadata.enq_qdepth", ["standard_metadata", "enq_qdepth"]],
    ["queueing_metadata.deq_timedelta", ["standard_metadata", "deq_timedelta"]],
    ["queueing_metadata.deq_qdepth", ["standard_metadata", "deq_qdepth"]],
    ["intrinsic_metadata.ingress_global_timestamp", ["standard_metadata", "ingress_global_timestamp"]],
    ["intrinsic_metadata.egress_global_timestamp", ["standard_metadata", "egress_global_timestamp"]],
    ["intrinsic_metadata.mcast_grp", ["standard_metadata", "mcast_grp"]],
    ["intrinsic_metadata.egress_rid", ["standard_metadata", "egress_rid"]],
    ["intrinsic_metadata.priority", ["standard_metadata", "priority"]],
]
ETHERNET: HeaderFields = [
    ["dstAddr", 48, False], ["srcAddr", 48, False], ["etherType", 16, False]]
IPV4: HeaderFields = [
    ["version", 4, False], ["ihl", 4, False], ["diffserv", 8, False],
    ["totalLen", 16, False], ["identification", 16, False], ["flags", 3, False],
    ["fragOffset", 13, False], ["ttl", 8, False], ["protocol", 8, False],
    ["hdrChecksum", 16, False], ["srcAddr", 32, False], ["dstAddr", 32, False]]


def fld(header: str, name: str) -> dict:
    return {"type": "field", "value": [header, name]}


def hexstr(value: int) -> dict:
    return {"type": "hexstr", "value": hex(value)}


def param(index: int) -> dict:
    return {"type": "runtime_data", "value": index}


def expr(op: str, left: Any, right: Any) -> dict:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right}}


def prim(op: str, *params: Any) -> dict:
    return {"op": op, "parameters": list(params)}


def masked(value: dict, width: int) -> dict:
    """``value & (2**width - 1)``, the mask p4c writes after unsigned arithmetic."""
    return expr("&", value, hexstr((1 << width) - 1))


class ProgramBuilder:
    """Accumulates a BMv2 JSON document; ids are assigned in order."""

    def __init__(self) -> None:
        self.doc: dict[str, Any] = {
            "header_types": [
                {"name": "scalars_0", "id": 0, "fields": []},
                {"name": "standard_metadata", "id": 1, "fields": STANDARD_METADATA_FIELDS},
            ],
            "headers": [
                {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True,
                 "pi_omit": True},
                {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata",
                 "metadata": True, "pi_omit": True},
            ],
            "header_stacks": [], "header_union_types": [], "header_unions": [],
            "header_union_stacks": [], "field_lists": [], "errors": ERRORS, "enums": [],
            "parsers": [], "parse_vsets": [], "deparsers": [], "meter_arrays": [],
            "counter_arrays": [], "register_arrays": [], "calculations": [], "learn_lists": [],
            "actions": [],
            "pipelines": [
                {"name": "ingress", "id": 0, "init_table": None, "tables": [],
                 "action_profiles": [], "conditionals": []},
                {"name": "egress", "id": 1, "init_table": None, "tables": [],
                 "action_profiles": [], "conditionals": []},
            ],
            "checksums": [], "force_arith": [], "extern_instances": [], "field_aliases": ALIASES,
            "program": "sample.p4",
            "__meta__": {"version": [2, 23], "compiler": "p4lite samples"},
        }
        self.set_parser([{"name": "start", "id": 0, "parser_ops": [], "transitions": [
            {"type": "default", "value": None, "mask": None, "next_state": None}],
            "transition_key": []}], [])

    def _next_id(self, kind: str) -> int:
        return len(self.doc[kind])

    def scalar(self, name: str, width: int, signed: bool = False) -> dict:
        self.doc["header_types"][0]["fields"].append([name, width, signed])
        return fld("scalars", name)

    def header(self, name: str, fields: list, type_name: str | None = None,
               metadata: bool = False) -> str:
        tname = type_name or f"{name}_t"
        if not any(t["name"] == tname for t in self.doc["header_types"]):
            self.doc["header_types"].append(
                {"name": tname, "id": self._next_id("header_types"), "fields": fields})
        self.doc["headers"].append({"name": name, "id": self._next_id("headers"),
                                    "header_type": tname, "metadata": metadata, "pi_omit": True})
        return name

    def stack(self, name: str, elem_type: str, fields: list, size: int) -> list[str]:
        names = [self.header(f"{name}[{i}]", fields, elem_type) for i in range(size)]
        ids = [h["id"] for h in self.doc["headers"] if h["name"] in names]
        self.doc["header_stacks"].append({"name": name, "id": self._next_id("header_stacks"),
                                          "header_type": elem_type, "size": size,
                                          "header_ids": ids})
        return names

    def set_parser(self, states: list, deparse_order: list[str]) -> None:
        self.doc["parsers"] = [{"name": "parser", "id": 0, "init_state": states[0]["name"],
                                "parse_states": states}]
        self.doc["deparsers"] = [{"name": "deparser", "id": 0, "order": deparse_order,
                                  "primitives": []}]

    def parse_only(self, *headers: str) -> None:
        """A one-state parser that extracts ``headers`` in order and accepts; the deparser
        emits them in the same order."""
        self.set_parser([{"name": "start", "id": 0, "parser_ops": [
            {"op": "extract", "parameters": [{"type": "regular", "value": h}]} for h in headers],
            "transition_key": [], "transitions": [
                {"type": "default", "value": None, "mask": None, "next_state": None}]}],
            list(headers))

    def action(self, name: str, params: list[tuple[str, int]], primitives: list) -> int:
        aid = self._next_id("actions")
        self.doc["actions"].append({
            "name": name, "id": aid,
            "runtime_data": [{"name": n, "bitwidth": w} for n, w in params],
            "primitives": primitives})
        return aid

    def table(self, pipeline: str, name: str, key: list, actions: list[tuple[str, int]], *,
              default: tuple[int, list[int]] | None = None, default_const: bool = False,
              next_tables: dict | None = None, max_size: int = 1024, entries: list | None = None,
              with_counters: bool = False, direct_meters: str | None = None,
              base_default_next: str | None = None) -> dict:
        pipe = self._pipe(pipeline)
        types = {k["match_type"] for k in key}
        match_type = ("range" if "range" in types else "ternary" if types & {"ternary", "optional"}
                      else "lpm" if "lpm" in types else "exact")
        aid, data = default if default is not None else (actions[0][1], [])
        t = {
            "name": name, "id": sum(len(p["tables"]) for p in self.doc["pipelines"]),
            "key": key, "match_type": match_type, "type": "simple", "max_size": max_size,
            "with_counters": with_counters, "support_timeout": False,
            "direct_meters": direct_meters, "action_ids": [a[1] for a in actions],
            "actions": [a[0] for a in actions], "base_default_next": base_default_next,
            "next_tables": next_tables or {a[0]: base_default_next for a in actions},
            "default_entry": {"action_id": aid, "action_const": default_const,
                              "action_data": [hex(d) for d in data],
                              "action_entry_const": default_const},
        }
        if entries is not None:
            t["entries"] = entries
        pipe["tables"].append(t)
        if pipe["init_table"] is None:
            pipe["init_table"] = name
        return t

    def conditional(self, pipeline: str, name: str, expression: dict, true_next: str | None,
                    false_next: str | None) -> dict:
        pipe = self._pipe(pipeline)
        c = {"name": name, "id": len(pipe["conditionals"]), "expression": expression,
             "true_next": true_next, "false_next": false_next}
        pipe["conditionals"].append(c)
        return c

    def _pipe(self, name: str) -> dict:
        return next(p for p in self.doc["pipelines"] if p["name"] == name)

    def calculation(self, name: str, algo: str, inputs: list) -> str:
        self.doc["calculations"].append({"name": name, "id": self._next_id("calculations"),
                                         "algo": algo, "input": inputs})
        return name

    def register(self, name: str, size: int, bitwidth: int) -> dict:
        self.doc["register_arrays"].append({"name": name, "id": self._next_id("register_arrays"),
                                            "size": size, "bitwidth": bitwidth})
        return {"type": "register_array", "value": name}


def key(match_type: str, header: str, field: str, mask: int | None = None) -> dict:
    return {"match_type": match_type, "name": f"{header}.{field}", "target": [header, field],
            "mask": hex(mask) if mask is not None else None}


def ethernet_ipv4_parser(b: ProgramBuilder) -> None:
    """Ethernet, then IPv4 when etherType is 0x0800; deparse both."""
    b.header("ethernet", ETHERNET)
    b.header("ipv4", IPV4)
    states = [
        {"name": "start", "id": 0, "parser_ops": [
            {"op": "extract", "parameters": [{"type": "regular", "value": "ethernet"}]}],
         "transition_key": [fld("ethernet", "etherType")],
         "transitions": [{"type": "hexstr", "value": "0x0800", "mask": None, "next_state": "parse_ipv4"},
                         {"type": "default", "value": None, "mask": None, "next_state": None}]},
        {"name": "parse_ipv4", "id": 1, "parser_ops": [
            {"op": "extract", "parameters": [{"type": "regular", "value": "ipv4"}]}],
         "transition_key": [], "transitions": [
             {"type": "default", "value": None, "mask": None, "next_state": None}]},
    ]
    b.set_parser(states, ["ethernet", "ipv4"])


def ipv4_checksum(b: ProgramBuilder, verify: bool, update: bool) -> None:
    fields = [fld("ipv4", f[0]) for f in IPV4 if f[0] != "hdrChecksum"]
    b.calculation("calc", "csum16", fields)
    b.doc["checksums"].append({
        "name": f"cksum_{len(b.doc['checksums'])}", "id": len(b.doc["checksums"]),
        "target": ["ipv4", "hdrChecksum"], "type": "generic", "calculation": "calc",
        "verify": verify, "update": update,
        "if_cond": expr("d2b", None, fld("ipv4", "$valid$"))})


def l3_router() -> dict:
    """The benchmark L3 program: LPM on ipv4.dstAddr, rewrite MACs, TTL-1, csum16 update."""
    b = ProgramBuilder()
    ethernet_ipv4_parser(b)
    drop = b.action("MyIngress.drop", [], [prim("mark_to_drop", {"type": "header",
                                                                 "value": "standard_metadata"})])
    fwd = b.action("MyIngress.ipv4_forward", [("dstAddr", 48), ("port", 9)], [
        prim("assign", fld("standard_metadata", "egress_spec"), param(1)),
        prim("assign", fld("ethernet", "srcAddr"), fld("ethernet", "dstAddr")),
        prim("assign", fld("ethernet", "dstAddr"), param(0)),
        prim("assign", fld("ipv4", "ttl"),
             masked(expr("+", fld("ipv4", "ttl"), hexstr(0xFF)), 8)),
    ])
    b.conditional("ingress", "node_2", expr("d2b", None, fld("ipv4", "$valid$")),
                  "MyIngress.ipv4_lpm", None)
    b.table("ingress", "MyIngress.ipv4_lpm", [key("lpm", "ipv4", "dstAddr")],
            [("MyIngress.ipv4_forward", fwd), ("MyIngress.drop", drop)], default=(drop, []))
    b._pipe("ingress")["init_table"] = "node_2"
    ipv4_checksum(b, verify=True, update=True)
    return b.doc


# The P4Info of ``l3_router`` (text format): what a P4Runtime client needs to
# write its routes when the program comes from here rather than the compiler.
L3_ROUTER_P4INFO = """
tables {
  preamble { id: 0x02000101 name: "MyIngress.ipv4_lpm" alias: "ipv4_lpm" }
  match_fields { id: 1 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: LPM }
  action_refs { id: 0x01000101 } action_refs { id: 0x01000102 }
  size: 1024
}
actions {
  preamble { id: 0x01000101 name: "MyIngress.ipv4_forward" alias: "ipv4_forward" }
  params { id: 1 name: "dstAddr" bitwidth: 48 }
  params { id: 2 name: "port" bitwidth: 9 }
}
actions { preamble { id: 0x01000102 name: "MyIngress.drop" alias: "drop" } }
"""


def register_lanes(lanes: int = 32, width: int = 32, size: int = 1024) -> dict:
    """A program adding ``lanes`` 32-bit values of a header into ``lanes`` registers."""
    b = ProgramBuilder()
    lane_fields = [["idx", 32, False]] + [[f"v{i}", width, False] for i in range(lanes)]
    b.header("agg", lane_fields)
    b.parse_only("agg")
    prims = []
    for i in range(lanes):
        reg = b.register(f"MyIngress.r{i}", size, width)
        tmp = b.scalar(f"tmp{i}", width)
        prims += [prim("register_read", tmp, reg, fld("agg", "idx")),
                  prim("assign", tmp, masked(expr("+", tmp, fld("agg", f"v{i}")), width)),
                  prim("register_write", reg, fld("agg", "idx"), tmp),
                  prim("assign", fld("agg", f"v{i}"), tmp)]
    prims.append(prim("assign", fld("standard_metadata", "egress_spec"),
                      fld("standard_metadata", "ingress_port")))
    aid = b.action("MyIngress.aggregate", [], prims)
    b.table("ingress", "tbl_aggregate", [], [("MyIngress.aggregate", aid)], default=(aid, []),
            default_const=True)
    return b.doc


PROBE: HeaderFields = [
    ["itype", 32, False], ["rid", 16, False], ["perr", 32, False], ["ckerr", 8, False],
    ["espec", 16, False], ["eport", 16, False], ["iport", 16, False], ["mcast", 16, False],
    ["plen", 32, False], ["x", 8, False]]
H: HeaderFields = [["a", 8, False], ["b", 8, False], ["c", 16, False], ["d", 16, False]]
SM = "standard_metadata"


def lifecycle_program() -> dict:
    """A program that exercises v1model's life cycle and reports it in a ``probe`` header.

    Parser: ``h`` (a, b, c, d: 6 bytes); ``a == 0xEE`` then extracts ``h2`` (8 bytes),
    ``a == 0xDD`` verifies ``b == 0`` (ParserInvalidArgument), ``a < 0x10`` accepts, any
    other ``a`` is NoMatch. ``h.d`` is a csum16 of a, b, c verified when ``a == 0xCC``.
    Ingress: on a first pass, table ``ingress.ctl`` (exact ``h.a``) picks one of the
    actions below; on a resubmitted or recirculated pass, ``ingress.again`` sends to
    port 7 with ``h.c = instance_type`` and ``h.b = meta.x`` (field list 1 keeps x).
    Egress: first-pass packets apply ``egress.ectl`` (exact ``h.a``), then every packet
    gets ``probe`` (made valid, emitted first) filled from standard_metadata.
    """
    b = ProgramBuilder()
    x = b.scalar("x", 8)
    b.header("h", H)
    b.header("h2", [["w", 64, False]])
    b.header("probe", PROBE)
    done = {"type": "default", "value": None, "mask": None, "next_state": None}
    b.set_parser([
        {"name": "start", "id": 0, "parser_ops": [
            {"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}],
         "transition_key": [fld("h", "a")], "transitions": [
             {"type": "hexstr", "value": "0xee", "mask": None, "next_state": "deep"},
             {"type": "hexstr", "value": "0xdd", "mask": None, "next_state": "check"},
             {"type": "hexstr", "value": "0xcc", "mask": None, "next_state": None},
             {"type": "hexstr", "value": "0x00", "mask": "0xf0", "next_state": None}]},
        {"name": "deep", "id": 1, "parser_ops": [
            {"op": "extract", "parameters": [{"type": "regular", "value": "h2"}]}],
         "transition_key": [], "transitions": [done]},
        {"name": "check", "id": 2, "parser_ops": [
            {"op": "verify", "parameters": [expr("==", fld("h", "b"), hexstr(0)), hexstr(6)]}],
         "transition_key": [], "transitions": [done]},
    ], ["probe", "h", "h2"])
    b.calculation("hcalc", "csum16", [fld("h", "a"), fld("h", "b"), fld("h", "c")])
    b.doc["checksums"].append({"name": "hck", "id": 0, "target": ["h", "d"], "type": "generic",
                               "calculation": "hcalc", "verify": True, "update": False,
                               "if_cond": expr("==", fld("h", "a"), hexstr(0xCC))})
    b.doc["field_lists"].append({"id": 1, "name": "field_list1",
                                 "elements": [{"type": "field", "value": ["scalars", "x"]}]})
    b.doc["learn_lists"].append({"id": 1, "name": "digest_t", "elements": [
        {"type": "field", "value": ["h", "a"]}, {"type": "field", "value": ["h", "b"]},
        {"type": "field", "value": [SM, "ingress_port"]}]})
    std = {"type": "header", "value": SM}
    espec = fld(SM, "egress_spec")
    a = {
        "fwd": b.action("ingress.fwd", [("port", 9)], [prim("assign", espec, param(0))]),
        "mc": b.action("ingress.mc", [("grp", 16)], [prim("assign", fld(SM, "mcast_grp"), param(0))]),
        "drop": b.action("ingress.drop", [], [prim("mark_to_drop", std)]),
        "mc_drop": b.action("ingress.mc_drop", [("grp", 16)], [
            prim("assign", fld(SM, "mcast_grp"), param(0)), prim("mark_to_drop", std)]),
        "clone": b.action("ingress.clone", [("session", 32)], [
            prim("assign", x, hexstr(0x5A)), prim("assign", espec, hexstr(1)),
            prim("clone_ingress_pkt_to_egress", param(0), hexstr(1))]),
        "resub": b.action("ingress.resub", [("v", 8)], [
            prim("assign", x, param(0)), prim("assign", espec, hexstr(1)),
            prim("resubmit", hexstr(1))]),
        "digest": b.action("ingress.digest", [], [
            prim("assign", espec, hexstr(1)), prim("generate_digest", hexstr(0x512), hexstr(1))]),
        "noop": b.action("NoAction", [], []),
    }
    b.conditional("ingress", "first_pass", expr("==", fld(SM, "instance_type"), hexstr(0)),
                  "ingress.ctl", "ingress.again")
    b.table("ingress", "ingress.ctl", [key("exact", "h", "a")],
            [(f"ingress.{n}", i) for n, i in a.items() if n != "noop"] + [("NoAction", a["noop"])],
            default=(a["fwd"], [1]))
    again = b.action("ingress.again_act", [], [
        prim("assign", espec, hexstr(7)),
        prim("assign", fld("h", "c"), masked(fld(SM, "instance_type"), 16)),
        prim("assign", fld("h", "b"), x)])
    b.table("ingress", "ingress.again", [], [("ingress.again_act", again)], default=(again, []))
    b._pipe("ingress")["init_table"] = "first_pass"
    e = {
        "eclone": b.action("egress.eclone", [("session", 32)], [
            prim("assign", x, hexstr(0x77)), prim("clone_egress_pkt_to_egress", param(0), hexstr(1))]),
        "edrop": b.action("egress.edrop", [], [prim("mark_to_drop", std)]),
        "recirc": b.action("egress.recirc", [("v", 8)], [
            prim("assign", x, param(0)), prim("recirculate", hexstr(1))]),
        "enoop": b.action("NoAction", [], []),
    }
    probe_fields = [("itype", "instance_type"), ("rid", "egress_rid"), ("perr", "parser_error"),
                    ("ckerr", "checksum_error"), ("espec", "egress_spec"), ("eport", "egress_port"),
                    ("iport", "ingress_port"), ("mcast", "mcast_grp"), ("plen", "packet_length")]
    probe = b.action("egress.probe", [], [prim("add_header", {"type": "header", "value": "probe"})] + [
        prim("assign", fld("probe", p), fld(SM, s)) for p, s in probe_fields] + [
        prim("assign", fld("probe", "x"), x)])
    b.conditional("egress", "egress_first", expr("==", fld(SM, "instance_type"), hexstr(0)),
                  "egress.ectl", "egress.probe_tbl")
    b.table("egress", "egress.ectl", [key("exact", "h", "a")],
            [(f"egress.{n}", i) for n, i in e.items() if n != "enoop"] + [("NoAction", e["enoop"])],
            default=(e["enoop"], []), base_default_next="egress.probe_tbl")
    b.table("egress", "egress.probe_tbl", [], [("egress.probe", probe)], default=(probe, []))
    b._pipe("egress")["init_table"] = "egress_first"
    return b.doc


def read_probe(packet: bytes) -> dict[str, int]:
    """The probe fields at the front of a packet of ``lifecycle_program``."""
    value, nbits = int.from_bytes(packet[:24], "big"), 192
    out = {}
    for name, width, _ in PROBE:
        nbits -= width
        out[name] = (value >> nbits) & ((1 << width) - 1)
    return out
