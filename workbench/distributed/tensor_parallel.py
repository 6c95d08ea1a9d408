"""Tensor-parallel linear layers (Megatron's split, as in candle's llama_multiprocess).

For y = x Wᵀ + b with W: (out, in), ``W`` ranks:

- ``ColumnParallelLinear`` keeps rows ``r·out/W ..`` of W (output features): each rank computes
  its slice of y from the full x. ``gather_output`` all-gathers the slices into the full y;
  without it the slice feeds a ``RowParallelLinear`` directly (attention heads, MLP hidden).
- ``RowParallelLinear`` keeps columns ``r·in/W ..`` of W (input features) and takes the matching
  slice of x; the partial products are summed with one all-reduce, then b is added once.

A column-parallel layer followed by a row-parallel one (an MLP's up/down projections, attention's
qkv/out projections) needs one all-reduce per pair. Over a GGUF file (``QVarBuilder``), weights
stored in a block type stay quantized: each rank multiplies with a ``QLinear`` over its slice of
the raw blocks (``.local``). Inference only: no gradient flows through the collectives.

``TensorParallel`` is the same split for models written on numpy arrays (the LLM families):
the sharded builder of their weights and the two collectives, ``reduce`` and ``gather``.
"""

from __future__ import annotations

import numpy as np

from ..nn import functional as F
from ..nn.linear import Linear
from ..nn.module import Module
from ..nn.var_builder import VarBuilder
from ..ops.creation import from_numpy
from ..quantized.nn import QLinear
from ..tensor import Tensor
from .communicator import Communicator
from .errors import DistributedError
from .shard import Shard, ShardedVarBuilder


class _ParallelLinear(Module):
    """The weight loading both splits share: W's block along ``split_dim`` on this rank,
    quantized (``.local``, a ``QLinear``) when the file stores a block type."""

    split_dim: int  # of W (out, in): 0 splits the outputs, 1 the inputs
    weight: Tensor | None  # this rank's block of W; None when ``local`` holds it quantized
    bias: Tensor | None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        comm: Communicator,
        vb: VarBuilder | ShardedVarBuilder,
        bias: bool,
    ):
        super().__init__()
        svb = vb if isinstance(vb, ShardedVarBuilder) else ShardedVarBuilder(vb, comm)
        self.comm = comm
        self.in_features, self.out_features = in_features, out_features
        shape = (out_features, in_features)
        self.local = None
        if svb.is_quantized and svb.vb.get_qtensor_unchecked("weight").ggml_dtype.is_quantized:
            self.local = QLinear(svb.get_qtensor_sharded(shape, "weight", self.split_dim))
        weight = (
            None if self.local is not None else svb.get_sharded(shape, "weight", self.split_dim)
        )
        self.register_parameter("weight", weight)
        self.register_parameter("bias", self._bias(svb, out_features) if bias else None)

    def _bias(self, svb: ShardedVarBuilder, out_features: int) -> Tensor:
        raise NotImplementedError

    def _product(self, x: Tensor) -> Tensor:
        """x times this rank's block of Wᵀ, without the bias."""
        return F.linear(x, self.weight) if self.local is None else self.local(x)

    def extra_repr(self) -> str:
        features = [f"in_features={self.in_features}", f"out_features={self.out_features}"]
        n = (self.out_features, self.in_features)[self.split_dim] // self.comm.world_size
        features[1 - self.split_dim] += f" ({n} on rank {self.comm.rank})"
        return ", ".join(features)


class ColumnParallelLinear(_ParallelLinear):
    """x: (..., in) -> (..., out / W) on each rank, or (..., out) with ``gather_output``."""

    split_dim = 0

    def __init__(
        self,
        in_features: int,
        out_features: int,
        comm: Communicator,
        vb: VarBuilder | ShardedVarBuilder,
        bias: bool = True,
        gather_output: bool = False,
    ):
        super().__init__(in_features, out_features, comm, vb, bias)
        self.gather_output = gather_output

    def _bias(self, svb: ShardedVarBuilder, out_features: int) -> Tensor:
        return svb.get_sharded((out_features,), "bias", 0)

    def forward(self, x: Tensor) -> Tensor:
        y = self._product(x)
        y = y if self.bias is None else y + self.bias
        return self.comm.all_gather(y, dim=-1) if self.gather_output else y

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, gather_output={self.gather_output}"


class RowParallelLinear(_ParallelLinear):
    """x: (..., in / W) on each rank (``input_is_parallel``) or (..., in) -> (..., out)."""

    split_dim = 1

    def __init__(
        self,
        in_features: int,
        out_features: int,
        comm: Communicator,
        vb: VarBuilder | ShardedVarBuilder,
        bias: bool = True,
        input_is_parallel: bool = True,
    ):
        super().__init__(in_features, out_features, comm, vb, bias)
        self.input_is_parallel = input_is_parallel

    def _bias(self, svb: ShardedVarBuilder, out_features: int) -> Tensor:
        return svb.get((out_features,), "bias")  # added once, after the sum

    def forward(self, x: Tensor) -> Tensor:
        if not self.input_is_parallel:
            n = self.in_features // self.comm.world_size
            x = x.narrow(-1, self.comm.rank * n, n)
        y = self.comm.all_reduce(self._product(x))
        return y if self.bias is None else y + self.bias


def shard_linear(
    linear: Linear, comm: Communicator, style: str, **kwargs
) -> ColumnParallelLinear | RowParallelLinear:
    """A column- (``style="column"``) or row-parallel (``"row"``) copy of a full ``Linear``."""
    state = {"weight": linear.weight.detach()}
    if linear.bias is not None:
        state["bias"] = linear.bias.detach()
    vb = VarBuilder.from_dict(state)
    cls = {"column": ColumnParallelLinear, "row": RowParallelLinear}[style]
    return cls(linear.in_features, linear.out_features, comm, vb, linear.bias is not None, **kwargs)


class TensorParallel:
    """A model split over the ranks of ``comm`` (None: one process, nothing split).

    ``builder(vb)`` loads this rank's blocks (:class:`ShardedVarBuilder`); ``reduce(y)`` sums
    a row-parallel product over the ranks in place and ``gather(y)`` concatenates the ranks'
    column blocks along the last axis. On one process both are None, so layers skip the call.
    """

    def __init__(self, comm: Communicator | None = None):
        if comm is not None and comm.device_kind != "cpu":
            raise DistributedError(
                f"TensorParallel: the model computes on the CPU, so it needs a CPU communicator "
                f"(MPI), found {comm.backend} on {comm.device_kind}"
            )
        self.comm = comm
        self.rank, self.world_size = (0, 1) if comm is None else (comm.rank, comm.world_size)
        split = self.world_size > 1
        self.reduce = self._all_reduce if split else None
        self.gather = self._all_gather if split else None

    def builder(self, vb: VarBuilder) -> ShardedVarBuilder:
        return ShardedVarBuilder(vb, rank=self.rank, world_size=self.world_size)

    def shard(self, dim: int, parts: tuple[int, ...] = ()) -> Shard:
        return Shard(dim, self.rank, self.world_size, parts)

    def split(self, n: int, what: str) -> int:
        """``n / world_size``; a clear error when ``n`` does not divide evenly."""
        if n % self.world_size:
            raise DistributedError(
                f"tensor parallel over {self.world_size} ranks: the model's {n} {what} do not "
                f"split evenly (use a world size that divides {n})"
            )
        return n // self.world_size

    def from_rank0(self, value: int) -> int:
        """Rank 0's ``value`` on every rank: decisions taken on each rank (a sampled token)
        must agree, whatever their random generators or the last bits of their sums."""
        if self.comm is None:
            return value
        return int(self.comm.broadcast(from_numpy(np.array([value], np.int64)), root=0).item())

    def _all_reduce(self, y: np.ndarray) -> np.ndarray:
        y = np.ascontiguousarray(y)
        t = from_numpy(y)
        self.comm.all_reduce(t, out=t)
        return y

    def _all_gather(self, y: np.ndarray) -> np.ndarray:
        return self.comm.all_gather(from_numpy(np.ascontiguousarray(y)), dim=-1).numpy()

    def __repr__(self) -> str:
        return f"TensorParallel(rank {self.rank} of {self.world_size})"
