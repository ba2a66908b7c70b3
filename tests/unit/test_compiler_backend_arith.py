"""Random expressions: compiled JSON run on the switch core vs a Python model of P4.

Each expression is built over the input fields a, b (bit<8>) and w (bit<16>) with
P4's wrap-around semantics, compiled, run on the switch core and compared with an
independent evaluation here. Seeds are fixed, so a failure is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from p4lite.compiler.driver import compile_text
from p4lite.switch.core.switch import Switch

N_EXPR = 12


Eval = Callable[[dict[str, int]], int]  # the inputs a, b, w -> the expression's value


def _gen(rng: random.Random, width: int, depth: int) -> tuple[str, Eval]:
    """A P4 expression of type bit<width> and a function computing it from inputs."""
    mask = (1 << width) - 1
    if depth == 0 or rng.random() < 0.25:
        choice = rng.random()
        if width == 8 and choice < 0.7:
            name = rng.choice(["a", "b"])
            return f"hdr.h.{name}", lambda env, n=name: env[n]
        if width == 16 and choice < 0.7:
            return "hdr.h.w", lambda env: env["w"]
        value = rng.randrange(1 << width)
        return f"{width}w{value}", lambda env, v=value: v
    op = rng.choice(["+", "-", "*", "&", "|", "^", "<<", ">>", "~", "neg", "slice",
                     "concat", "cast", "|+|", "|-|", "?:"])
    if op in ("+", "-", "*", "&", "|", "^", "|+|", "|-|"):
        (lt, lf), (rt, rf) = _gen(rng, width, depth - 1), _gen(rng, width, depth - 1)
        py = {
            "+": lambda x, y: (x + y) & mask, "-": lambda x, y: (x - y) & mask,
            "*": lambda x, y: (x * y) & mask, "&": lambda x, y: x & y,
            "|": lambda x, y: x | y, "^": lambda x, y: x ^ y,
            "|+|": lambda x, y: min(x + y, mask), "|-|": lambda x, y: max(x - y, 0),
        }[op]
        return f"({lt} {op} {rt})", lambda env: py(lf(env), rf(env))
    if op in ("<<", ">>"):
        lt, lf = _gen(rng, width, depth - 1)
        amount = rng.randrange(width + 2)
        if op == "<<":
            return f"({lt} << {amount})", lambda env: (lf(env) << amount) & mask
        return f"({lt} >> {amount})", lambda env: lf(env) >> amount
    if op in ("~", "neg"):
        lt, lf = _gen(rng, width, depth - 1)
        if op == "~":
            return f"(~{lt})", lambda env: ~lf(env) & mask
        return f"(-{lt})", lambda env: -lf(env) & mask
    if op == "slice" and width <= 8:
        inner, inner_f = _gen(rng, 16, depth - 1)
        lo = rng.randrange(16 - width + 1)
        return (f"({inner})[{lo + width - 1}:{lo}]",
                lambda env: (inner_f(env) >> lo) & mask)
    if op == "concat" and width == 16:
        (lt, lf), (rt, rf) = _gen(rng, 8, depth - 1), _gen(rng, 8, depth - 1)
        return f"({lt} ++ {rt})", lambda env: (lf(env) << 8) | rf(env)
    if op == "cast":
        other = 16 if width == 8 else 8
        inner, inner_f = _gen(rng, other, depth - 1)
        return f"((bit<{width}>) {inner})", lambda env: inner_f(env) & mask
    if op == "?:":
        (ct, cf), (rt, rf) = _gen(rng, 8, depth - 1), _gen(rng, width, depth - 1)
        (lt, lf) = _gen(rng, width, depth - 1)
        return (f"({ct} > 8w100 ? {lt} : {rt})",
                lambda env: lf(env) if cf(env) > 100 else rf(env))
    return _gen(rng, width, 0)


def _program(exprs: list[str]) -> str:
    outs = " ".join(f"bit<16> o{i};" for i in range(len(exprs)))
    body = "\n".join(f"        hdr.h.o{i} = {e};" for i, e in enumerate(exprs))
    return f"""
#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> a; bit<8> b; bit<16> w; {outs} }}
struct headers {{ h_t h; }}
struct meta_t {{ bit<8> unused; }}
parser P(packet_in pkt, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{
    state start {{ pkt.extract(hdr.h); transition accept; }}
}}
control VC(inout headers hdr, inout meta_t meta) {{ apply {{ }} }}
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{
    apply {{
        sm.egress_spec = 1;
{body}
    }}
}}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout headers hdr, inout meta_t meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers hdr) {{ apply {{ pkt.emit(hdr.h); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@pytest.mark.parametrize("seed", range(10))
def test_random_expressions_match_p4_semantics(seed: int) -> None:
    rng = random.Random(seed)
    generated = [_gen(rng, 16, 4) for _ in range(N_EXPR)]
    switch = Switch(compile_text(_program([e for e, _ in generated]), filename="arith.p4").bmv2)
    for _ in range(40):
        env = {"a": rng.randrange(256), "b": rng.randrange(256), "w": rng.randrange(1 << 16)}
        packet = bytes([env["a"], env["b"]]) + env["w"].to_bytes(2, "big") + bytes(2 * N_EXPR)
        ((_, data),) = switch.process(packet, port=0)
        for i, (text, model) in enumerate(generated):
            got = int.from_bytes(data[4 + 2 * i:6 + 2 * i], "big")
            assert got == model(env), f"{text} with {env}"


def _signed(value: int, width: int = 8) -> int:
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def _gen_signed(rng: random.Random, depth: int) -> tuple[str, Eval]:
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.7:
            name = rng.choice(["s", "t"])
            return f"hdr.g.{name}", lambda env, n=name: env[n]
        value = rng.randrange(-128, 128)
        return f"(8s{value})" if value >= 0 else f"(-8s{-value})", lambda env, v=value: v
    op = rng.choice(["+", "-", "*", "|+|", "|-|", "neg", "?:"])
    if op == "neg":
        inner, f = _gen_signed(rng, depth - 1)
        return f"(-{inner})", lambda env: _signed(-f(env))
    (lt, lf), (rt, rf) = _gen_signed(rng, depth - 1), _gen_signed(rng, depth - 1)
    if op == "?:":
        return (f"({lt} < {rt} ? {lt} : {rt})",
                lambda env: lf(env) if lf(env) < rf(env) else rf(env))
    py = {
        "+": lambda x, y: _signed(x + y), "-": lambda x, y: _signed(x - y),
        "*": lambda x, y: _signed(x * y),
        "|+|": lambda x, y: max(-128, min(127, x + y)),
        "|-|": lambda x, y: max(-128, min(127, x - y)),
    }[op]
    return f"({lt} {op} {rt})", lambda env: py(lf(env), rf(env))


@pytest.mark.parametrize("seed", range(5))
def test_random_signed_expressions_match_p4_semantics(seed: int) -> None:
    rng = random.Random(100 + seed)
    generated = [_gen_signed(rng, 3) for _ in range(N_EXPR)]
    outs = " ".join(f"int<8> r{i};" for i in range(N_EXPR))
    body = "\n".join(f"        hdr.g.r{i} = {e};" for i, (e, _) in enumerate(generated))
    text = _program([]).replace("header h_t {", f"header g_t {{ int<8> s; int<8> t; {outs} }}\n"
                                "header h_t {").replace(
        "struct headers { h_t h; }", "struct headers { g_t g; }").replace(
        "pkt.extract(hdr.h);", "pkt.extract(hdr.g);").replace(
        "pkt.emit(hdr.h);", "pkt.emit(hdr.g);").replace(
        "sm.egress_spec = 1;", "sm.egress_spec = 1;\n" + body)
    switch = Switch(compile_text(text, filename="signed.p4").bmv2)
    for _ in range(40):
        env = {"s": rng.randrange(-128, 128), "t": rng.randrange(-128, 128)}
        packet = bytes([env["s"] & 0xFF, env["t"] & 0xFF]) + bytes(N_EXPR)
        ((_, data),) = switch.process(packet, port=0)
        for i, (expr_text, model) in enumerate(generated):
            assert _signed(data[2 + i]) == model(env), f"{expr_text} with {env}"
