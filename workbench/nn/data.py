"""``Batcher``: mini-batches of in-memory data for training loops.

    for xb, yb in nn.Batcher(x, y, batch_size=64, shuffle=True):
        ...

The arrays (tensors or numpy arrays, sharing their first dim) are kept on the host; each
batch is gathered with numpy and handed over as tensors on ``device``. Shuffling draws from
``wb.manual_seed``'s generator (or ``generator=``), a new order every epoch.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..device import Device
from ..errors import ShapeError, WorkbenchError
from ..ops.creation import from_numpy
from ..random import Generator, default_generator
from ..tensor import Tensor


class Batcher:
    """Iterate over ``arrays`` in batches of ``batch_size`` along the first dim.

    ``drop_last`` skips a last, smaller batch. ``len(batcher)`` is the number of batches per
    epoch. With one array each batch is a tensor, otherwise a tuple of tensors.
    """

    def __init__(
        self,
        *arrays,
        batch_size: int = 32,
        shuffle: bool = False,
        drop_last: bool = False,
        device: Device | str | None = None,
        generator: Generator | None = None,
    ):
        if not arrays:
            raise WorkbenchError("Batcher: give at least one array")
        if batch_size < 1:
            raise WorkbenchError(f"Batcher: batch_size must be >= 1, found {batch_size}")
        self.arrays = [_host(a) for a in arrays]
        n = {a.shape[0] if a.ndim else None for a in self.arrays}
        if len(n) != 1 or None in n:
            raise ShapeError(
                "Batcher: the arrays need the same first dim, found shapes "
                + ", ".join(str(a.shape) for a in self.arrays)
            )
        self.n = n.pop()
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        self.device = device
        self.generator = generator

    def __len__(self) -> int:
        if self.drop_last:
            return self.n // self.batch_size
        return -(-self.n // self.batch_size)

    def __iter__(self) -> Iterator[Tensor | tuple[Tensor, ...]]:
        if self.shuffle:
            order = (self.generator or default_generator).rng.permutation(self.n)
        else:
            order = None
        for b in range(len(self)):
            lo = b * self.batch_size
            hi = min(lo + self.batch_size, self.n)
            if order is None:
                parts = [a[lo:hi] for a in self.arrays]
            else:
                idx = order[lo:hi]
                parts = [a[idx] for a in self.arrays]
            batch = tuple(from_numpy(np.ascontiguousarray(p), self.device) for p in parts)
            yield batch[0] if len(batch) == 1 else batch

    def __repr__(self) -> str:
        return (
            f"Batcher({self.n} samples, batch_size={self.batch_size}, "
            f"shuffle={self.shuffle}, drop_last={self.drop_last})"
        )


def _host(a) -> np.ndarray:
    if isinstance(a, Tensor):
        return a.detach().numpy()
    return np.asarray(a)
