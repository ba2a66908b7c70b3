"""Compiling a BMv2 pipeline (tables and conditionals) into node functions.

Every table and conditional becomes ``def node(F, P)`` returning the next node
function (or None at the end of the control); the core runs
``while n is not None: n = n(F, P)``. Table nodes compute their key straight
from field slots and look it up in the TableState's structures (see
tables.py); the entry found carries its action function, action data and next
node, all resolved at load or insert time.

Loading produces an immutable TableSpec per table (``build_table``, then
``table_setup``, which validates the default action and const entries); each
runtime makes its own TableState from it (``new_table`` and ``setup_table``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from p4lite.bmv2json.model import (
    Action,
    ActionEntry,
    Conditional,
    DefaultEntry,
    Table,
    TableKey,
)
from p4lite.bmv2json.model import TableEntry as JsonTableEntry
from p4lite.switch.core.codegen import CodeGen
from p4lite.switch.core.program import fail, parse_hexstr
from p4lite.switch.core.runtime_api import (
    ActionCall,
    MatchField,
    SwitchRuntimeError,
    TableEntry,
    bmv2_lpm,
)
from p4lite.switch.core.tables import (
    ActionInfo,
    Entry,
    KeyElem,
    TableSpec,
    TableState,
    table_kind,
)

_MATCH_TYPES = {"exact", "lpm", "ternary", "range", "valid", "optional"}


def _key_elem(gen: CodeGen, k: TableKey, where: str) -> tuple[KeyElem, str]:
    mt = k.match_type
    if mt not in _MATCH_TYPES:
        raise fail(where, f"match type '{mt}' is not supported by p4lite")
    if mt == "optional":
        mt = "ternary"
    target = k.target
    name = k.name or (".".join(target) if isinstance(target, list) else str(target))
    if mt == "valid" and isinstance(target, str):
        slot = gen.layout.header(target, where).valid_slot
    else:
        slot = gen.layout.field_slot(target, where)
    width = gen.layout.width[slot]
    code = f"F[{slot}]"
    mask = parse_hexstr(k.mask, where) if k.mask is not None else None
    if gen.layout.signed[slot] or mask is not None:
        code = f"(F[{slot}] & {((1 << width) - 1) if mask is None else mask})"
    return KeyElem(mt, name, width, mask), code


def _lookup_lines(t: TableSpec, codes: list[str], names: dict[str, str]) -> list[str]:
    if not t.keys:
        return ["_e = None"]
    kind = table_kind(t.keys)
    if kind == "exact":
        key = codes[0] if len(codes) == 1 else "(" + ", ".join(codes) + ",)"
        return [f"_e = {names['exact']}.get({key})"]
    if kind == "lpm":
        exacts = [c for c, k in zip(codes, t.keys, strict=True) if k.match_type != "lpm"]
        lpm = next(c for c, k in zip(codes, t.keys, strict=True) if k.match_type == "lpm")
        probe = "_k >> _sh" if not exacts else "(" + ", ".join(exacts) + ", _k >> _sh)"
        return [f"_k = {lpm}", "_e = None", f"for _sh, _d in {names['lpm']}:",
                f"    _e = _d.get({probe})", "    if _e is not None:", "        break"]
    parts: list[str] = []
    ranges: list[str] = []
    shift = 0
    for code, k in reversed(list(zip(codes, t.keys, strict=True))):
        if k.match_type == "range":
            ranges.insert(0, code)
        else:
            parts.append(f"({code} << {shift})" if shift else code)
        shift += k.width
    lines = [f"_K = {' | '.join(parts) if parts else '0'}", "_e = None"]
    if ranges:
        lines += [f"_R = ({', '.join(ranges)},)", f"for _m, _v, _rg, _c in {names['ternary']}:",
                  "    if _K & _m == _v and all(lo <= x <= hi for x, (lo, hi) in zip(_R, _rg)):",
                  "        _e = _c", "        break"]
    else:
        lines += [f"for _m, _v, _rg, _c in {names['ternary']}:", "    if _K & _m == _v:",
                  "        _e = _c", "        break"]
    return lines


def table_source(gen: CodeGen, fname: str, t: TableSpec, codes: list[str],
                 meter_target: int | None, meter_by_bytes: bool = False) -> str:
    names = {"exact": gen.bind_state(("exact", t.name), "ex"),
             "lpm": gen.bind_state(("lpm", t.name), "lpm"),
             "ternary": gen.bind_state(("ternary", t.name), "tern")}
    tbl = gen.bind_state(("table", t.name), "tbl")
    body = _lookup_lines(t, codes, names)
    body += ["if _e is None:", f"    _e = {tbl}.default", "    _e.fn(F, P, _e.args)",
             "    return _e.next"]
    if t.with_counters:
        body += ["_e.bytes += P.ilen", "_e.packets += 1"]
    if meter_target is not None:
        size = "P.ilen" if meter_by_bytes else "1"
        body += ["_mt = _e.meter", f"F[{meter_target}] = _mt.execute(P.now, {size}) if _mt else 0"]
    body += ["_e.fn(F, P, _e.args)", "return _e.next"]
    return "\n".join([f"def {fname}(F, P):"] + ["    " + line for line in body]) + "\n"


def _default_action(t: TableSpec | TableState, ids: dict[int, str],
                    d: DefaultEntry | ActionEntry, where: str) -> ActionCall:
    aid = d.action_id
    if aid not in ids:
        raise fail(where, f"default action id {aid} is not an action of the table")
    data = tuple(parse_hexstr(x, where) for x in d.action_data)
    return ActionCall(ids[aid], data)


def _const_entries(t: TableSpec | TableState, ids: dict[int, str],
                   entries: Sequence[JsonTableEntry], where: str) -> list[TableEntry]:
    prios = [i + 1 if e.priority is None else e.priority for i, e in enumerate(entries)]
    top = max(prios, default=0) + 1
    out: list[TableEntry] = []
    longest: dict[tuple, tuple[int, int]] = {}  # lpm table: fields -> (BMv2 prefix, index)
    for i, e in enumerate(entries):
        w = f"{where} entries[{i}]"
        fields = []
        bmv2_plen = 0
        for k, m in zip(t.keys, e.match_key, strict=False):
            if k.match_type == "range":  # a range entry has start/end and no key
                fields.append(MatchField("range", parse_hexstr(m.start, w),
                                         high=parse_hexstr(m.end, w)))
                continue
            key = m.key
            value = int(key) if isinstance(key, bool) else parse_hexstr(key, w)  # valid: bool
            if k.match_type == "lpm":
                plen = m.prefix_length
                if plen is None:
                    raise fail(w, "missing 'prefix_length'")
                bmv2_plen = plen
                try:  # BMv2 counts p4c's prefix_length on the byte-padded key
                    fields.append(bmv2_lpm(value, plen, k.width))
                except ValueError as exc:
                    raise fail(w, str(exc)) from None
            elif k.match_type == "ternary":
                mask = parse_hexstr(m.mask, w)
                fields.append(MatchField("ternary", value & mask, mask=mask))
            else:
                fields.append(MatchField(k.match_type, value))
        action = _default_action(t, ids, e.action_entry, w)
        # JSON priority: smaller wins; runtime_api priority: larger wins.
        prio = top - prios[i] if table_kind(t.keys) == "ternary" else 0
        entry = TableEntry(t.name, tuple(fields), action, prio)
        if table_kind(t.keys) == "lpm":
            # prefixes within the pad bits all become /0 (bmv2_lpm); on BMv2 they all
            # match everything and the longest wins, so the others can never match
            seen = longest.get(entry.match)
            if seen is not None and seen[0] != bmv2_plen:  # (equal: a true duplicate)
                if seen[0] < bmv2_plen:
                    out[seen[1]] = entry
                    longest[entry.match] = (bmv2_plen, seen[1])
                continue
            longest[entry.match] = (bmv2_plen, len(out))
        out.append(entry)
    return out


def build_table(gen: CodeGen, js: Table, actions_by_id: dict[int, tuple[Action, str]],
                meters: dict) -> tuple[TableSpec, list[str], int | None]:
    """The table's spec (next nodes and defaults not set yet: table_setup), its key
    sources and its direct meter's target slot. ``actions_by_id``: id -> (JSON action,
    generated function name). The model has checked the action ids, the key fields and
    the direct meter's name."""
    name = js.name
    where = f"table '{name}'"
    if js.type != "simple":
        raise fail(where, f"table type '{js.type}' (action profiles) is not supported by p4lite")
    elems = [_key_elem(gen, k, f"{where} key {i}") for i, k in enumerate(js.key)]
    keys, codes = [e[0] for e in elems], [e[1] for e in elems]
    infos: dict[str, tuple[str, int, tuple[int, ...], str]] = {}
    for aid, aname in zip(js.action_ids, js.actions, strict=True):
        act, fname = actions_by_id[aid]
        widths = tuple(rd.bitwidth for rd in act.runtime_data)
        infos[aname] = (aname, aid, widths, fname)
    meter_target = None
    dm = js.direct_meters
    if dm:
        if dm not in meters:
            raise fail(where, f"meter '{dm}' is not a direct meter")
        meter_target = meters[dm]
    spec = TableSpec(name, tuple(keys), tuple(infos.values()), js.max_size or 0,
                     js.with_counters, bool(dm))
    return spec, codes, meter_target


def table_setup(spec: TableSpec, js: Table, node_names: dict[str, str],
                fused: bool = False) -> TableSpec:
    """``spec`` with its next nodes, default action and const entries, validated (as a
    runtime will install them, on a scratch TableState that is then dropped). A table
    fused into its pipeline's code (fixed action) keeps no next pointers."""
    where = f"table '{spec.name}'"
    nxt = dict(js.next_tables)

    def node(name: str | None) -> str | None:  # the model has checked that it exists
        return None if name is None or fused else node_names[name]

    base = node(js.base_default_next)
    use_hit_miss = "__HIT__" in nxt or "__MISS__" in nxt
    hit = miss = None
    if use_hit_miss:
        hit, miss = node(nxt.get("__HIT__")), node(nxt.get("__MISS__"))
    by_action = tuple((a[0], node(nxt[a[0]]) if a[0] in nxt else base) for a in spec.actions)
    scratch = new_table(spec)  # validation only: what setup_table will do per runtime
    scratch.actions.update({a[0]: ActionInfo(a[0], a[1], list(a[2]), _no_action)
                            for a in spec.actions})
    ids = {a[1]: a[0] for a in spec.actions}
    initial = None
    default_const = False
    d = js.default_entry
    if d is not None:
        try:
            initial = _default_action(spec, ids, d, f"{where} default_entry")
            scratch.set_default(initial, internal=True)
        except SwitchRuntimeError as exc:
            raise fail(where, f"bad default entry: {exc.message}") from None
        default_const = d.action_const
    const: list[TableEntry] = []
    entries = js.entries
    if entries:
        try:
            const = _const_entries(spec, ids, entries, where)
            for e in const:
                scratch.add(e, internal=True)
        except SwitchRuntimeError as exc:
            raise fail(where, f"bad const entry: {exc.message}") from None
    return replace(spec, use_hit_miss=use_hit_miss, hit_next=hit, miss_next=miss,
                   next_by_action=by_action, miss_default_next=miss if use_hit_miss else base,
                   initial_default=initial, default_const=default_const,
                   const_entries=tuple(const))


def new_table(spec: TableSpec) -> TableState:
    """An empty TableState for ``spec``: its lookup structures exist (generated code
    binds them), its actions, next nodes and entries come with ``setup_table``."""
    return TableState(spec.name, list(spec.keys), {}, spec.max_size, spec.with_counters,
                      spec.has_meter)


def setup_table(t: TableState, spec: TableSpec, ns: dict[str, Any]) -> None:
    """Resolve ``spec``'s action functions and next nodes in a runtime's namespace
    ``ns``, then install the default action and const entries (validated at load)."""
    t.actions.update({name: ActionInfo(name, aid, list(widths), ns[fname])
                      for name, aid, widths, fname in spec.actions})

    def node(name: str | None) -> Any:
        return None if name is None else ns[name]

    t.use_hit_miss = spec.use_hit_miss
    t.hit_next, t.miss_next = node(spec.hit_next), node(spec.miss_next)
    t.next_by_action = {a: node(n) for a, n in spec.next_by_action}
    t.initial_default = spec.initial_default
    t.default_const = spec.default_const
    if spec.initial_default is not None:
        t.set_default(spec.initial_default, internal=True)
    else:  # no default entry: a miss runs nothing (BMv2), until one is set
        t.default = Entry((), ActionCall(""), 0, _no_action, node(spec.miss_default_next), -1, ())
    t.const_entries = list(spec.const_entries)
    if t.const_entries:
        reinstall_const(t)
        t.const = True


def _no_action(F: list, P: object, A: tuple) -> None:
    return None


def reinstall_const(t: TableState) -> None:
    for e in t.const_entries:
        t.add(e, internal=True)


def fixed_action_body(gen: CodeGen, js: Table, action_fnames: dict[int, str],
                      node_names: dict[str, str]) -> tuple[list[str], str | None] | None:
    """A keyless table whose const default can never change (p4c's hidden ``tbl_*`` for
    action calls in a control body) runs its action's body with the data bound, then
    goes to a constant next node: (body lines, next node name), or None if the table
    does not qualify."""
    d = js.default_entry
    if js.key or d is None or not d.action_const:
        return None
    if js.with_counters or js.direct_meters or js.entries:
        return None
    aid = d.action_id
    source = gen.sources.get(action_fnames.get(aid, ""))
    if source is None or aid not in js.action_ids:
        return None
    action = js.actions[js.action_ids.index(aid)]
    nxt = dict(js.next_tables)
    target = nxt.get("__MISS__") if ("__HIT__" in nxt or "__MISS__" in nxt) else nxt.get(
        action, js.base_default_next)
    where = f"table '{js.name}' default_entry"
    args = gen.bind(tuple(parse_hexstr(x, where) for x in d.action_data), "args")
    header, *body = source.rstrip("\n").split("\n")
    if not header.endswith("(F, P, A):"):
        return None
    lines = [line[4:] for line in body if line.strip() != "pass"]
    if any("A[" in line for line in lines):
        lines.insert(0, f"A = {args}")
    return lines, target


def table_successors(js: Table) -> list[str]:
    """Every node a table may continue to (the entry hit decides which)."""
    out = [n for _, n in js.next_tables if n is not None]
    if js.base_default_next is not None:
        out.append(js.base_default_next)
    return sorted(set(out))


def conditional_parts(gen: CodeGen, c: Conditional) -> tuple[str, str | None, str | None]:
    """(Python test, true next, false next) of a JSON conditional (the model has checked
    that the next nodes exist)."""
    where = f"conditional '{c.name}'"
    e = c.expression
    if isinstance(e, dict) and "op" in e:
        e = {"type": "expression", "value": e}
    return gen.expr(e, where), c.true_next, c.false_next
