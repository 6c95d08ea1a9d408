"""``Embedding``: a lookup table of vectors."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional, init
from ._params import make_param
from .module import Module


class Embedding(Module):
    """ids (...) -> vectors (..., embedding_dim); ``weight``: (num_embeddings, embedding_dim),
    initialised N(0, 1) as in PyTorch (``vb.get(..., "weight")`` with a builder).

    ``padding_idx``: that row starts at zeros and never receives a gradient."""

    weight: Tensor

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        weight = make_param(
            vb, (num_embeddings, embedding_dim), "weight", init.Normal(0.0, 1.0), dtype, device
        )
        if padding_idx is not None and vb is None:
            from ..autograd import no_grad

            with no_grad():
                weight[padding_idx].zero_()
        self.register_parameter("weight", weight)

    def forward(self, ids: Tensor) -> Tensor:
        return functional.embedding(ids, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
