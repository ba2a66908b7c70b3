"""Where P4 data lives in BMv2: header types, header instances, stacks and scalars.

Naming follows p4c's bmv2 back end:
- the headers struct's fields become header instances named after the field
  (``hdr.ipv4`` -> ``ipv4``; a stack ``hdr.vlan`` -> ``vlan[0]``, ``vlan[1]``);
- ``standard_metadata`` is its own metadata instance, padded with ``_padding``;
- scalar fields of the user metadata go to ``scalars`` as ``userMetadata.<f>``
  (nested structs are flattened as ``userMetadata._<a>_<b><n>``, as p4c's
  FlattenInterfaceStructs does); locals go to ``scalars`` too;
- ``scalars_0`` is padded to whole bytes with ``_padding_0``.
"""

from __future__ import annotations

from typing import Any

from p4lite.compiler.checks.bindings import Binding, FieldB, HeaderB, StackB, StructB, UnionB
from p4lite.compiler.checks.types import (
    BitT,
    BoolT,
    EnumT,
    ErrorT,
    HeaderT,
    P4Type,
    StackT,
    StructT,
    TupleT,
    UnionT,
    VarbitT,
    is_scalar,
    width_of,
)
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.lowering.names import NameGen

Json = dict[str, Any]
SCALARS = "scalars"
STANDARD_METADATA = "standard_metadata"


class Storage:
    """Collects header types, instances, stacks and scalar fields in creation order."""

    def __init__(self) -> None:
        # a tuple local's type as a struct of fields f0, f1, ... (as p4c's
        # EliminateTuples), one per tuple type so that two such locals have one type
        self.tuple_structs: dict[str, StructT] = {}
        self._types: dict[str, list[list[Any]]] = {}
        self._max_length: dict[str, int] = {}  # header types with a varbit field
        self._type_order: list[str] = []
        self.headers: list[tuple[str, str, bool]] = []  # (instance, type name, metadata)
        self.stacks: list[tuple[str, str, list[str]]] = []
        self.union_types: dict[str, UnionT] = {}
        self.unions: list[tuple[str, str, list[str]]] = []  # (instance, type, member headers)
        self.union_stacks: list[tuple[str, str, list[str]]] = []  # (name, type, unions)
        self.scalars: list[list[Any]] = []
        self._scalar_names: set[str] = set()
        self._instance_names = NameGen()
        self.header_by_instance: dict[str, HeaderT] = {}
        self._flatten_counter = 0

    # ------------------------------------------------------------- creation
    def add_standard_metadata(self, t: StructT) -> HeaderB:
        fields = [[name, width_of(ft), False] for name, ft in t.fields]
        _pad(fields, "_padding")
        self._types[STANDARD_METADATA] = fields
        self._type_order.append(STANDARD_METADATA)
        self.headers.append((STANDARD_METADATA, STANDARD_METADATA, True))
        self._instance_names.reserve(STANDARD_METADATA)
        header_t = HeaderT(STANDARD_METADATA, list(t.fields))
        self.header_by_instance[STANDARD_METADATA] = header_t
        # Expose it as a struct so fields keep their P4 types (error, bool).
        return HeaderB(STANDARD_METADATA, header_t, metadata=True)

    def add_header(self, name: str, t: HeaderT, metadata: bool = False) -> HeaderB:
        # a varbit field's length is whole bytes (BMv2's extract_VL), so the rest must be
        total = sum(width_of(ft) for _, ft in t.fields if not isinstance(ft, VarbitT))
        if metadata and any(isinstance(ft, VarbitT) for _, ft in t.fields):
            raise not_supported(f"a header with a varbit field ({t.name}) as metadata",
                                t.decl.loc if t.decl else None)
        if not metadata and total % 8:
            # BMv2 extracts and emits whole bytes; p4c rejects such headers too.
            raise CompileError(f"header {t.name} is {total} bits long, not a whole number of "
                               "bytes", t.decl.loc if t.decl else None)
        self._add_type(t)
        name = self._instance_names.fresh(name)
        self.headers.append((name, t.name, metadata))
        self.header_by_instance[name] = t
        return HeaderB(name, t, metadata)

    def add_union(self, name: str, t: UnionT, *, fresh: bool = True) -> UnionB:
        if fresh:
            name = self._instance_names.fresh(name)
        self.union_types.setdefault(t.name, t)
        members = {m: self.add_header(f"{name}.{m}", mt) for m, mt in t.members()}
        self.unions.append((name, t.name, [h.instance for h in members.values()]))
        return UnionB(name, t, members)

    def add_stack(self, name: str, t: StackT) -> StackB:
        name = self._instance_names.fresh(name)
        if isinstance(t.element, UnionT):
            unions = [self.add_union(f"{name}[{i}]", t.element, fresh=False).instance
                      for i in range(t.size)]
            self.union_stacks.append((name, t.element.name, unions))
            return StackB(name, t)
        elements = [self.add_header(f"{name}[{i}]", t.element).instance for i in range(t.size)]
        self.stacks.append((name, t.element.name, elements))
        return StackB(name, t)

    def add_scalar(self, name: str, t: P4Type) -> FieldB:
        base, n = name, 0
        while name in self._scalar_names:
            name = f"{base}_{n}"
            n += 1
        self._scalar_names.add(name)
        self.scalars.append([name, width_of(t), isinstance(t, BitT) and t.signed])
        return FieldB(SCALARS, name, t)

    def bind_headers_struct(self, t: StructT, prefix: str = "") -> StructB:
        """Instances for the parser's ``out H hdr`` struct (and nested structs)."""
        members: dict[str, Binding] = {}
        for fname, ftype in t.fields:
            name = f"{prefix}{fname}"
            if isinstance(ftype, HeaderT):
                members[fname] = self.add_header(name, ftype)
            elif isinstance(ftype, UnionT):
                members[fname] = self.add_union(name, ftype)
            elif isinstance(ftype, StackT):
                members[fname] = self.add_stack(name, ftype)
            elif isinstance(ftype, StructT):
                members[fname] = self.bind_headers_struct(ftype, f"{name}_")
            elif is_scalar(ftype):
                members[fname] = self.add_scalar(f"{name}", ftype)
            else:
                raise not_supported(f"field {fname} of type {ftype} in the headers struct",
                                    _field_loc(t, fname))
        return StructB(t, members)

    def bind_user_metadata(self, t: StructT) -> StructB:
        """Scalars for the user metadata struct, flattened like p4c."""
        nested = any(isinstance(ft, StructT) for _, ft in t.fields)
        return self._bind_metadata_struct(t, [], nested)

    def _bind_metadata_struct(self, t: StructT, path: list[str], flatten: bool) -> StructB:
        members: dict[str, Binding] = {}
        for fname, ftype in t.fields:
            sub = path + [fname]
            if isinstance(ftype, StructT):
                members[fname] = self._bind_metadata_struct(ftype, sub, flatten)
            elif isinstance(ftype, HeaderT):
                members[fname] = self.add_header("_".join(sub), ftype, metadata=True)
            elif is_scalar(ftype):
                if flatten:
                    name = f"userMetadata._{'_'.join(sub)}{self._flatten_counter}"
                    self._flatten_counter += 1
                else:
                    name = f"userMetadata.{fname}"
                members[fname] = self.add_scalar(name, ftype)
            else:
                raise not_supported(f"metadata field {fname} of type {ftype}",
                                    _field_loc(t, fname))
        return StructB(t, members)

    def bind_local(self, name: str, t: P4Type, loc) -> Binding:
        """Storage for a local variable of a control, parser or action."""
        if is_scalar(t):
            return self.add_scalar(name, t)
        if isinstance(t, HeaderT):
            return self.add_header(name, t)
        if isinstance(t, UnionT):
            return self.add_union(name, t)
        if isinstance(t, StackT):
            return self.add_stack(name, t)
        if isinstance(t, TupleT):
            t = self.tuple_struct(t)
        if isinstance(t, StructT):
            members = {f: self.bind_local(f"{name}_{f}", ft, loc) for f, ft in t.fields}
            return StructB(t, members)
        raise not_supported(f"a local variable of type {t}", loc)

    def tuple_struct(self, t: TupleT) -> StructT:
        """The struct a tuple local is stored as: element i is field ``f<i>``."""
        key = str(t)
        if key not in self.tuple_structs:
            self.tuple_structs[key] = StructT(key, [(f"f{i}", e)
                                                    for i, e in enumerate(t.elements)])
        return self.tuple_structs[key]

    def _add_type(self, t: HeaderT) -> None:
        existing = self._types.get(t.name)
        fields = [[name, "*"] if isinstance(ft, VarbitT)  # as p4c writes a varbit field
                  else [name, width_of(ft), isinstance(ft, BitT) and ft.signed]
                  for name, ft in t.fields]
        if existing is None:
            self._types[t.name] = fields
            self._type_order.append(t.name)
            if any(isinstance(ft, VarbitT) for _, ft in t.fields):
                self._max_length[t.name] = (sum(width_of(ft) for _, ft in t.fields) + 7) // 8
        elif existing != fields:
            raise CompileError(f"two different header types are named {t.name}",
                               t.decl.loc if t.decl else None)

    # ------------------------------------------------------------------ JSON
    def header_types_json(self) -> list[Json]:
        scalars = [list(f) for f in self.scalars]
        _pad(scalars, "_padding_0")
        out = [{"name": "scalars_0", "id": 0, "fields": scalars}]
        for i, name in enumerate(self._type_order, start=1):
            entry: Json = {"name": name, "id": i, "fields": self._types[name]}
            max_length = self._max_length.get(name)
            if max_length is not None:  # p4c: the header's most bytes, varbit at its max
                entry["max_length"] = max_length
            out.append(entry)
        return out

    def headers_json(self) -> list[Json]:
        out = [{"name": SCALARS, "id": 0, "header_type": "scalars_0", "metadata": True,
                "pi_omit": True}]
        for i, (name, type_name, metadata) in enumerate(self.headers, start=1):
            out.append({"name": name, "id": i, "header_type": type_name, "metadata": metadata,
                        "pi_omit": True})
        return out

    def header_id(self, instance: str) -> int:
        for i, (name, _, _) in enumerate(self.headers, start=1):
            if name == instance:
                return i
        raise KeyError(instance)

    def header_stacks_json(self) -> list[Json]:
        return [
            {"name": name, "id": i, "header_type": type_name, "size": len(elements),
             "header_ids": [self.header_id(e) for e in elements]}
            for i, (name, type_name, elements) in enumerate(self.stacks)
        ]

    def header_union_types_json(self) -> list[Json]:
        return [{"name": t.name, "id": i, "headers": [[m, mt.name] for m, mt in t.members()]}
                for i, t in enumerate(self.union_types.values())]

    def header_unions_json(self) -> list[Json]:
        return [{"name": name, "id": i, "union_type": type_name,
                 "header_ids": [self.header_id(h) for h in members], "pi_omit": True}
                for i, (name, type_name, members) in enumerate(self.unions)]

    def header_union_stacks_json(self) -> list[Json]:
        ids = {name: i for i, (name, _, _) in enumerate(self.unions)}
        return [{"name": name, "id": i, "union_type": type_name, "size": len(unions),
                 "header_union_ids": [ids[u] for u in unions]}
                for i, (name, type_name, unions) in enumerate(self.union_stacks)]

    def field_width(self, header: str, field: str) -> int:
        if header == SCALARS:
            for name, width, _ in self.scalars:
                if name == field:
                    return width
        else:
            t = self.header_by_instance[header]
            ft = t.field_type(field)
            if ft is not None:
                return width_of(ft)
            if field == "$valid$":
                return 1
        raise KeyError((header, field))


def _field_loc(t: StructT, name: str):
    if t.decl is None:
        return None
    for field_decl in t.decl.fields:
        if field_decl.name == name:
            return field_decl.loc
    return t.decl.loc


def _pad(fields: list[list[Any]], name: str) -> None:
    total = sum(f[1] for f in fields)
    if total % 8:
        fields.append([name, 8 - total % 8, False])


__all__ = ["Storage", "SCALARS", "STANDARD_METADATA", "BoolT", "EnumT", "ErrorT"]
