"""The compiled register runs (``_vecops.c``): loading the extension and compiling a run's
steps into the small program it executes.

A vectorized run over a lane view (vectorize.py, laneviews.py) is, in numpy, six to ten
calls of ~0.3-1 us each whatever the lane count; ``_vecops.rmw`` does the whole run in
one call. Both forms come from the same ``Step`` list (vectorize._Ufuncs records it from
the run's template): the numpy form renders each step as a ufunc call, this module
encodes it as one 4-byte instruction. Every step is unsigned arithmetic modulo 2^bits
of the bank's dtype in both, so the results are identical bit for bit
(tests/unit/test_switch_vecops.py compares them).

``KERNEL`` is the extension module, or None: not built (``pip install -e .`` builds it
next to this file), or ``P4LITE_NO_NATIVE=1`` in the environment, which forces the numpy
form (p4lite never imports hosts/, so it does not share hosts/native.py's switch).
``Switch(program, native=False)`` does the same for one switch.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType

ENV_DISABLE = "P4LITE_NO_NATIVE"

# _vecops.c's limits and operation codes (the C enum's order)
MAX_REGS = 32
SCALAR = 128
MAX_SCALARS = 64
OPS = ("copy", "add", "subtract", "multiply", "bitwise_and", "bitwise_or", "bitwise_xor",
       "maximum", "minimum", "greater", "greater_equal", "less", "less_equal", "equal",
       "not_equal")
# a negated comparison (``0 if a > b else 1``) is the complementary one: the values are
# unsigned integers, totally ordered
_NEGATED = {"greater": "less_equal", "greater_equal": "less", "less": "greater_equal",
            "less_equal": "greater", "equal": "not_equal", "not_equal": "equal"}
_ARRAYS = {"_o": 0, "_v": 1}  # the old row, the lanes; temporaries _tK are register K + 1


def load() -> ModuleType | None:
    """The extension, or None when it is missing or disabled by the environment."""
    if os.environ.get(ENV_DISABLE, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("p4lite.switch.core._vecops")
    except ImportError:
        return None


KERNEL: ModuleType | None = load()


@dataclass(frozen=True, slots=True)
class Step:
    """One element-wise operation of a run: ``dst = op(a, b)`` over the lanes. ``args``
    are array names (``_o``, ``_v``, ``_tK``) or the Python source of a scalar already
    reduced below 2^bits; ``negated`` only for a comparison as a number."""

    dst: str
    op: str  # one of OPS
    args: tuple[str, str]
    negated: bool = False


def is_array(name: str) -> bool:
    return name in _ARRAYS or (name.startswith("_t") and name[2:].isdigit())


def _register(name: str) -> int:
    return _ARRAYS[name] if name in _ARRAYS else int(name[2:]) + 1


def program(steps: list[Step], result: str) -> tuple[bytes, tuple[str, ...]] | None:
    """``_vecops.rmw``'s program for ``steps`` and the scalar sources it takes (in order),
    or None when it does not fit the kernel's limits (the numpy form then runs)."""
    names = [result] + [a for s in steps for a in (s.dst, *s.args) if is_array(a)]
    scalars = tuple(dict.fromkeys(a for s in steps for a in s.args if not is_array(a)))
    if len(scalars) > MAX_SCALARS or max(_register(a) for a in names) >= MAX_REGS:
        return None
    code = [_register(result)]
    for s in steps:
        op = _NEGATED[s.op] if s.negated else s.op
        code += [OPS.index(op), _register(s.dst),
                 *(_register(a) if is_array(a) else SCALAR + scalars.index(a) for a in s.args)]
    return bytes(code), scalars
