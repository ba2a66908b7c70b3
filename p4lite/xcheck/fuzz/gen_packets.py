"""Random table entries and packets for a generated program, written as STF.

Entries are written the way both STF runners take them (p4c's ``bmv2stf.py`` and
``p4lite.stf --strict``): quoted key names, hexadecimal values, ``*`` nibbles for
ternary and LPM keys (only on fields whose width is a multiple of 4), a distinct
priority per entry of a table with a ternary key, and no two entries with one key.
Packets are biased towards the entries: a packet often copies an entry's value into
the header field the key reads, with random bits where the entry's mask has none
(the masked-out bits the issue's ternary case is about).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from p4lite.xcheck.fuzz.spec import STACK, ProgramSpec, Table


@dataclass(frozen=True)
class Entry:
    table: str
    line: str  # the STF ``add`` line
    keys: tuple[tuple[str, int, int], ...]  # (key expression, value, mask)


@dataclass(frozen=True)
class Packet:
    port: int
    data: bytes


def _hex(value: int, width: int) -> str:
    return f"0x{value:0{max(1, (width + 3) // 4)}x}"


def _ternary_text(value: int, mask: int, width: int) -> str:
    digits = (width + 3) // 4
    out = []
    for i in reversed(range(digits)):
        nib_mask = (mask >> (4 * i)) & 0xF
        out.append("*" if nib_mask == 0 else f"{(value >> (4 * i)) & 0xF:x}")
    return "0x" + "".join(out)


def _nibble_mask(rng: random.Random, width: int) -> int:
    mask = 0
    for i in range(width // 4):
        if rng.random() < 0.6:
            mask |= 0xF << (4 * i)
    return mask


def _key_value(rng: random.Random, kind: str, width: int) -> tuple[int, int, str]:
    top = (1 << width) - 1
    value = rng.randint(0, top)
    if kind == "ternary" and width % 4 == 0:
        mask = _nibble_mask(rng, width)
        return value & mask, mask, _ternary_text(value & mask, mask, width)
    if kind == "lpm" and width % 4 == 0:
        # BMv2 counts the prefix on the byte-padded key; p4lite takes one only covering
        # pad bits for /0 (a second such entry is a duplicate there: docs/p4lite.md §8)
        pad = -width % 8
        plen = 4 * rng.randint(0, width // 4)
        plen = 0 if plen <= pad else plen
        mask = (top >> (width - plen)) << (width - plen) if plen else 0
        return value & mask, mask, _ternary_text(value & mask, mask, width)
    return value, top, _hex(value, width)


def entries_for(spec: ProgramSpec, tables: list[Table], rng: random.Random) -> list[Entry]:
    out: list[Entry] = []
    for t in tables:
        if t.const_entries or not t.keys:
            continue
        prioritised = any(k in ("ternary", "range", "optional") for _, k, _ in t.keys)
        seen: set[tuple] = set()
        for n in range(rng.randint(0, 5)):
            parts, keys = [], []
            for expr, kind, width in t.keys:
                value, mask, text = _key_value(rng, kind, width)
                parts.append(f'"{expr}":{text}')
                keys.append((expr, value, mask))
            ident = tuple(keys)
            if ident in seen:
                continue
            seen.add(ident)
            action = rng.choice(t.actions)
            base = action.split("(")[0]
            args = ", ".join(f"p{j}:{_hex(rng.randint(0, (1 << w) - 1), w)}"
                             for j, w in enumerate(t.action_params[base]))
            qual = "NoAction" if base == "NoAction" else f"MyIngress.{base}"
            prio = f" {n + 1}" if prioritised else ""
            line = f"add MyIngress.{t.name}{prio} {' '.join(parts)} {qual}({args})"
            out.append(Entry(t.name, line, ident))
    return out


def _field_offsets(spec: ProgramSpec) -> dict[str, tuple[int, int]]:
    """Where each header field is in a packet: path -> (bit offset, width)."""
    out: dict[str, tuple[int, int]] = {}
    offset = 0
    for name, width in spec.h_fields:
        out[f"hdr.h.{name}"] = (offset, width)
        offset += width
    for i in range(STACK):
        out[f"hdr.s[{i}].v"] = (offset, 8)
        offset += 8
    return out


def packets_for(spec: ProgramSpec, entries: list[Entry], rng: random.Random,
                count: int) -> list[Packet]:
    offsets = _field_offsets(spec)
    total_bits = spec.h_bytes() * 8 + STACK * 8
    out: list[Packet] = []
    for i in range(count):
        bits = rng.getrandbits(total_bits)
        if entries and rng.random() < 0.7:
            entry = rng.choice(entries)
            for expr, value, mask in entry.keys:
                if expr not in offsets:
                    continue  # a metadata key or a slice: only statements set it
                off, width = offsets[expr]
                shift = total_bits - off - width
                noise = rng.getrandbits(width)
                field_value = (value & mask) | (noise & ~mask & ((1 << width) - 1))
                bits &= ~(((1 << width) - 1) << shift)
                bits |= field_value << shift
        tail = 6 if spec.union or spec.varbit else 3  # what they parse, or too short
        data = bits.to_bytes(total_bits // 8, "big") + rng.randbytes(rng.randint(0, tail))
        port = i if i < 2 else rng.randint(0, 1)  # both ports get an interface
        out.append(Packet(port, data))
    return out


def render_stf(entries: list[Entry], packets: list[Packet],
               outputs: list[list[tuple[int, bytes]]] | None, setup: list[str] | None = None
               ) -> str:
    """The STF: the setup lines (clone sessions), every entry, then each packet followed
    by what p4lite sent for it."""
    lines = list(setup or []) + [e.line for e in entries]
    for i, pkt in enumerate(packets):
        lines.append(f"packet {pkt.port} {pkt.data.hex().upper()}")
        for port, data in (outputs[i] if outputs is not None else []):
            lines.append(f"expect {port} {data.hex().upper()} $")
    return "\n".join(lines) + "\n"
