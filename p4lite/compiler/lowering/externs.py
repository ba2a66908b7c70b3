"""v1model externs: instances (registers, counters, meters) and calls to primitives.

Primitive names and parameter orders are those p4c's simple_switch back end
emits (backends/bmv2/simple_switch/simpleSwitch.cpp).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4lite.compiler.checks.bindings import ExternB, FieldB, HeaderB, StructB
from p4lite.compiler.checks.types import (
    BitT,
    BoolT,
    EnumT,
    ExternT,
    IntT,
    P4Type,
    StructT,
    width_of,
)
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.cpmodel import CpCounter, CpDigest, CpMeter, CpRegister, CpStructType
from p4lite.compiler.lowering.expr_values import as_data, hexstr, to_param
from p4lite.compiler.lowering.lower_expr import ExprCompiler, annotated_id
from p4lite.compiler.lowering.names import NameGen

if TYPE_CHECKING:
    from p4lite.compiler.lowering.context import Lowering

Json = dict[str, Any]

_HASH_ALGOS = {"crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16",
               "xor16"}
_COUNTER_UNITS = {"packets": "PACKETS", "bytes": "BYTES", "packets_and_bytes": "BOTH"}
_BIT32 = BitT(32)


def match_args(params: list[ast.Param], args: list[ast.Argument], what: str,
               loc, *, keep_dont_care: bool = False) -> list[ast.Expression | None]:
    """Arguments in parameter order (named arguments allowed); missing ones are None, and
    so is ``_`` unless ``keep_dont_care`` (the callee then sees a value nobody set)."""
    out: list[ast.Expression | None] = [None] * len(params)
    names = [p.name for p in params]
    if len(args) > len(params):
        raise CompileError(f"{what} takes {len(params)} arguments, {len(args)} given", loc)
    for i, arg in enumerate(args):
        if arg.name is None:
            out[i] = arg.value
        elif arg.name in names:
            out[names.index(arg.name)] = arg.value
        else:
            raise CompileError(f"{what} has no parameter named {arg.name}", arg.loc)
    for i, param in enumerate(params):
        if out[i] is None and param.default is not None:
            out[i] = param.default
        if isinstance(out[i], ast.DontCare) and not keep_dont_care:
            out[i] = None
    return out


def every_arg(params: list[ast.Param], args: list[ast.Argument], what: str,
              loc) -> list[ast.Expression]:
    """``match_args`` (``_`` kept) for a callee whose every parameter needs an argument:
    a function, an action called from an action, a sub-control."""
    matched = match_args(params, args, what, loc, keep_dont_care=True)
    for param, arg in zip(params, matched, strict=True):
        if arg is None:
            raise CompileError(f"missing argument for parameter {param.name}", loc)
    return [arg for arg in matched if arg is not None]


class Externs:
    """Declares extern instances and turns extern calls into primitives."""

    def __init__(self, lw: Lowering) -> None:
        self.lw = lw
        self._learn_lists: dict[str, int] = {}
        self._field_lists: dict[int, int] = {}
        self._empty_list_names = NameGen()

    # ---------------------------------------------------------- instances
    def declare(self, inst: ast.Instantiation, name: str, comp: ExprCompiler) -> ExternB:
        t = self.lw.env.resolve(inst.type)
        if not isinstance(t, ExternT):
            raise not_supported(f"instance of {t}", inst.loc)
        args = [a.value for a in inst.args]
        info = self.lw.source_info(inst.loc, self.lw.source.fragment(inst.loc))
        fixed_id, id_loc = annotated_id(inst, comp)
        kind = t.name
        if kind == "register":
            width = _elem_width(t, inst)
            size = int(comp.const_value(args[0]))
            entry: Json = {"name": name, "id": len(self.lw.register_arrays), "source_info": info,
                           "size": size, "bitwidth": width}
            self.lw.register_arrays.append(entry)
            self.lw.cp.registers.append(CpRegister(name, size, width, fixed_id, id_loc))
            return ExternB(kind, name, t, inst, {"json": entry, "elem": t.type_args[0]})
        if kind in ("counter", "direct_counter"):
            direct = kind == "direct_counter"
            unit = _enum_arg(comp, args[-1], "CounterType", inst.loc)
            entry = {"name": name, "id": len(self.lw.counter_arrays), "source_info": info}
            if direct:
                entry.update({"is_direct": True, "binding": None})
            else:
                entry.update({"size": int(comp.const_value(args[0])), "is_direct": False})
            self.lw.counter_arrays.append(entry)
            if direct:
                self.lw.direct_counters.append((entry, inst))
            cp_counter = CpCounter(name, entry.get("size", 0), _COUNTER_UNITS[unit], None,
                                   fixed_id, id_loc)
            self.lw.cp.counters.append(cp_counter)
            return ExternB(kind, name, t, inst, {"json": entry, "cp": cp_counter})
        if kind in ("meter", "direct_meter"):
            direct = kind == "direct_meter"
            unit = _enum_arg(comp, args[-1], "MeterType", inst.loc)
            entry = {"name": name, "id": len(self.lw.meter_arrays), "source_info": info,
                     "is_direct": direct}
            if direct:
                entry.update({"rate_count": 2, "type": unit, "size": 0, "binding": None,
                              "result_target": None})
            else:
                entry.update({"rate_count": 2, "type": unit,
                              "size": int(comp.const_value(args[0]))})
            self.lw.meter_arrays.append(entry)
            if direct:
                self.lw.direct_meters.append((entry, inst))
            cp_meter = CpMeter(name, entry["size"], unit.upper(), None, fixed_id, id_loc)
            self.lw.cp.meters.append(cp_meter)
            return ExternB(kind, name, t, inst, {"json": entry, "cp": cp_meter})
        raise not_supported(f"extern {kind}", inst.loc)

    # -------------------------------------------------------------- calls
    def method_call(self, target: ExternB, method: str, call: ast.Call,
                    comp: ExprCompiler) -> list[Json]:
        kind = target.kind
        args = [a.value for a in call.args]
        ref = {"type": f"{_ARRAY_KIND.get(kind, 'extern')}", "value": target.name}
        if kind == "register" and method == "read":
            _arity(args, 2, call)
            elem = target.info["elem"]
            dst = self._dest(args[0], comp, elem)
            dst_type = self._dest_type(args[0], comp, elem)
            if width_of(dst_type) != width_of(elem) or isinstance(dst_type, BoolT) != isinstance(
                    elem, BoolT):
                raise CompileError(f"register {target.name} holds {elem}, cannot read it into "
                                   f"a {dst_type}", args[0].loc)
            index = comp.rvalue(args[1], _BIT32)
            return [_prim("register_read", [dst, ref, to_param(index.operand)])]
        if kind == "register" and method == "write":
            _arity(args, 2, call)
            index = comp.rvalue(args[0], _BIT32)
            value = comp.rvalue(args[1], target.info["elem"])
            return [_prim("register_write",
                          [ref, to_param(index.operand), to_param(as_data(value))])]
        if kind == "counter" and method == "count":
            _arity(args, 1, call)
            index = comp.rvalue(args[0], _BIT32)
            return [_prim("count", [ref, to_param(index.operand)])]
        if kind == "direct_counter" and method == "count":
            return []  # BMv2 counts direct counters on every hit by itself
        if kind == "meter" and method == "execute_meter":
            _arity(args, 2, call)
            index = comp.rvalue(args[0], _BIT32)
            dst = self._dest(args[1], comp, self._type_arg(call, 0, "T", out_arg=1))
            return [_prim("execute_meter", [ref, to_param(index.operand), dst])]
        if kind == "direct_meter" and method == "read":
            _arity(args, 1, call)
            color_t = target.type.type_args[0] if isinstance(target.type, ExternT) else None
            dst = self._dest(args[0], comp, color_t)  # `_`: a temporary (p4c: one too)
            entry = target.info["json"]
            if entry["result_target"] not in (None, dst["value"]):
                raise not_supported("reading one direct meter into two different fields", call.loc)
            entry["result_target"] = dst["value"]
            return []
        raise not_supported(f"method {method} of extern {kind}", call.loc)

    def function_call(self, name: str, call: ast.Call, comp: ExprCompiler,
                      pipeline: str) -> list[Json]:
        args = [a.value for a in call.args]
        handler = getattr(self, "_fn_" + name, None)
        if handler is None:
            raise not_supported(f"extern function {name}", call.loc)
        return handler(args, call, comp, pipeline)

    def _fn_mark_to_drop(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 1, call)
        target = comp.compile(args[0])
        if not isinstance(target.binding, HeaderB) or target.binding.instance != "standard_metadata":
            raise CompileError("mark_to_drop needs standard_metadata", call.loc)
        return [_prim("mark_to_drop", [{"type": "header", "value": "standard_metadata"}])]

    def _fn_clone(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 2, call)
        # BMv2's simple_switch copies the clone's field list with field_lists.at(id) once a
        # configured session fires: id 0 (no list) aborts it. p4c gives each clone() call a
        # list of its own, empty; so does p4lite-c.
        return [self._clone(args[0], args[1], self.empty_field_list_id(), call, comp)]

    def _fn_clone_preserving_field_list(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 3, call)
        index = int(comp.const_value(args[2]))
        return [self._clone(args[0], args[1], self.field_list_id(index), call, comp)]

    def _clone(self, type_arg, session_arg, list_id: int, call, comp) -> Json:
        kind = comp.compile(type_arg)
        if not isinstance(kind.type, EnumT) or kind.type.name != "CloneType":
            raise CompileError("the first argument of clone must be a CloneType", call.loc)
        op = "clone_ingress_pkt_to_egress" if kind.const == 0 else "clone_egress_pkt_to_egress"
        session = comp.rvalue(session_arg, _BIT32)
        return _prim(op, [to_param(session.json), hexstr(list_id, None)])

    def _fn_resubmit_preserving_field_list(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 1, call)
        index = int(comp.const_value(args[0]))
        return [_prim("resubmit", [hexstr(self.field_list_id(index), None)])]

    def _fn_recirculate_preserving_field_list(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 1, call)
        index = int(comp.const_value(args[0]))
        return [_prim("recirculate", [hexstr(self.field_list_id(index), None)])]

    def _fn_digest(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 2, call)
        receiver = comp.rvalue(args[0], _BIT32)
        list_id = self.learn_list_id(args[1], call, comp)
        return [_prim("generate_digest", [to_param(receiver.json), hexstr(list_id, None)])]

    def _fn_hash(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 5, call)
        out_t = self._type_arg(call, 0, "O")
        dst = self._dest(args[0], comp, out_t)
        dst_type = self._dest_type(args[0], comp, out_t)
        algo = _algo(comp, args[1], call.loc)
        # O, T and M are independent type parameters of v1model's hash: only an untyped
        # constant base takes the result's type
        base = comp.rvalue(args[2])
        if isinstance(base.type, IntT) and isinstance(dst_type, BitT):
            base = comp.rvalue(args[2], dst_type)
        calc = self.calculation(algo, args[3], comp, call.loc)
        max_val = comp.rvalue(args[4])
        if isinstance(max_val.type, IntT):
            max_val = comp.rvalue(args[4], BitT(max(1, int(max_val.const).bit_length())))
        return [_prim("modify_field_with_hash_based_offset",
                      [dst, to_param(base.json), {"type": "calculation", "value": calc},
                       to_param(max_val.json)])]

    def _fn_random(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 3, call)
        bounds = (comp.rvalue(args[1]).type, comp.rvalue(args[2]).type)
        typed = [b for b in bounds if not isinstance(b, IntT)]  # `_`: T from lo or hi
        out_t = (self._type_arg(call, 0, "T") if call.type_args or not typed else typed[0])
        dst = self._dest(args[0], comp, out_t)
        t = self._dest_type(args[0], comp, out_t)
        lo, hi = comp.rvalue(args[1], t), comp.rvalue(args[2], t)
        return [_prim("modify_field_rng_uniform", [dst, to_param(lo.json), to_param(hi.json)])]

    def _fn_truncate(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 1, call)
        length = comp.rvalue(args[0], _BIT32)
        return [_prim("truncate", [to_param(length.json)])]

    def _fn_log_msg(self, args, call, comp, pipeline) -> list[Json]:
        if not args or not isinstance(args[0], ast.StringLiteral):
            raise CompileError("log_msg needs a string literal first", call.loc)
        values: list[Json] = []
        if len(args) > 1:
            items = args[1].items if isinstance(args[1], ast.ListExpr) else [args[1]]
            for item in items:
                val = comp.rvalue(item)
                if isinstance(val.type, IntT):
                    val = comp.rvalue(item, BitT(max(8, int(val.const).bit_length())))
                values.append(to_param(as_data(val)))
        return [_prim("log_msg", [{"type": "string", "value": args[0].value},
                                  {"type": "parameters_vector", "value": values}])]

    def _fn_assert(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 1, call)
        return [_prim("assert", [comp.condition(args[0])])]

    def _fn_assume(self, args, call, comp, pipeline) -> list[Json]:
        _arity(args, 1, call)
        return [_prim("assume", [comp.condition(args[0])])]

    # -------------------------------------------------- lists, calculations
    def field_list_id(self, index: int) -> int:
        """The field list of user metadata fields annotated ``@field_list(index)``."""
        existing = self._field_lists.get(index)
        if existing is not None:
            return existing
        list_id = len(self.lw.field_lists) + 1
        elements = [{"type": "field", "value": list(f)} for f in self.lw.meta_field_list(index)]
        self.lw.field_lists.append({"id": list_id, "name": f"field_list{index}",
                                    "elements": elements})
        self._field_lists[index] = list_id
        return list_id

    def empty_field_list_id(self) -> int:
        """A new empty field list (p4c's ``fl``, ``fl_0`` ...), for a plain ``clone``."""
        list_id = len(self.lw.field_lists) + 1
        self.lw.field_lists.append({"id": list_id, "name": self._empty_list_names.fresh("fl"),
                                    "elements": []})
        return list_id

    def learn_list_id(self, data: ast.Expression, call: ast.Call, comp: ExprCompiler) -> int:
        struct_t, elements = self._digest_data(data, call, comp)
        name = struct_t.name
        existing = self._learn_lists.get(name)
        if existing is not None:
            return existing
        list_id = len(self.lw.learn_lists) + 1
        self.lw.learn_lists.append({"id": list_id, "name": name, "source_info":
                                    self.lw.source_info(call.loc), "elements": elements})
        self._learn_lists[name] = list_id
        for fname, ftype in struct_t.fields:
            if not isinstance(ftype, BitT | BoolT):
                raise not_supported(f"digest struct member {fname} of type {ftype}", call.loc)
        members = [(f, 0 if isinstance(ft, BoolT) else width_of(ft)) for f, ft in struct_t.fields]
        self.lw.cp.struct_types[name] = CpStructType(name, members)
        self.lw.cp.digests.append(CpDigest(name, name))
        return list_id

    def _digest_data(self, data, call: ast.Call, comp: ExprCompiler) -> tuple[StructT, list[Json]]:
        if isinstance(data, ast.StructExpr | ast.ListExpr):
            if not call.type_args:
                raise not_supported("digest of a list without a struct type argument", data.loc)
            t = comp.env.resolve(call.type_args[0])
            if not isinstance(t, StructT):
                raise CompileError("digest's type argument must be a struct", call.loc)
            if isinstance(data, ast.StructExpr):
                given = {f.name: f.value for f in data.fields}
                if set(given) != {f for f, _ in t.fields}:
                    raise CompileError(f"the digest data must set every field of {t.name}",
                                       data.loc)
                items = [given[f] for f, _ in t.fields]
            else:
                items = data.items
            if len(items) != len(t.fields):
                raise CompileError(f"{t.name} has {len(t.fields)} fields, the digest data has "
                                   f"{len(items)}", data.loc)
            return t, [self._field_elem(item, comp, ftype)
                       for item, (_, ftype) in zip(items, t.fields, strict=True)]
        val = comp.compile(data)
        if not isinstance(val.binding, StructB):
            raise not_supported("digest data that is not a struct", data.loc)
        elements = []
        for fname, _ in val.binding.type.fields:
            member = val.binding.members[fname]
            if not isinstance(member, FieldB):
                raise not_supported("digest of a struct with non-scalar fields", data.loc)
            elements.append({"type": "field", "value": [member.header, member.field]})
        return val.binding.type, elements

    def _field_elem(self, item: ast.Expression, comp: ExprCompiler, ftype: P4Type) -> Json:
        val = comp.compile(item)
        if not isinstance(val.binding, FieldB):
            raise not_supported("a digest element that is not a field", item.loc)
        if width_of(val.type) != width_of(ftype):
            raise CompileError(f"digest field has type {val.type}, the struct member is {ftype}",
                               item.loc)
        return {"type": "field", "value": [val.binding.header, val.binding.field]}

    def calculation(self, algo: str, data: ast.Expression, comp: ExprCompiler, loc) -> str:
        name = self.lw.calc_names.fresh("calc")
        inputs = self.calc_inputs(data, comp)
        self.lw.calculations.append({"name": name, "id": len(self.lw.calculations),
                                     "source_info": self.lw.source_info(loc), "algo": algo,
                                     "input": inputs})
        return name

    def calc_inputs(self, data: ast.Expression, comp: ExprCompiler) -> list[Json]:
        items = data.items if isinstance(data, ast.ListExpr) else [data]
        if isinstance(data, ast.StructExpr):
            items = [f.value for f in data.fields]
        inputs: list[Json] = []
        for item in items:
            val = comp.compile(item)
            if isinstance(val.binding, FieldB):
                inputs.append({"type": "field", "value": [val.binding.header, val.binding.field]})
            elif isinstance(val.binding, HeaderB):
                for fname, _ in val.binding.type.fields:
                    inputs.append({"type": "field", "value": [val.binding.instance, fname]})
            elif val.const is not None and isinstance(val.type, BitT):
                inputs.append({"type": "hexstr", "value": hexstr(int(val.const), val.type.width)[
                    "value"], "bitwidth": val.type.width})
            else:
                raise not_supported("a hash/checksum input that is not a field or a constant",
                                    item.loc)
        return inputs

    def _dest(self, e: ast.Expression, comp: ExprCompiler, t: P4Type | None = None) -> Json:
        """The field an extern writes its result to; for ``_`` (DontCare, where the
        out parameter's type ``t`` is known) a fresh scalar nobody reads, as p4c's
        DontcareArgs gives it a temporary."""
        if isinstance(e, ast.DontCare) and t is not None:
            temp = self.lw.storage.bind_local("arg", t, e.loc)
            assert isinstance(temp, FieldB)
            return {"type": "field", "value": [temp.header, temp.field]}
        val = comp.compile(e)
        if not isinstance(val.binding, FieldB):
            raise not_supported("an extern result that is not stored in a field", e.loc)
        return {"type": "field", "value": [val.binding.header, val.binding.field]}

    @staticmethod
    def _dest_type(e: ast.Expression, comp: ExprCompiler, t: P4Type | None) -> P4Type:
        return t if isinstance(e, ast.DontCare) and t is not None else comp.compile(e).type

    def _type_arg(self, call: ast.Call, index: int, name: str, out_arg: int = 0
                  ) -> P4Type | None:
        """The call's explicit type argument ``index`` (``name`` in v1model.p4), if any;
        a ``_`` result (argument ``out_arg``) needs it, as p4c cannot infer it otherwise."""
        if index < len(call.type_args):
            return self.lw.env.resolve(call.type_args[index])
        if len(call.args) > out_arg and isinstance(call.args[out_arg].value, ast.DontCare):
            raise CompileError(f"could not infer a type for variable {name}", call.loc)
        return None


_ARRAY_KIND = {"register": "register_array", "counter": "counter_array",
               "direct_counter": "counter_array", "meter": "meter_array",
               "direct_meter": "meter_array"}


def _prim(op: str, params: list[Json]) -> Json:
    return {"op": op, "parameters": params}


def _arity(args: list, n: int, call: ast.Call) -> None:
    if len(args) != n:
        raise CompileError(f"expected {n} arguments, got {len(args)}", call.loc)


def _elem_width(t: ExternT, inst: ast.Instantiation) -> int:
    if not t.type_args:
        raise CompileError("register needs an element type: register<bit<N>>", inst.loc)
    elem: P4Type = t.type_args[0]
    if isinstance(elem, BitT):
        return elem.width
    if isinstance(elem, BoolT):
        return 1
    raise not_supported(f"register of {elem}", inst.loc)


def _enum_arg(comp: ExprCompiler, arg: ast.Expression, enum_name: str, loc) -> str:
    val = comp.compile(arg)
    if not isinstance(val.type, EnumT) or val.type.name != enum_name or val.const is None:
        raise CompileError(f"expected a {enum_name} value", loc)
    return val.type.members[int(val.const)]


def _algo(comp: ExprCompiler, arg: ast.Expression, loc) -> str:
    name = _enum_arg(comp, arg, "HashAlgorithm", loc)
    if name not in _HASH_ALGOS:
        raise not_supported(f"hash algorithm {name}", loc)
    return name
