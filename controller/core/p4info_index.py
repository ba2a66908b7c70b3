"""Look P4Info objects up by full name, alias, unique dotted suffix, or id.

As p4runtime-shell's context: ``MyIngress.jobs``, ``jobs`` (the alias) and any
dotted suffix that names exactly one object all resolve to the same table. Match
fields and action parameters are indexed by name inside their table/action.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4.config.v1 import p4info_pb2

from p4hub.controller.core.errors import P4hubControllerError


class EntryError(P4hubControllerError):
    """A name, value or entry that does not fit the P4Info (the translation layer's
    error). The driver names the switch; one escaping to the API is internal."""


@dataclass(frozen=True, slots=True)
class FieldInfo:
    id: int
    name: str
    bitwidth: int
    match_type: int  # p4info_pb2.MatchField.EXACT, LPM, TERNARY, RANGE, OPTIONAL


@dataclass(frozen=True, slots=True)
class ParamInfo:
    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    name: str
    fields: tuple[FieldInfo, ...]
    action_ids: frozenset[int]
    size: int

    def field(self, name: str) -> FieldInfo:
        for f in self.fields:
            if f.name == name:
                return f
        raise EntryError(f"table {self.name} has no match field {name!r}; it has "
                         f"{', '.join(f.name for f in self.fields)}")

    def field_by_id(self, field_id: int) -> FieldInfo:
        for f in self.fields:
            if f.id == field_id:
                return f
        raise EntryError(f"table {self.name} has no match field id {field_id}")


@dataclass(frozen=True, slots=True)
class ActionInfo:
    id: int
    name: str
    params: tuple[ParamInfo, ...]

    def param(self, name: str) -> ParamInfo:
        for prm in self.params:
            if prm.name == name:
                return prm
        raise EntryError(f"action {self.name} has no parameter {name!r}")


@dataclass(frozen=True, slots=True)
class CounterInfo:
    id: int
    name: str
    size: int


@dataclass(frozen=True, slots=True)
class RegisterInfo:
    id: int
    name: str
    size: int
    bitwidth: int  # of a bitstring cell (0 for other cell types, which p4hub does not read)


class P4InfoIndex:
    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.tables = [_table(t) for t in p4info.tables]
        self.actions = [_action(a) for a in p4info.actions]
        self.counters = [CounterInfo(c.preamble.id, c.preamble.name, c.size) for c in p4info.counters]
        self.registers = [RegisterInfo(r.preamble.id, r.preamble.name, r.size,
                                       r.type_spec.bitstring.bit.bitwidth)
                          for r in p4info.registers]
        self._names: dict[str, dict[str, list]] = {}
        self._ids: dict[int, object] = {}
        aliases = {
            pre.id: pre.alias
            for group in (p4info.tables, p4info.actions, p4info.counters, p4info.registers)
            for pre in (obj.preamble for obj in group)
        }
        for kind, objects in (("table", self.tables), ("action", self.actions),
                              ("counter", self.counters), ("register", self.registers)):
            names = self._names.setdefault(kind, {})
            for obj in objects:
                self._ids[obj.id] = obj
                for key in _lookup_keys(obj.name, aliases.get(obj.id, "")):
                    names.setdefault(key, []).append(obj)

    def table(self, name: str) -> TableInfo:
        return self._resolve("table", name)  # type: ignore[return-value]

    def action(self, name: str) -> ActionInfo:
        return self._resolve("action", name)  # type: ignore[return-value]

    def counter(self, name: str) -> CounterInfo:
        return self._resolve("counter", name)  # type: ignore[return-value]

    def register(self, name: str) -> RegisterInfo:
        return self._resolve("register", name)  # type: ignore[return-value]

    def by_id(self, obj_id: int) -> TableInfo | ActionInfo | CounterInfo | RegisterInfo:
        obj = self._ids.get(obj_id)
        if obj is None:
            raise EntryError(f"no P4Info object with id {obj_id:#x}")
        return obj  # type: ignore[return-value]

    def _resolve(self, kind: str, name: str) -> object:
        hits = self._names[kind].get(name, [])
        exact = [obj for obj in hits if obj.name == name]
        if exact:
            return exact[0]
        unique = {id(obj): obj for obj in hits}
        if len(unique) == 1:
            return next(iter(unique.values()))
        if not unique:
            raise EntryError(f"no {kind} named {name!r} in the P4Info")
        names = sorted(obj.name for obj in unique.values())
        raise EntryError(f"{kind} name {name!r} is ambiguous: {', '.join(names)}")


def _lookup_keys(name: str, alias: str) -> set[str]:
    parts = name.split(".")
    keys = {".".join(parts[i:]) for i in range(len(parts))}
    if alias:
        keys.add(alias)
    return keys


def _table(t: p4info_pb2.Table) -> TableInfo:
    fields = tuple(FieldInfo(f.id, f.name, f.bitwidth, f.match_type) for f in t.match_fields)
    return TableInfo(t.preamble.id, t.preamble.name, fields,
                     frozenset(ref.id for ref in t.action_refs), t.size)


def _action(a: p4info_pb2.Action) -> ActionInfo:
    params = tuple(ParamInfo(prm.id, prm.name, prm.bitwidth) for prm in a.params)
    return ActionInfo(a.preamble.id, a.preamble.name, params)
