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
"""

from __future__ import annotations

from ..nn import functional as F
from ..nn.linear import Linear
from ..nn.module import Module
from ..nn.var_builder import VarBuilder
from ..quantized.nn import QLinear
from ..tensor import Tensor
from .communicator import Communicator
from .shard import ShardedVarBuilder


def _sharded(vb: VarBuilder | ShardedVarBuilder, comm: Communicator) -> ShardedVarBuilder:
    return vb if isinstance(vb, ShardedVarBuilder) else ShardedVarBuilder(vb, comm)


def _local_linear(svb: ShardedVarBuilder, shape: tuple[int, int], dim: int) -> QLinear | None:
    """A ``QLinear`` over this rank's quantized slice when the file stores a block type."""
    if not svb.is_quantized:
        return None
    q = svb.vb.get_qtensor_unchecked("weight")
    if not q.ggml_dtype.is_quantized:
        return None
    return QLinear(svb.get_qtensor_sharded(shape, "weight", dim))


class ColumnParallelLinear(Module):
    """x: (..., in) -> (..., out / W) on each rank, or (..., out) with ``gather_output``."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        comm: Communicator,
        vb: VarBuilder | ShardedVarBuilder,
        bias: bool = True,
        gather_output: bool = False,
    ):
        super().__init__()
        svb = _sharded(vb, comm)
        self.comm, self.gather_output = comm, gather_output
        self.in_features, self.out_features = in_features, out_features
        shape = (out_features, in_features)
        self.local = _local_linear(svb, shape, 0)
        weight = None if self.local is not None else svb.get_sharded(shape, "weight", 0)
        self.register_parameter("weight", weight)
        self.register_parameter(
            "bias", svb.get_sharded((out_features,), "bias", 0) if bias else None
        )

    def forward(self, x: Tensor) -> Tensor:
        if self.local is None:
            y = F.linear(x, self.weight, self.bias)
        else:
            y = self.local(x)
            y = y if self.bias is None else y + self.bias
        return self.comm.all_gather(y, dim=-1) if self.gather_output else y

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features} "
            f"({self.out_features // self.comm.world_size} on rank {self.comm.rank}), "
            f"gather_output={self.gather_output}"
        )


class RowParallelLinear(Module):
    """x: (..., in / W) on each rank (``input_is_parallel``) or (..., in) -> (..., out)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        comm: Communicator,
        vb: VarBuilder | ShardedVarBuilder,
        bias: bool = True,
        input_is_parallel: bool = True,
    ):
        super().__init__()
        svb = _sharded(vb, comm)
        self.comm, self.input_is_parallel = comm, input_is_parallel
        self.in_features, self.out_features = in_features, out_features
        shape = (out_features, in_features)
        self.local = _local_linear(svb, shape, 1)
        weight = None if self.local is not None else svb.get_sharded(shape, "weight", 1)
        self.register_parameter("weight", weight)
        self.register_parameter("bias", svb.get((out_features,), "bias") if bias else None)

    def forward(self, x: Tensor) -> Tensor:
        if not self.input_is_parallel:
            n = self.in_features // self.comm.world_size
            x = x.narrow(-1, self.comm.rank * n, n)
        partial = F.linear(x, self.weight) if self.local is None else self.local(x)
        y = self.comm.all_reduce(partial)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features} ({self.in_features // self.comm.world_size} on rank "
            f"{self.comm.rank}), "
            f"out_features={self.out_features}"
        )


def shard_linear(linear: Linear, comm: Communicator, style: str, **kwargs) -> Module:
    """A column- (``style="column"``) or row-parallel (``"row"``) copy of a full ``Linear``."""
    state = {"weight": linear.weight.detach()}
    if linear.bias is not None:
        state["bias"] = linear.bias.detach()
    vb = VarBuilder.from_dict(state)
    cls = {"column": ColumnParallelLinear, "row": RowParallelLinear}[style]
    return cls(linear.in_features, linear.out_features, comm, vb, linear.bias is not None, **kwargs)
