"""What BMv2 refuses (or crashes on) when it loads a JSON, checked once on the model.

Each rule follows behavioral-model's P4Objects.cpp (``init_objects`` and the ``init_*``
functions it calls, in that order): where BMv2 throws a ``json_exception`` the JSON is
refused, and where it looks a name or id up with ``unordered_map::at`` (or dereferences
what ``operator[]`` made up) and so aborts or misbehaves, it is refused too. p4lite is
stricter in a few places where BMv2 silently does something surprising (a duplicate
action id replaces the first action; an unknown next parse state ends the parse).
docs/p4lite.md lists every rule with the BMv2 behaviour behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from p4lite.bmv2json import values
from p4lite.bmv2json.model import (
    Action,
    Calculation,
    Checksum,
    FieldList,
    Parser,
    Pipeline,
    Program,
    Table,
)
from p4lite.bmv2json.refs import Refs
from p4lite.bmv2json.where import Where

MAX_MINOR_VERSION = 24
# BMv2's registered hash algorithms (bm_sim/calculations.cpp, simple_switch.cpp), plus
# the names p4c writes for v1model's HashAlgorithm (random, xor16, crc8).
KNOWN_HASHES = frozenset((
    "xxh64", "crc8", "crc16", "crc32", "crcCCITT", "cksum16", "csum16", "identity",
    "round_robin", "round_robin_consistent", "crc8_custom", "crc16_custom", "crc32_custom",
    "crc64_custom", "xor16", "xor32", "random", "toeplitz", "hash_ex", "bmv2_hash"))
MATCH_TYPES = frozenset(("exact", "lpm", "ternary", "valid", "range", "optional"))
TABLE_TYPES = frozenset(("simple", "indirect", "indirect_ws"))
PARSER_OPS = frozenset(("extract", "extract_VL", "set", "verify", "primitive", "shift",
                        "advance"))
TRANSITION_KEY_TYPES = frozenset(("field", "stack_field", "union_stack_field", "lookahead"))
# what BMv2's parse_match_key reads from a const entry's match_key element, by match type
MATCH_PARAM_KEYS = {"exact": ("key",), "valid": ("key",), "lpm": ("key", "prefix_length"),
                    "ternary": ("key", "mask"), "range": ("start", "end"),
                    "optional": ("key",)}
CALC_INPUT_TYPES = frozenset(("field", "hexstr", "header", "payload"))
# primitive -> (position of its list id parameter, list kind); simple_switch looks the id
# up with unordered_map::at when the packet is copied or the digest generated.
LIST_ID_PARAMS = {
    "clone_ingress_pkt_to_egress": (1, "field_list"),
    "clone_egress_pkt_to_egress": (1, "field_list"),
    "resubmit": (0, "field_list"),
    "recirculate": (0, "field_list"),
    "generate_digest": (1, "learn_list"),
}


def check_program(prog: Program) -> None:
    """Raise Bmv2JsonError on the first thing BMv2 would refuse or crash on."""
    _version(prog)
    refs = Refs.of(prog)
    _unique(((t.name, "header_types", i) for i, t in enumerate(prog.header_types)), "header type")
    for i, h in enumerate(prog.headers):
        w = Where("headers").index(i).named(h.name)
        if h.header_type not in refs.types:
            raise w.key("header_type").fail(f"unknown header type '{h.header_type}'")
    _unique(((h.name, "headers", i) for i, h in enumerate(prog.headers)), "header instance")
    header_ids = {h.id for h in prog.headers}
    for i, s in enumerate(prog.header_stacks):
        w = Where("header_stacks").index(i).named(s.name)
        if s.header_type is not None and s.header_type not in refs.types:
            raise w.key("header_type").fail(f"unknown header type '{s.header_type}'")
        for j, hid in enumerate(s.header_ids):
            if hid not in header_ids:
                raise w.key("header_ids").index(j).fail(f"unknown header id {hid}")
    _unions(prog, refs, header_ids)
    for i, (alias, target) in enumerate(prog.field_aliases or ()):
        refs.field(target, Where("field_aliases").index(i).named(alias))
    _pairs(prog.errors, "errors", "error")
    for i, e in enumerate(prog.enums):
        _pairs(e.entries, str(Where("enums").index(i).named(e.name)), "enum entry")
    _unique(((e.name, "enums", i) for i, e in enumerate(prog.enums)), "enum")
    for i, p in enumerate(prog.parsers):
        _parser(refs, p, Where("parsers").index(i).named(p.name))
    for i, d in enumerate(prog.deparsers):
        w = Where("deparsers").index(i).named(d.name).key("order")
        for j, hname in enumerate(d.order):
            refs.header(hname, w.index(j))
    for i, c in enumerate(prog.calculations):
        _calculation(refs, c, Where("calculations").index(i).named(c.name))
    for i, m in enumerate(prog.meter_arrays):
        w = Where("meter_arrays").index(i).named(m.name)
        if m.type not in ("packets", "bytes"):
            raise w.key("type").fail(f"invalid meter type '{m.type}'")
        if m.is_direct:
            if m.result_target is None:
                raise w.fail("a direct meter needs 'result_target'")
            refs.field(m.result_target, w.key("result_target"))
    _unique(((a.id, "actions", i) for i, a in enumerate(prog.actions)), "action id")
    for i, a in enumerate(prog.actions):
        _action(refs, a, Where("actions").index(i).named(a.name))
    _pipelines(refs, prog)
    for i, ck in enumerate(prog.checksums):
        _checksum(refs, ck, Where("checksums").index(i).named(ck.name))
    for kind, lists in (("learn_lists", prog.learn_lists), ("field_lists", prog.field_lists)):
        _unique(((fl.id, kind, i) for i, fl in enumerate(lists)), f"{kind[:-1]} id")
        for i, fl in enumerate(lists):
            _list(refs, fl, kind, Where(kind).index(i).named(fl.name))


def _version(prog: Program) -> None:
    meta = prog.meta
    if meta is None or "version" not in meta.json_keys:
        return
    version = meta.version
    w = Where("__meta__").key("version")
    if not (isinstance(version, list) and len(version) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in version)):
        raise w.fail(f"bad version {version!r}")
    if version[0] != 2 or version[1] > MAX_MINOR_VERSION:
        raise w.fail(f"unsupported JSON format version {version[0]}.{version[1]} "
                     f"(need 2.x with x <= {MAX_MINOR_VERSION})")


def _unique(items: Iterable[tuple[object, str, int]], what: str) -> None:
    seen: set[object] = set()
    for value, kind, i in items:
        if value in seen:
            raise Where(kind).index(i).fail(f"duplicate {what} {value!r}")
        seen.add(value)


def _pairs(pairs: tuple[tuple[str, int], ...], where: str, what: str) -> None:
    """BMv2's ErrorCodeMap/EnumMap ``add`` refuses a name or value given twice."""
    names: set[str] = set()
    nums: set[int] = set()
    for i, (name, value) in enumerate(pairs):
        if name in names or value in nums:
            raise Where(where).index(i).fail(f"duplicate {what} {name!r} = {value}")
        names.add(name)
        nums.add(value)


def _parser(refs: Refs, parser: Parser, where: Where) -> None:
    states = {s.name for s in parser.parse_states}
    if parser.init_state not in states:
        raise where.key("init_state").fail(f"unknown parse state '{parser.init_state}'")
    _unique(((s.name, str(where.key("parse_states")), i)
             for i, s in enumerate(parser.parse_states)), "parse state")
    for i, state in enumerate(parser.parse_states):
        sw = where.key("parse_states").index(i).named(state.name)
        for j, op in enumerate(state.parser_ops):
            _parser_op(refs, op.op, op.parameters, sw.key("parser_ops").index(j))
        for j, k in enumerate(state.transition_key):
            kw = sw.key("transition_key").index(j)
            kind = _typed_reference(refs, k, kw, TRANSITION_KEY_TYPES,
                                    f"invalid entry in parse state key: {k!r}")
            if kind == "lookahead":
                values.expression(refs, k, kw)
        for j, t in enumerate(state.transitions):
            if t.next_state is not None and t.next_state not in states:
                raise sw.key("transitions").index(j).key("next_state").fail(
                    f"unknown next state '{t.next_state}'")


def _unions(prog: Program, refs: Refs, header_ids: set[int | None]) -> None:
    """Union types name header types; unions and union stacks name their type and members
    by id (BMv2: ``get_header_union_type`` / ``get_header_union`` abort on unknown ones)."""
    union_types = {t.name for t in prog.header_union_types}
    for i, t in enumerate(prog.header_union_types):
        w = Where("header_union_types").index(i).named(t.name).key("headers")
        for j, (_, type_name) in enumerate(t.headers):
            if type_name not in refs.types:
                raise w.index(j).fail(f"unknown header type '{type_name}'")
    union_ids = {u.id for u in prog.header_unions}
    members: list[tuple[str, int, str, str, tuple[int, ...], set]] = [
        ("header_unions", i, u.name, u.union_type, u.header_ids, header_ids)
        for i, u in enumerate(prog.header_unions)]
    members += [("header_union_stacks", i, s.name, s.union_type, s.header_union_ids, union_ids)
                for i, s in enumerate(prog.header_union_stacks)]
    for kind, i, name, union_type, ids, known in members:
        w = Where(kind).index(i).named(name)
        if union_type not in union_types:
            raise w.key("union_type").fail(f"unknown header union type '{union_type}'")
        key = "header_ids" if kind == "header_unions" else "header_union_ids"
        for j, member in enumerate(ids):
            if member not in known:
                raise w.key(key).index(j).fail(f"unknown id {member}")


def _parser_op(refs: Refs, op: str, params: tuple, where: Where) -> None:
    if op not in PARSER_OPS:
        raise where.key("op").fail(f"parser op '{op}' not supported")
    pw = where.key("parameters")
    if op in ("extract", "extract_VL"):  # extract_VL: the target, then the length in bits
        _arity(params, 1 if op == "extract" else 2, op, where)
        if op == "extract_VL":
            values.expression(refs, params[1], pw.index(1))
        p = params[0]
        kind = p.get("type") if isinstance(p, dict) else None
        if kind == "regular":
            refs.header(p.get("value"), pw.index(0).key("value"))
        elif kind == "stack":
            refs.stack(p.get("value"), pw.index(0).key("value"))
        elif kind == "union_stack":
            value = p.get("value")
            if not (isinstance(value, list) and len(value) == 2
                    and value[0] in refs.union_stacks and isinstance(value[1], str)):
                raise pw.index(0).key("value").fail(
                    f"expected [header union stack, member], got {value!r}")
        else:
            raise pw.index(0).fail(f"extract type {kind!r} not supported")
    elif op == "set":
        _arity(params, 2, op, where)
        dest = params[0]
        if not isinstance(dest, dict) or dest.get("type") != "field":
            raise pw.index(0).fail("parser 'set' destination must be of type 'field'")
        refs.field(dest.get("value"), pw.index(0).key("value"))
        values.expression(refs, params[1], pw.index(1))
    elif op == "verify":
        _arity(params, 2, op, where)
        values.expression(refs, params[0], pw.index(0))
        error = params[1]
        if isinstance(error, int) and not isinstance(error, bool):
            if refs.errors and error not in refs.errors:
                raise pw.index(1).fail(f"invalid error code {error} in verify statement")
        else:
            values.expression(refs, error, pw.index(1))
    elif op == "primitive":
        _arity(params, 1, op, where)
        prim = params[0]
        if not isinstance(prim, dict) or not isinstance(prim.get("op"), str):
            raise pw.index(0).fail("expected a primitive call {op, parameters}")
        _primitive(refs, prim["op"], prim.get("parameters") or [], 0, pw.index(0))
    elif op in ("shift", "advance"):
        for j, p in enumerate(params):
            if not isinstance(p, int) or isinstance(p, bool):
                values.expression(refs, p, pw.index(j))


def _arity(params: tuple, count: int, op: str, where: Where) -> None:
    if len(params) != count:
        raise where.key("parameters").fail(
            f"'{op}' takes {count} parameter(s), got {len(params)}")


def _typed_reference(refs: Refs, item: object, where: Where, allowed: frozenset[str],
                     refusal: str) -> str | None:
    """Check one ``{"type", "value"}`` item of a transition key or calculation input: a
    type in ``allowed`` (else ``refusal``), and the header, field or stack field it
    names. Returns the type."""
    kind = item.get("type") if isinstance(item, dict) else None
    if kind not in allowed:
        raise where.fail(refusal)
    assert isinstance(item, dict)
    value = item.get("value")
    if kind == "field":
        refs.field(value, where.key("value"))
    elif kind == "header":
        refs.header(value, where.key("value"))
    elif kind == "stack_field":
        refs.stack_field(value, where.key("value"))
    return kind


def _calculation(refs: Refs, calc: Calculation, where: Where) -> None:
    for j, item in enumerate(calc.input):
        kind = item.get("type") if isinstance(item, dict) else None
        _typed_reference(refs, item, where.key("input").index(j), CALC_INPUT_TYPES,
                         f"unsupported input type {kind!r} for calculation '{calc.name}'")
    if calc.algo not in KNOWN_HASHES:
        raise where.key("algo").fail(f"unknown hash algorithm '{calc.algo}'")


def _action(refs: Refs, action: Action, where: Where) -> None:
    nparams = len(action.runtime_data)
    for j, prim in enumerate(action.primitives):
        _primitive(refs, prim.op, prim.parameters, nparams, where.key("primitives").index(j))


def _primitive(refs: Refs, op: str, params: tuple | list, nparams: int, where: Where) -> None:
    pw = where.key("parameters")
    for k, param in enumerate(params):
        values.parameter(refs, param, nparams, pw.index(k))
    list_param = LIST_ID_PARAMS.get(op)
    if list_param is None:
        return
    pos, kind = list_param
    if pos >= len(params):
        raise pw.fail(f"primitive '{op}' needs {pos + 1} parameters, got {len(params)}")
    param = params[pos]
    if not (isinstance(param, dict) and param.get("type") == "hexstr"):
        return
    list_id = _hex(param.get("value"), pw.index(pos))
    known = refs.field_lists if kind == "field_list" else refs.learn_lists
    if list_id == 0 and op in ("resubmit", "recirculate"):
        raise pw.index(pos).fail(f"primitive '{op}' with {kind} id 0: simple_switch reads "
                                 f"id 0 as 'no {op}'")
    if list_id not in known:
        ids = ", ".join(str(k) for k in sorted(known)) or "none"
        raise pw.index(pos).fail(
            f"primitive '{op}' names {kind} id {list_id}, which the JSON's {kind}s do not "
            f"have (ids: {ids}); BMv2 would abort (unordered_map::at) on the first packet "
            "that uses it")


def _hex(value: object, where: Where) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value, 16) if value.lstrip("-").lower().startswith("0x") else int(value, 0)
        except ValueError:
            pass
    raise where.fail(f"bad hex string {value!r}")


def _pipelines(refs: Refs, prog: Program) -> None:
    _unique(((p.name, "pipelines", i) for i, p in enumerate(prog.pipelines)), "pipeline")
    nodes: set[str] = set()
    for i, pipe in enumerate(prog.pipelines):
        w = Where("pipelines").index(i).named(pipe.name)
        names = [("tables", j, t.name) for j, t in enumerate(pipe.tables)]
        names += [("conditionals", j, c.name) for j, c in enumerate(pipe.conditionals)]
        for kind, j, name in names:
            if name in nodes:  # BMv2 keeps one control node per name
                raise w.key(kind).index(j).fail(f"duplicate node name '{name}'")
            nodes.add(name)
    for i, pipe in enumerate(prog.pipelines):
        _pipeline(refs, pipe, nodes, Where("pipelines").index(i).named(pipe.name))


def _pipeline(refs: Refs, pipe: Pipeline, nodes: set[str], where: Where) -> None:
    def node(name: str | None, w: Where) -> None:
        if name is not None and name not in nodes:  # BMv2: get_control_node (.at)
            raise w.fail(f"unknown next node '{name}'")

    node(pipe.init_table, where.key("init_table"))
    for j, table in enumerate(pipe.tables):
        _table(refs, table, node, where.key("tables").index(j).named(table.name))
    for j, cond in enumerate(pipe.conditionals):
        cw = where.key("conditionals").index(j).named(cond.name)
        values.expression(refs, cond.expression, cw.key("expression"))
        node(cond.true_next, cw.key("true_next"))
        node(cond.false_next, cw.key("false_next"))


def _table(refs: Refs, table: Table, node: Callable[[str | None, Where], None],
           where: Where) -> None:
    lpm = 0
    for k, key in enumerate(table.key):
        kw = where.key("key").index(k)
        if key.match_type not in MATCH_TYPES:
            raise kw.key("match_type").fail(f"invalid match type '{key.match_type}'")
        if key.match_type == "valid" and isinstance(key.target, str):
            refs.header(key.target, kw.key("target"))
        else:
            refs.field(key.target, kw.key("target"))
        lpm += key.match_type == "lpm"
    if lpm > 1:
        raise where.key("key").fail(f"table '{table.name}' features {lpm} LPM match fields")
    if table.type not in TABLE_TYPES:
        raise where.key("type").fail(f"invalid table type '{table.type}'")
    if "max_size" not in table.json_keys and not table.has_entries and table.json_keys:
        raise where.fail("table has neither 'max_size' nor 'entries'")
    if table.direct_meters is not None and table.direct_meters not in refs.meters:
        raise where.key("direct_meters").fail(f"unknown meter_array '{table.direct_meters}'")
    if len(table.action_ids) != len(table.actions):
        raise where.fail("'action_ids' and 'actions' differ in length")
    for j, (aid, aname) in enumerate(zip(table.action_ids, table.actions, strict=True)):
        action = refs.action(aid, where.key("action_ids").index(j))
        if action.name != aname:
            raise where.key("actions").index(j).fail(
                f"action id {aid} is '{action.name}', not '{aname}'")
    for label, target in table.next_tables:
        node(target, where.key("next_tables").key(label))
    node(table.base_default_next, where.key("base_default_next"))
    default = table.default_entry
    if default is not None:
        dw = where.key("default_entry")
        if table.type != "simple":
            raise dw.fail("only 'simple' tables can have a 'default_entry'")
        action = refs.action(default.action_id, dw.key("action_id"))
        if "action_data" in default.json_keys:
            _action_data(action, len(default.action_data), dw.key("action_data"))
    for j, entry in enumerate(table.entries):
        ew = where.key("entries").index(j)
        if table.type != "simple":
            raise ew.fail("only 'simple' tables can have 'entries'")
        if len(entry.match_key) != len(table.key):
            raise ew.key("match_key").fail(f"expected {len(table.key)} match fields, got "
                                           f"{len(entry.match_key)}")
        for k, (param, key) in enumerate(zip(entry.match_key, table.key, strict=True)):
            mw = ew.key("match_key").index(k)
            if param.match_type != key.match_type:
                raise mw.fail(f"match type '{param.match_type}', the key's is "
                              f"'{key.match_type}'")
            for needed in MATCH_PARAM_KEYS.get(param.match_type, ()):
                if needed not in param.json_keys:  # BMv2 would read "" (or 0) instead
                    raise mw.fail(f"missing '{needed}'")
        action = refs.action(entry.action_entry.action_id,
                             ew.key("action_entry").key("action_id"))
        _action_data(action, len(entry.action_entry.action_data),
                     ew.key("action_entry").key("action_data"))


def _action_data(action: Action, count: int, where: Where) -> None:
    if count != len(action.runtime_data):
        raise where.fail(f"action '{action.name}' takes {len(action.runtime_data)} "
                         f"argument(s), got {count}")


def _checksum(refs: Refs, ck: Checksum, where: Where) -> None:
    refs.field(ck.target, where.key("target"))
    if ck.type not in ("generic", "ipv4"):
        raise where.key("type").fail(f"checksum type '{ck.type}'")
    if ck.type == "generic" and ck.calculation not in refs.calculations:
        raise where.key("calculation").fail(f"unknown calculation {ck.calculation!r}")
    values.expression(refs, ck.if_cond, where.key("if_cond"))


def _list(refs: Refs, fl: FieldList, kind: str, where: Where) -> None:
    allowed = ("field", "hexstr") if kind == "field_lists" else ("field",)
    for j, el in enumerate(fl.elements):
        ew = where.key("elements").index(j)
        etype = el.get("type") if isinstance(el, dict) else None
        if etype not in allowed:
            raise ew.fail(f"element of type {etype!r} (BMv2 takes {' or '.join(allowed)})")
        if etype == "field":
            refs.field(el.get("value"), ew.key("value"))
