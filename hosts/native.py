"""The compiled kernels (hosts/_kernels.c), when they are there.

``KERNELS`` is the extension module, or None: not built (``pip install -e .``, which
``make`` runs, builds it), or ``P4HUB_NO_NATIVE=1`` in the environment (forces the numpy
paths, e.g. to compare). Callers (hosts/quantize.py, hosts/pbox/aggregator.py) test
it at each call, so tests can switch paths by setting it; both paths give the same
bytes (tests/unit/test_kernels.py).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import numpy as np

ENV_DISABLE = "P4HUB_NO_NATIVE"


def load() -> ModuleType | None:
    """The kernels module, or None when it is missing or disabled by the environment."""
    if os.environ.get(ENV_DISABLE, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("p4hub.hosts._kernels")
    except ImportError:
        return None


KERNELS: ModuleType | None = load()


def int32_rows(a: np.ndarray) -> bool:
    """Whether the kernels take ``a`` as (m, L) int32 rows: native or big-endian int32,
    2-D, lanes contiguous (rows may be strided, like a packet array's lanes)."""
    return (a.ndim == 2 and a.dtype.kind == "i" and a.dtype.itemsize == 4
            and a.dtype.byteorder in "=|>" and a.strides[1] == 4)


def float32_rows(a: np.ndarray) -> bool:
    """Whether ``a`` is a C-contiguous native float32 (m, L) array."""
    return a.ndim == 2 and a.dtype == np.float32 and a.dtype.isnative and a.flags.c_contiguous
