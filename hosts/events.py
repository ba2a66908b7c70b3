"""Events a session reports (past tense, aioquic style); read with ``Session.next_event()``."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class TensorCompleted:
    """Every block of a tensor came back aggregated; ``result`` has the input's shape."""

    tensor_id: Hashable
    result: np.ndarray


@dataclass(frozen=True, slots=True)
class TensorFailed:
    """A tensor will never complete (no progress past the deadline, or the session died)."""

    tensor_id: Hashable
    reason: str


Event = TensorCompleted | TensorFailed
