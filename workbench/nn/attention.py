"""``MultiheadAttention``, with PyTorch's weight names and arguments.

For queries (L, N, E) (``batch_first``: (N, L, E)), keys (S, N, E_k), values (S, N, E_v)
and H heads of size D = E / H::

    q, k, v = query W_qᵀ + b_q, key W_kᵀ + b_k, value W_vᵀ + b_v        split into H heads
    weights = softmax(q kᵀ / √D + mask)                                  (N, H, L, S)
    out     = concat_heads(weights v) W_oᵀ + b_o                          (L, N, E)

``in_proj_weight`` stacks W_q, W_k, W_v (3E, E) when keys and values have E features;
otherwise ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight`` are separate. Masks as
PyTorch: ``attn_mask`` (L, S) or (N·H, L, S), bool (True = may NOT attend) or float (added);
``key_padding_mask`` (N, S), True = padding.
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..ops import elementwise as ew
from ..ops import fused
from ..ops.creation import arange
from ..tensor import Tensor
from . import functional as F
from . import init
from ._params import make_param
from .linear import Linear
from .module import Module


def _additive(mask: Tensor, dtype) -> Tensor:
    """A bool mask (True = blocked) or a float mask as a float mask to add to the scores."""
    if mask.dtype.is_bool:
        return ew.where(mask, -math.inf, 0.0).to_dtype(dtype)
    return mask.to_dtype(dtype)


class MultiheadAttention(Module):
    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        if embed_dim % num_heads:
            raise ShapeError(
                f"MultiheadAttention: embed_dim={embed_dim} is not divisible by "
                f"num_heads={num_heads}"
            )
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.kdim = kdim or embed_dim
        self.vdim = vdim or embed_dim
        self.batch_first = batch_first
        self.same_dims = self.kdim == embed_dim and self.vdim == embed_dim
        weight_init = init.XavierUniform()
        if self.same_dims:
            self.register_parameter(
                "in_proj_weight",
                make_param(
                    vb, (3 * embed_dim, embed_dim), "in_proj_weight", weight_init, dtype, device
                ),
            )
        else:
            for name, dim in (("q", embed_dim), ("k", self.kdim), ("v", self.vdim)):
                self.register_parameter(
                    f"{name}_proj_weight",
                    make_param(
                        vb, (embed_dim, dim), f"{name}_proj_weight", weight_init, dtype, device
                    ),
                )
        self.register_parameter(
            "in_proj_bias",
            make_param(vb, (3 * embed_dim,), "in_proj_bias", init.ZEROS, dtype, device)
            if bias
            else None,
        )
        self.out_proj = Linear(
            embed_dim,
            embed_dim,
            bias,
            vb=None if vb is None else vb.pp("out_proj"),
            dtype=dtype,
            device=device,
        )
        if bias and vb is None:
            init.zeros_(self.out_proj.bias)

    def _project(self, query: Tensor, key: Tensor, value: Tensor):
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else b.chunk(3)
        if self.same_dims:
            w = self.in_proj_weight
            if query is key and key is value:
                return F.linear(query, w, b).chunk(3, -1)
            wq, wk, wv = w.narrow(0, 0, e), w.narrow(0, e, e), w.narrow(0, 2 * e, e)
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ):
        """Returns ``(output, weights)``; weights (N, L, S) averaged over heads (or
        (N, H, L, S)), None when ``need_weights`` is False."""
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            # (N, L, E) -> (L, N, E); keep identity so self-attention uses one projection.
            same_kv = key is value
            same_qk = query is key
            query = query.transpose(0, 1)
            key = query if same_qk else key.transpose(0, 1)
            value = key if same_kv else value.transpose(0, 1)
        if query.ndim != 3 or query.shape[-1] != self.embed_dim:
            raise ShapeError(
                f"MultiheadAttention: query must be (L, N, {self.embed_dim}), found {query.shape}"
            )
        L, N, E = query.shape
        S = key.shape[0]
        H, D = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value)
        # (L, N, E) -> (N, H, L, D)
        q = q.reshape(L, N, H, D).permute(1, 2, 0, 3)
        k = k.reshape(S, N, H, D).permute(1, 2, 0, 3)
        v = v.reshape(S, N, H, D).permute(1, 2, 0, 3)
        mask = self._mask(attn_mask, key_padding_mask, is_causal, N, L, S, q.dtype, q.device)
        p = self.dropout if self.training else 0.0
        if need_weights or p > 0:
            scores = (q * (1.0 / math.sqrt(D))) @ k.transpose(-1, -2)
            if mask is not None:
                scores = scores + mask
            weights = fused.softmax(scores, -1)
            out = (F.dropout(weights, p) if p > 0 else weights) @ v
            weights = weights if need_weights else None
        else:  # the fused kernel
            weights = None
            out = fused.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        out = out.permute(2, 0, 1, 3).reshape(L, N, E)
        out = self.out_proj(out)
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if weights is not None:
            if average_attn_weights:
                weights = weights.mean(1)
            if unbatched:
                weights = weights.squeeze(0)
        return out, weights

    def _mask(self, attn_mask, key_padding_mask, is_causal, N, L, S, dtype, device):
        """One additive float mask broadcasting to (N, H, L, S), or None."""
        mask = None
        if attn_mask is None and is_causal:
            attn_mask = arange(S, device=device).unsqueeze(0) > arange(L, device=device).unsqueeze(
                1
            )
        if attn_mask is not None:
            mask = _additive(attn_mask, dtype)
            if mask.ndim == 3:  # (N·H, L, S)
                mask = mask.reshape(N, self.num_heads, L, S)
            elif mask.shape != (L, S):
                raise ShapeError(
                    f"MultiheadAttention: attn_mask must be ({L}, {S}) or "
                    f"({N * self.num_heads}, {L}, {S}), found {mask.shape}"
                )
        if key_padding_mask is not None:
            if key_padding_mask.shape != (N, S):
                raise ShapeError(
                    f"MultiheadAttention: key_padding_mask must be ({N}, {S}), "
                    f"found {key_padding_mask.shape}"
                )
            pad = _additive(key_padding_mask, dtype).reshape(N, 1, 1, S)
            mask = pad if mask is None else mask + pad
        return mask

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"
