"""``DistributedBatcher``: each rank's share of every global batch, for data-parallel training.

Batch ``b`` of the epoch is the same global batch of ``batch_size · world_size`` samples on
every rank (the same shuffled order, drawn from ``seed`` and the epoch); rank ``r`` takes its
``r``-th contiguous slice. Concatenating the ranks' batches in rank order gives exactly the
batch that ``nn.Batcher(..., batch_size=batch_size · world_size)`` would give over that order,
which is what makes data-parallel training equal to one process. Call ``set_epoch(e)`` (or let
iteration advance it) for a new order each epoch.

Without ``drop_last``, the order is padded with its first samples up to a multiple of the
world size (as PyTorch's DistributedSampler does) so every rank gets a batch every step.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..device import Device
from ..errors import WorkbenchError
from ..nn.data import Batcher
from ..ops.creation import from_numpy
from ..tensor import Tensor
from .communicator import Communicator
from .world import get_communicator


class DistributedBatcher:
    """Iterate over this rank's part of ``arrays`` in batches of ``batch_size`` (per rank)."""

    def __init__(
        self,
        *arrays,
        batch_size: int = 32,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int = 0,
        comm: Communicator | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        device: Device | str | None = None,
    ):
        if (rank is None) != (world_size is None):
            raise WorkbenchError("DistributedBatcher: give both rank and world_size, or neither")
        if rank is None:
            comm = comm or get_communicator()
            rank, world_size = comm.rank, comm.world_size
        if not 0 <= rank < world_size:
            raise WorkbenchError(f"DistributedBatcher: rank {rank} outside world size {world_size}")
        # Batcher checks the arrays and holds them on the host.
        self._all = Batcher(*arrays, batch_size=batch_size * world_size)
        self.arrays, self.n = self._all.arrays, self._all.n
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.device = device
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def order(self) -> np.ndarray:
        """The epoch's global order of sample indices (the same on every rank)."""
        if self.shuffle:
            order = np.random.default_rng((self.seed, self.epoch)).permutation(self.n)
        else:
            order = np.arange(self.n)
        pad = -self.n % self.world_size
        if pad and not self.drop_last:
            order = np.concatenate([order, np.resize(order, pad)])
        return order

    def __len__(self) -> int:
        size = self.n + (0 if self.drop_last else -self.n % self.world_size)
        step = self.batch_size * self.world_size
        return size // step if self.drop_last else -(-size // step)

    def __iter__(self) -> Iterator[Tensor | tuple[Tensor, ...]]:
        order = self.order()
        step = self.batch_size * self.world_size
        for b in range(len(self)):
            batch = order[b * step : (b + 1) * step]
            share = len(batch) // self.world_size  # the last batch may be smaller
            idx = batch[self.rank * share : (self.rank + 1) * share]
            parts = tuple(
                from_numpy(np.ascontiguousarray(a[idx]), self.device) for a in self.arrays
            )
            yield parts[0] if len(parts) == 1 else parts
        self.epoch += 1

    def __repr__(self) -> str:
        return (
            f"DistributedBatcher({self.n} samples, rank {self.rank} of {self.world_size}, "
            f"batch_size={self.batch_size} per rank, shuffle={self.shuffle})"
        )
