"""The whole program: find ``V1Switch(...) main``, lay out storage, lower each block."""

from __future__ import annotations

from typing import Any

from p4lite.compiler.checks.bindings import Binding, ConstB, ExternB, FieldB, StructB
from p4lite.compiler.checks.program_env import ProgramEnv
from p4lite.compiler.checks.types import EnumT, ExternT, HeaderT, IntT, P4Type, StructT, width_of
from p4lite.compiler.errors import CompileError, SourceLoc, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.frontend.source_text import SourceText
from p4lite.compiler.lowering.assemble import assemble
from p4lite.compiler.lowering.context import Lowering
from p4lite.compiler.lowering.cpmodel import ControlPlaneModel, CpControllerHeader
from p4lite.compiler.lowering.ctor_args import ctor_bindings
from p4lite.compiler.lowering.externs import Externs
from p4lite.compiler.lowering.lower_checksum import lower_checksums
from p4lite.compiler.lowering.lower_control import check_unused, pipeline_from_control
from p4lite.compiler.lowering.lower_expr import ExprCompiler, annotated_id
from p4lite.compiler.lowering.lower_parser import ParserLowerer, deparser_order

Json = dict[str, Any]
_BLOCKS = ("parser", "verifyChecksum", "ingress", "egress", "computeChecksum", "deparser")


def lower_program(program: ast.Program, main_file: str, source: SourceText,
                  diagnostics: list[str] | None = None) -> tuple[Json, ControlPlaneModel]:
    """Lower to BMv2 JSON; the warnings found on the way go to ``diagnostics``."""
    env = ProgramEnv(program, main_file)
    if diagnostics is not None:
        env.diagnostics = diagnostics
    env.const_folder = lambda expr, scope: ExprCompiler(env, scope).const_value(expr)
    env.bind_constants(lambda expr, t: _fold_const(env, expr, t))
    lw = Lowering(env, source)
    externs = Externs(lw)
    blocks, ctor_args = _main_blocks(env)
    _declare_top_level_externs(env, externs)
    parser = blocks["parser"]
    if not isinstance(parser, ast.ParserDecl) or len(parser.params) != 4:
        raise CompileError("V1Switch's first argument must be a parser with 4 parameters",
                           parser.loc)
    shared, std_t = _bind_parser_params(env, lw, parser)

    def bindings(decl: ast.ParserDecl | ast.ControlDecl) -> dict[str, Binding]:
        role = next(r for r, d in blocks.items() if d is decl)
        args, loc = ctor_args[role]
        return {**_param_bindings(env, decl, shared),
                **ctor_bindings(ExprCompiler(env, env.global_scope), decl, args, loc)}

    def control(role: str) -> ast.ControlDecl:
        decl = blocks[role]
        assert isinstance(decl, ast.ControlDecl)  # _block_decl looks every non-parser up there
        return decl

    parser_json = ParserLowerer(lw, externs, parser, bindings(parser)).lower()
    verify = control("verifyChecksum")
    lower_checksums(lw, externs, verify, bindings(verify), verify_block=True)
    ingress = control("ingress")
    egress = control("egress")
    pipelines = [
        pipeline_from_control(lw, externs, role, decl, bindings(decl), index,
                              f"{decl.name}_0" if ctor_args[role][0] else None)
        for index, (role, decl) in enumerate((("ingress", ingress), ("egress", egress)))]
    for block in (ingress, egress):
        check_unused(lw, block, bindings(block))
    compute = control("computeChecksum")
    lower_checksums(lw, externs, compute, bindings(compute), verify_block=False)
    _check_direct_meters(lw)
    deparser = control("deparser")
    order = deparser_order(lw, deparser, bindings(deparser))
    deparser_json = {"name": "deparser", "id": 0,
                     "source_info": lw.source_info(deparser.loc, deparser.name),
                     "order": order, "primitives": []}
    lw.enums = _user_enums(env)
    _control_plane_extras(lw)
    _renumber_actions(lw, pipelines)
    bmv2 = assemble(lw, program=main_file, parser=parser_json, deparser=deparser_json,
                    pipelines=pipelines, field_aliases=_field_aliases(std_t))
    return bmv2, lw.cp


def _declare_top_level_externs(env: ProgramEnv, externs: Externs) -> None:
    """Extern instances declared at top level (``register<bit<8>>(4) r;``), named as
    declared, as p4c names them."""
    comp = ExprCompiler(env, env.global_scope)
    for inst in env.instantiations:
        type_name = inst.type.name if isinstance(inst.type, ast.TypeName) else (
            inst.type.base.name if isinstance(inst.type, ast.SpecializedType) else None)
        decl = env.type_decls.get(type_name) if type_name else None
        if not isinstance(decl, ast.ExternDecl):
            continue  # main, parser and control instances
        env.global_scope.bind(inst.name, externs.declare(inst, _global_name(inst), comp))


def _global_name(inst: ast.Instantiation) -> str:
    ann = inst.annotation("name")
    if ann is not None and ann.args and isinstance(ann.args[0], ast.StringLiteral):
        return ann.args[0].value.lstrip(".")
    return inst.name


def _bind_parser_params(env: ProgramEnv, lw: Lowering, parser: ast.ParserDecl
                        ) -> tuple[dict[int, Binding], StructT]:
    """Storage for the parser's headers, metadata and standard_metadata structs, which
    every block shares (keyed by the struct type's id), and the standard_metadata type."""
    # Resolve all three first: an unknown type is reported before a non-struct one.
    resolved = [env.resolve(p.type) for p in parser.params[1:]]
    headers_t = _struct_param(resolved[0], parser.params[1], "headers")
    meta_t = _struct_param(resolved[1], parser.params[2], "metadata")
    std_t = _struct_param(resolved[2], parser.params[3], "standard_metadata")
    if std_t.name != "standard_metadata_t":
        raise CompileError(f"the parser's last parameter must be standard_metadata_t, not "
                           f"{std_t.name}", parser.params[3].loc)
    if headers_t is meta_t:
        raise not_supported("one struct type for both headers and metadata",
                            parser.params[2].loc)
    shared = {
        id(std_t): lw.storage.add_standard_metadata(std_t),
        id(headers_t): lw.storage.bind_headers_struct(headers_t),
    }
    meta = lw.storage.bind_user_metadata(meta_t)
    shared[id(meta_t)] = meta
    _collect_field_lists(lw, meta_t, meta)
    return shared, std_t


def _struct_param(t: P4Type, param: ast.Param, what: str) -> StructT:
    if not isinstance(t, StructT):
        raise CompileError(f"the parser's {what} parameter must be a struct", param.loc)
    return t


def _fold_const(env: ProgramEnv, expr: ast.Expression, t: P4Type) -> ConstB:
    comp = ExprCompiler(env, env.global_scope)
    value = comp.const_value(expr, None if isinstance(t, IntT) else t)
    return ConstB(value, t)


def _main_blocks(env: ProgramEnv) -> tuple[dict[str, ast.ParserDecl | ast.ControlDecl],
                                            dict[str, tuple[list[ast.Argument], Any]]]:
    """Each V1Switch block's declaration, and its constructor arguments and their place."""
    main = next((i for i in env.instantiations if i.name == "main"), None)
    if main is None:
        raise CompileError("the program has no `main` package instance",
                           SourceLoc(env.main_file, 1, 1))
    type_name = main.type.name if isinstance(main.type, ast.TypeName) else (
        main.type.base.name if isinstance(main.type, ast.SpecializedType) else "?")
    if type_name != "V1Switch":
        raise not_supported(f"package {type_name} (only V1Switch)", main.loc)
    if len(main.args) != 6:
        raise CompileError(f"V1Switch takes 6 arguments, got {len(main.args)}", main.loc)
    blocks: dict[str, ast.ParserDecl | ast.ControlDecl] = {}
    ctor_args: dict[str, tuple[list[ast.Argument], Any]] = {}
    for role, arg in zip(_BLOCKS, main.args, strict=True):
        blocks[role], ctor_args[role] = _block_decl(env, arg.value, role)
    return blocks, ctor_args


def _block_decl(env: ProgramEnv, expr: ast.Expression, role: str
                ) -> tuple[ast.ParserDecl | ast.ControlDecl, tuple[list[ast.Argument], Any]]:
    name: str | None = None
    args: tuple[list[ast.Argument], Any] = ([], expr.loc)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        args = (expr.args, expr.loc)
        name = expr.func.name
    elif isinstance(expr, ast.Name):
        inst = next((i for i in env.instantiations if i.name == expr.name), None)
        if inst is not None and isinstance(inst.type, ast.TypeName):
            name = inst.type.name
            args = (inst.args, inst.loc)
    decl: ast.ParserDecl | ast.ControlDecl | None = None
    if name is not None:
        decl = env.parsers.get(name) if role == "parser" else env.controls.get(name)
    if decl is None:
        kind = "parser" if role == "parser" else "control"
        raise CompileError(f"V1Switch's {role} argument must be a {kind}", expr.loc)
    return decl, args


def _param_bindings(env: ProgramEnv, decl: ast.ParserDecl | ast.ControlDecl, shared: dict[int, Binding]) -> dict[str, Binding]:
    out: dict[str, Binding] = {}
    for param in decl.params:
        t = env.resolve(param.type)
        if isinstance(t, ExternT) and t.name in ("packet_in", "packet_out"):
            out[param.name] = ExternB(t.name, param.name, t, param)
        elif id(t) in shared:
            out[param.name] = shared[id(t)]
        else:
            raise CompileError(f"parameter {param.name} of {decl.name} has type {t}, which does "
                               "not match the parser's", param.loc)
    return out


def _collect_field_lists(lw: Lowering, meta_t: StructT, meta: StructB) -> None:
    comp = ExprCompiler(lw.env, lw.env.global_scope)

    def walk(t: StructT, binding: StructB) -> None:
        if t.decl is None:
            return
        for field_decl in t.decl.fields:
            member = binding.members.get(field_decl.name)
            if isinstance(member, StructB):
                walk(member.type, member)
                continue
            for ann in field_decl.annotations:
                if ann.name != "field_list" or not isinstance(member, FieldB):
                    continue
                for arg in ann.args:
                    index = int(comp.const_value(arg))
                    lw.meta_field_lists.setdefault(index, []).append(
                        (member.header, member.field))

    walk(meta_t, meta)


def _field_aliases(std_t: StructT) -> list[list[Any]]:
    aliases: list[list[Any]] = []
    if std_t.decl is None:
        return aliases
    for field_decl in std_t.decl.fields:
        ann = field_decl.annotation("alias")
        if ann is not None and ann.args and isinstance(ann.args[0], ast.StringLiteral):
            aliases.append([ann.args[0].value, ["standard_metadata", field_decl.name]])
    return aliases


def _user_enums(env: ProgramEnv) -> list[Json]:
    out = []
    for decl in env.type_decls.values():
        if isinstance(decl, ast.EnumDecl) and decl.underlying is None and env.is_user_decl(decl):
            t = env.resolve(ast.TypeName(decl.name, loc=decl.loc))
            assert isinstance(t, EnumT)
            out.append({"name": t.name, "entries": [[m, i] for i, m in enumerate(t.members)]})
    return out


def _control_plane_extras(lw: Lowering) -> None:
    files = list(dict.fromkeys(d.loc.file for d in lw.env.program.declarations if d.loc))

    def position(name: str) -> tuple[int, int, int]:
        loc = lw.cp_positions.get(name)
        if loc is None:
            return (len(files) + 1, 0, 0)
        index = files.index(loc.file) if loc.file in files else len(files)
        return (index, loc.line, loc.col)

    # p4c lists P4Info entities in declaration order.
    actions = [lw.cp_actions[i] for i in sorted(lw.cp_used_actions)]
    lw.cp.actions = sorted(actions, key=lambda a: position(a.name))
    lw.cp.tables.sort(key=lambda t: position(t.name))
    comp = ExprCompiler(lw.env, lw.env.global_scope)
    for decl in lw.env.type_decls.values():
        if not isinstance(decl, ast.HeaderDecl):
            continue
        ann = decl.annotation("controller_header")
        if ann is None or not ann.args or not isinstance(ann.args[0], ast.StringLiteral):
            continue
        t = lw.env.resolve(ast.TypeName(decl.name, loc=decl.loc))
        assert isinstance(t, HeaderT)
        fixed_id, id_loc = annotated_id(decl, comp)
        fields = [(name, width_of(ft)) for name, ft in t.fields]  # header fields are bit<N>
        lw.cp.controller_headers.append(CpControllerHeader(ann.args[0].value, fields, fixed_id,
                                                             id_loc))


def _renumber_actions(lw: Lowering, pipelines: list[Json]) -> None:
    """Give actions p4c's order: declaration order (core.p4's NoAction first)."""
    files = list(dict.fromkeys(d.loc.file for d in lw.env.program.declarations if d.loc))

    def position(index: int) -> tuple[int, int, int, int]:
        loc = lw.action_locs[index]
        if loc is None:
            return (len(files) + 1, 0, 0, index)
        file_index = files.index(loc.file) if loc.file in files else len(files)
        return (file_index, loc.line, loc.col, index)

    order = sorted(range(len(lw.actions)), key=position)
    new_id = {old: new for new, old in enumerate(order)}
    lw.actions = [lw.actions[old] for old in order]
    for action in lw.actions:
        action["id"] = new_id[action["id"]]
    for pipeline in pipelines:
        for table in pipeline["tables"]:
            table["action_ids"] = [new_id[i] for i in table["action_ids"]]
            default = table.get("default_entry")
            if default is not None:
                default["action_id"] = new_id[default["action_id"]]
            for entry in table.get("entries", []):
                entry["action_entry"]["action_id"] = new_id[entry["action_entry"]["action_id"]]


def _check_direct_meters(lw: Lowering) -> None:
    """BMv2 needs a direct meter's table and the field its color is read into.

    As p4c, a direct counter or meter that no table names is left out (the ids of the
    later ones shift down), unless an action that runs reads the meter: that is
    p4c's error.
    """
    for entry, inst in lw.direct_meters:
        if entry["binding"] is None and entry["result_target"] is not None:
            raise CompileError(f"{inst.name}: direct meter is not associated with any "
                               "table via 'meters' table property", inst.loc)
    for arrays, directs in ((lw.counter_arrays, lw.direct_counters),
                            (lw.meter_arrays, lw.direct_meters)):
        unattached = {entry["name"] for entry, _ in directs if entry["binding"] is None}
        if unattached:
            arrays[:] = [e for e in arrays if e["name"] not in unattached]
            for index, e in enumerate(arrays):
                e["id"] = index
            lw.cp.counters = [c for c in lw.cp.counters if c.name not in unattached]
            lw.cp.meters = [m for m in lw.cp.meters if m.name not in unattached]
    for entry, inst in lw.direct_meters:
        if entry["binding"] is not None and entry["result_target"] is None:
            raise CompileError(f"direct_meter {inst.name} is never read: call {inst.name}"
                               ".read(...) in an action of its table", inst.loc)
