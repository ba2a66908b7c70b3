"""Name and id lookups over a loaded Program: what BMv2's P4Objects resolves while it
loads a JSON (header and field names, stacks, actions by id, control nodes, ...).

BMv2 looks most of these up with ``unordered_map::at`` or ``get_*`` and either throws a
``json_exception`` or aborts the process with ``std::out_of_range``; ``Refs`` answers the
same questions so check.py can refuse the JSON with a message instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4lite.bmv2json.model import Action, HeaderType, Program
from p4lite.bmv2json.where import Where

# v1model's field aliases, used when a JSON has none (p4c always writes them).
V1MODEL_ALIASES = {
    "queueing_metadata.enq_timestamp": ("standard_metadata", "enq_timestamp"),
    "queueing_metadata.enq_qdepth": ("standard_metadata", "enq_qdepth"),
    "queueing_metadata.deq_timedelta": ("standard_metadata", "deq_timedelta"),
    "queueing_metadata.deq_qdepth": ("standard_metadata", "deq_qdepth"),
    "intrinsic_metadata.ingress_global_timestamp": ("standard_metadata", "ingress_global_timestamp"),
    "intrinsic_metadata.egress_global_timestamp": ("standard_metadata", "egress_global_timestamp"),
    "intrinsic_metadata.mcast_grp": ("standard_metadata", "mcast_grp"),
    "intrinsic_metadata.egress_rid": ("standard_metadata", "egress_rid"),
    "intrinsic_metadata.priority": ("standard_metadata", "priority"),
}
# standard_metadata fields simple_switch keeps whether or not the JSON declares them
# (older JSON lacks some; p4lite's switch gives them hidden slots).
V1MODEL_STANDARD_FIELDS = frozenset((
    "ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length",
    "enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth", "ingress_global_timestamp",
    "egress_global_timestamp", "mcast_grp", "egress_rid", "checksum_error", "parser_error",
    "priority"))
STANDARD_HEADER = "standard_metadata"
VALID_FIELD = "$valid$"  # BMv2 gives every header type this hidden field


@dataclass(frozen=True, slots=True)
class Refs:
    program: Program
    types: dict[str, HeaderType]
    type_fields: dict[str, frozenset[str]]  # header type -> its field names
    header_types: dict[str, str]  # header instance -> header type name
    stack_types: dict[str, str | None]  # header stack -> element header type name
    aliases: dict[str, tuple[str, str]]
    actions: dict[int, Action]
    calculations: frozenset[str]
    registers: frozenset[str]
    counters: frozenset[str]
    meters: frozenset[str]
    externs: frozenset[str]
    unions: frozenset[str]
    union_stacks: frozenset[str]
    field_lists: frozenset[int]
    learn_lists: frozenset[int]
    errors: frozenset[int]

    @staticmethod
    def of(prog: Program) -> Refs:
        aliases = (V1MODEL_ALIASES if prog.field_aliases is None
                   else {a: target for a, target in prog.field_aliases})
        return Refs(
            program=prog,
            types={t.name: t for t in prog.header_types},
            type_fields={t.name: frozenset(f.name for f in t.fields) for t in prog.header_types},
            header_types={h.name: h.header_type for h in prog.headers},
            stack_types={s.name: s.header_type for s in prog.header_stacks},
            aliases=aliases,
            actions={a.id: a for a in prog.actions},
            calculations=frozenset(c.name for c in prog.calculations),
            registers=frozenset(r.name for r in prog.register_arrays),
            counters=frozenset(c.name for c in prog.counter_arrays),
            meters=frozenset(m.name for m in prog.meter_arrays),
            externs=frozenset(e.name for e in prog.extern_instances),
            unions=frozenset(u.name for u in prog.header_unions),
            union_stacks=frozenset(u.name for u in prog.header_union_stacks),
            field_lists=frozenset(f.id for f in prog.field_lists),
            learn_lists=frozenset(f.id for f in prog.learn_lists),
            errors=frozenset(v for _, v in prog.errors),
        )

    def header(self, name: object, where: Where) -> str:
        """The header type of instance ``name`` (BMv2: "No header instance ... was defined")."""
        if not isinstance(name, str) or name not in self.header_types:
            raise where.fail(f"unknown header instance {name!r}")
        return self.header_types[name]

    def stack(self, name: object, where: Where) -> str | None:
        if not isinstance(name, str) or name not in self.stack_types:
            raise where.fail(f"unknown header stack {name!r}")
        return self.stack_types[name]

    def field(self, ref: object, where: Where) -> None:
        """``[header, field]`` names a field (aliases resolved, ``$valid$`` included)."""
        if not (isinstance(ref, (list, tuple)) and len(ref) == 2
                and all(isinstance(x, str) for x in ref)):
            raise where.fail(f"bad field reference {ref!r}")
        hname, fname = ref
        alias = self.aliases.get(f"{hname}.{fname}")
        if alias is not None:
            hname, fname = alias
        if hname == STANDARD_HEADER and fname in V1MODEL_STANDARD_FIELDS:
            return
        self.type_field(self.header(hname, where), fname, f"header '{hname}'", where)

    def stack_field(self, ref: object, where: Where) -> None:
        if not (isinstance(ref, (list, tuple)) and len(ref) == 2
                and all(isinstance(x, str) for x in ref)):
            raise where.fail(f"bad stack field reference {ref!r}")
        tname = self.stack(ref[0], where)
        if tname is not None:
            self.type_field(tname, ref[1], f"header stack '{ref[0]}'", where)

    def type_field(self, tname: str, fname: str, owner: str, where: Where) -> None:
        names = self.type_fields.get(tname)
        if names is None:
            raise where.fail(f"unknown header type '{tname}'")
        if fname not in names and fname != VALID_FIELD:
            raise where.fail(f"{owner} has no field '{fname}'")

    def action(self, aid: int, where: Where) -> Action:
        action = self.actions.get(aid)
        if action is None:
            raise where.fail(f"action id {aid} names no action")
        return action


