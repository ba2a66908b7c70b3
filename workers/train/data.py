"""scikit-learn's 8x8 digits as tensors, and a deterministic per-rank sharding.

The data set ships inside scikit-learn, so nothing is downloaded on the Mininet hosts.
Every rank loads the same split and computes its own shard from (seed, epoch), so no
rank needs to talk to another to know what to train on.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

DATASET_SIZE = 1797  # len(load_digits().target)
TEST_SIZE = 360
TRAIN_SIZE = DATASET_SIZE - TEST_SIZE  # 1437
PIXEL_MAX = 16.0  # load_digits pixels are integers 0..16


class Split(NamedTuple):
    train_images: torch.Tensor  # (N, 1, 8, 8) float32 in [0, 1]
    train_labels: torch.Tensor  # (N,) int64
    test_images: torch.Tensor
    test_labels: torch.Tensor


def load_split(seed: int) -> Split:
    """The digits, split into train and test by a permutation drawn from ``seed``."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / PIXEL_MAX).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    if len(labels) != DATASET_SIZE:  # shard() relies on the size without loading the data
        raise RuntimeError(f"load_digits has {len(labels)} images, expected {DATASET_SIZE}")
    order = np.random.default_rng(seed).permutation(len(labels))
    test, train = order[:TEST_SIZE], order[TEST_SIZE:]
    return Split(torch.from_numpy(images[train]), torch.from_numpy(labels[train]),
                 torch.from_numpy(images[test]), torch.from_numpy(labels[test]))


def global_batches(epoch: int, world: int, batch_per_rank: int, seed: int,
                   n_train: int) -> list[np.ndarray]:
    """The epoch's global batches: a (seed, epoch) permutation cut into
    ``world * batch_per_rank`` samples each; the last partial batch is dropped so every
    rank runs the same number of steps."""
    size = world * batch_per_rank
    order = np.random.default_rng([seed, epoch]).permutation(n_train)
    return [order[start:start + size] for start in range(0, n_train - size + 1, size)]


def shard(epoch: int, rank: int, world: int, batch_per_rank: int, seed: int,
          n_train: int = TRAIN_SIZE) -> list[np.ndarray]:
    """Rank ``rank``'s training indices for each step of ``epoch``: slice
    ``[rank*b, (rank+1)*b)`` of every global batch. The global batch at a step depends
    only on (seed, epoch, world * b), not on how it is split among ranks."""
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} outside world {world}")
    lo, hi = rank * batch_per_rank, (rank + 1) * batch_per_rank
    return [batch[lo:hi] for batch in global_batches(epoch, world, batch_per_rank, seed, n_train)]

