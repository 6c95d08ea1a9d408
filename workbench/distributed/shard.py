"""Sharded weights: each rank reads only its slice of a tensor (candle's ``Shard``).

    vb = ShardedVarBuilder(VarBuilder.from_safetensors("model.safetensors"), comm)
    w = vb.get_sharded((4096, 1024), "q_proj.weight", dim=0)   # (4096 / W, 1024) on rank r

Rank ``r`` of ``W`` gets the r-th of ``W`` equal blocks along ``dim``. Over safetensors the
slice is cut from the memory-mapped file before any conversion, so a rank copies (and
converts) only its own part. Over GGUF (``QVarBuilder``), a slice along the first dim or along
the last dim (a whole number of quantization blocks) is cut from the raw blocks:
``get_qtensor_sharded`` keeps it quantized, ``get_sharded`` dequantizes only the slice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..device import CPU
from ..errors import ShapeError
from ..nn.var_builder import VarBuilder
from ..quantized.qtensor import QTensor
from ..quantized.var_builder import QVarBuilder
from ..tensor import Tensor
from .communicator import Communicator
from .errors import DistributedError


@dataclass(frozen=True)
class Shard:
    """Block ``rank`` of ``world_size`` equal blocks along ``dim``."""

    dim: int
    rank: int
    world_size: int

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise DistributedError(f"Shard: rank {self.rank} outside world size {self.world_size}")

    def bounds(self, shape: tuple[int, ...], name: str = "tensor") -> tuple[int, int, int]:
        """(dim, start, length) of this block in a tensor of ``shape``."""
        if not -len(shape) <= self.dim < len(shape):
            raise ShapeError(f"Shard: dim {self.dim} is out of range for {name} of shape {shape}")
        dim = self.dim % len(shape)
        if shape[dim] % self.world_size:
            raise ShapeError(
                f"Shard: {name} has shape {shape}; dim {dim} ({shape[dim]}) does not split into "
                f"{self.world_size} equal parts"
            )
        length = shape[dim] // self.world_size
        return dim, self.rank * length, length

    def shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        dim, _, length = self.bounds(shape)
        return (*shape[:dim], length, *shape[dim + 1 :])


def shard_tensor(t: Tensor, shard: Shard, name: str = "tensor") -> Tensor:
    """This rank's block of a full tensor (a view)."""
    dim, start, length = shard.bounds(t.shape, name)
    return t.narrow(dim, start, length)


def shard_qtensor(q: QTensor, shard: Shard, name: str = "tensor") -> QTensor:
    """This rank's block of a QTensor, cut from the raw ggml blocks (no dequantization)."""
    dim, start, length = shard.bounds(q.shape, name)
    rows = q.data  # (rows, bytes per row): ggml rows run along the last dim
    if dim == 0 and q.ndim > 1:
        per = math.prod(q.shape[1:-1])
        block = rows[start * per : (start + length) * per]
    elif dim == q.ndim - 1:
        gd = q.ggml_dtype
        if start % gd.block_size or length % gd.block_size:
            raise ShapeError(
                f"Shard: {name} ({gd.name}, shape {q.shape}) splits its last dim into parts of "
                f"{length}, not a multiple of the block size {gd.block_size}"
            )
        lo, n = gd.row_bytes(start), gd.row_bytes(length)
        block = rows[:, lo : lo + n].copy()  # strided columns: one copy of this rank's part
    else:
        raise ShapeError(
            f"Shard: a quantized {name} of shape {q.shape} can be split along its first or last "
            f"dim, not dim {dim}"
        )
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

    def shard(self, dim: int) -> Shard:
        return Shard(dim, self.rank, self.world_size)

    def get(self, shape, name: str, init=None, dtype=None) -> Tensor:
        """The full (replicated) tensor."""
        return self.vb.get(shape, name, init, dtype)

    def contains(self, name: str) -> bool:
        return self.vb.contains(name)

    def get_sharded(self, shape, name: str, dim: int, dtype=None) -> Tensor:
        """This rank's block along ``dim`` of the tensor ``name`` of full ``shape``."""
        shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
        shard = self.shard(dim)
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

    def get_qtensor_sharded(self, shape, name: str, dim: int) -> QTensor:
        """This rank's block of a quantized tensor, still quantized."""
        if not self.is_quantized:
            raise DistributedError("get_qtensor_sharded needs a QVarBuilder (a GGUF file)")
        shape = tuple(int(s) for s in shape)
        return shard_qtensor(self.vb.get_qtensor(shape, name), self.shard(dim), self.vb.path(name))

    def __repr__(self) -> str:
        return f"ShardedVarBuilder({self.vb!r}, rank {self.rank} of {self.world_size})"
