"""Sharded weights: each rank reads only its slice of a tensor (candle's ``Shard``).

    vb = ShardedVarBuilder(VarBuilder.from_safetensors("model.safetensors"), comm)
    w = vb.get_sharded((4096, 1024), "q_proj.weight", dim=0)   # (4096 / W, 1024) on rank r

Rank ``r`` of ``W`` gets the r-th of ``W`` equal blocks along ``dim``. Over safetensors the
slice is cut from the memory-mapped file before any conversion, so a rank copies (and
converts) only its own part. Over GGUF (``QVarBuilder``), a slice along the first dim or along
the last dim (a whole number of quantization blocks) is cut from the raw blocks:
``get_qtensor_sharded`` keeps it quantized, ``get_sharded`` dequantizes only the slice.
``parts=(hq, hk, hv)`` splits a fused tensor part by part (rank r: ``[q_r | k_r | v_r]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..device import CPU
from ..errors import ShapeError
from ..nn.var_builder import VarBuilder
from ..ops.shape import cat
from ..quantized.qtensor import QTensor
from ..quantized.var_builder import QVarBuilder
from ..tensor import Tensor
from .communicator import Communicator
from .errors import DistributedError


@dataclass(frozen=True)
class Shard:
    """Block ``rank`` of ``world_size`` equal blocks along ``dim``.

    ``parts``: the sizes of tensors stacked along ``dim`` in one (phi3's fused q|k|v, gate|up);
    each part is split on its own and the rank's blocks are concatenated in order, so that
    rank r holds ``[q_r | k_r | v_r]``. Empty: one part, the whole dim.
    """

    dim: int
    rank: int
    world_size: int
    parts: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise DistributedError(f"Shard: rank {self.rank} outside world size {self.world_size}")

    def ranges(self, shape: tuple[int, ...], name: str = "tensor") -> tuple[int, list[range]]:
        """(dim, the index ranges along dim that this rank keeps) in a tensor of ``shape``."""
        if not -len(shape) <= self.dim < len(shape):
            raise ShapeError(f"Shard: dim {self.dim} is out of range for {name} of shape {shape}")
        dim = self.dim % len(shape)
        parts = self.parts or (shape[dim],)
        if sum(parts) != shape[dim]:
            raise ShapeError(
                f"Shard: {name} has shape {shape}; its parts {list(parts)} along dim {dim} add "
                f"up to {sum(parts)}, not {shape[dim]}"
            )
        kept, begin = [], 0
        for part in parts:
            if part % self.world_size:
                what = (
                    f"dim {dim} ({part})" if len(parts) == 1 else f"a part of {part} of dim {dim}"
                )
                raise ShapeError(
                    f"Shard: {name} has shape {shape}; {what} does not split into "
                    f"{self.world_size} equal parts"
                )
            n = part // self.world_size
            kept.append(range(begin + self.rank * n, begin + (self.rank + 1) * n))
            begin += part
        return dim, kept

    def bounds(self, shape: tuple[int, ...], name: str = "tensor") -> tuple[int, int, int]:
        """(dim, start, length) of this block in a tensor of ``shape`` (one part)."""
        dim, (kept, *more) = self.ranges(shape, name)
        if more:
            raise ShapeError(f"Shard: {name} is split in {len(more) + 1} parts, not one block")
        return dim, kept.start, len(kept)

    def shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        dim, kept = self.ranges(shape)
        return (*shape[:dim], sum(map(len, kept)), *shape[dim + 1 :])


def shard_tensor(t: Tensor, shard: Shard, name: str = "tensor") -> Tensor:
    """This rank's block of a full tensor (a view; a copy when ``shard`` has several parts)."""
    dim, kept = shard.ranges(t.shape, name)
    blocks = [t.narrow(dim, r.start, len(r)) for r in kept]
    return blocks[0] if len(blocks) == 1 else cat(blocks, dim)


def shard_qtensor(q: QTensor, shard: Shard, name: str = "tensor") -> QTensor:
    """This rank's block of a QTensor, cut from the raw ggml blocks (no dequantization).

    Along the first dim whole rows are kept (a view of the file for one part); along the last
    dim, where the blocks run, each cut must fall on a block boundary.
    """
    dim, kept = shard.ranges(q.shape, name)
    if shard.world_size == 1:
        return q
    rows = q.data  # (rows, bytes per row): ggml rows run along the last dim
    if dim == 0 and q.ndim > 1:
        per = math.prod(q.shape[1:-1])
        blocks = [rows[r.start * per : r.stop * per] for r in kept]
        axis = 0
    elif dim == q.ndim - 1:
        gd = q.ggml_dtype
        bad = [r for r in kept if r.start % gd.block_size or len(r) % gd.block_size]
        if bad:
            cols = q.shape[-1]
            held = (
                f"{len(bad[0])} of its {cols} columns"
                if len(kept) == 1
                else f"its columns {bad[0].start}..{bad[0].stop} (of {cols})"
            )
            raise ShapeError(
                f"Shard: {name} ({gd.name}, shape {q.shape}) does not split over "
                f"{shard.world_size} ranks along its last dim: rank {shard.rank} would hold "
                f"{held}, not a multiple of the {gd.name} block size {gd.block_size}; use a "
                "world size that leaves whole blocks on each rank, or a file whose type has "
                "smaller blocks (F32, F16, Q8_0)"
            )
        blocks = [rows[:, gd.row_bytes(r.start) : gd.row_bytes(r.stop)] for r in kept]
        axis = 1
    else:
        raise ShapeError(
            f"Shard: a quantized {name} of shape {q.shape} can be split along its first or last "
            f"dim, not dim {dim}"
        )
    if len(blocks) == 1 and axis == 0:
        block = blocks[0]
    else:  # strided columns or several parts: one copy of this rank's part
        block = np.ascontiguousarray(np.concatenate(blocks, axis=axis))
    return QTensor(block, shard.shape(q.shape), q.ggml_dtype)


class ShardedVarBuilder:
    """A ``VarBuilder`` (or ``QVarBuilder``) whose ``get_sharded`` returns this rank's block.

    ``get`` / ``get_qtensor`` / ``contains`` are the wrapped builder's (replicated tensors).
    """

    def __init__(
        self,
        vb: VarBuilder,
        comm: Communicator | None = None,
        rank: int | None = None,
        world_size: int | None = None,
    ):
        if rank is None or world_size is None:
            if comm is None:
                raise DistributedError("ShardedVarBuilder: give comm, or rank and world_size")
            rank, world_size = comm.rank, comm.world_size
        self.vb, self.rank, self.world_size = vb, rank, world_size

    def pp(self, name: str | int) -> ShardedVarBuilder:
        return ShardedVarBuilder(self.vb.pp(name), rank=self.rank, world_size=self.world_size)

    push_prefix = pp

    @property
    def is_quantized(self) -> bool:
        return isinstance(self.vb, QVarBuilder)

    def shard(self, dim: int, parts: tuple[int, ...] = ()) -> Shard:
        return Shard(dim, self.rank, self.world_size, tuple(parts))

    def get(self, shape, name: str, init=None, dtype=None) -> Tensor:
        """The full (replicated) tensor."""
        return self.vb.get(shape, name, init, dtype)

    def get_qtensor(self, shape, name: str) -> QTensor:
        """The full (replicated) quantized tensor."""
        return self.vb.get_qtensor(shape, name)

    def contains(self, name: str) -> bool:
        return self.vb.contains(name)

    def get_sharded(self, shape, name: str, dim: int, dtype=None, parts=()) -> Tensor:
        """This rank's block along ``dim`` of the tensor ``name`` of full ``shape`` (of each
        of its ``parts`` along ``dim``, concatenated: see :class:`Shard`)."""
        shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
        shard = self.shard(dim, parts)
        path = self.vb.path(name)
        dtype = self.vb.dtype if dtype is None else dtype
        if self.is_quantized:
            q = shard_qtensor(self.vb.get_qtensor(shape, name), shard, path)
            gd = q.ggml_dtype.name
            out = q.dequantize(dtype or {"F16": "f16", "BF16": "bf16"}.get(gd, "f32"))
        else:
            # Stored dtype on the CPU: a view of the mapped file, sliced before converting.
            full = self.vb.to_dtype(None).to_device(CPU).get(shape, name)
            out = shard_tensor(full, shard, path).contiguous()
            if dtype is not None and out.dtype.is_floating_point and out.dtype is not dtype:
                out = out.to_dtype(dtype)
        return out if out.device == self.vb.device else out.to(self.vb.device)

    def get_qtensor_sharded(self, shape, name: str, dim: int, parts=()) -> QTensor:
        """This rank's block of a quantized tensor, still quantized."""
        if not self.is_quantized:
            raise DistributedError("get_qtensor_sharded needs a QVarBuilder (a GGUF file)")
        shape = tuple(int(s) for s in shape)
        q = self.vb.get_qtensor(shape, name)
        return shard_qtensor(q, self.shard(dim, parts), self.vb.path(name))

    def __repr__(self) -> str:
        return f"ShardedVarBuilder({self.vb!r}, rank {self.rank} of {self.world_size})"
