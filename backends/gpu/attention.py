"""Attention on the GPU backends as a softmax between two GEMMs (scores are materialised)."""

from __future__ import annotations

import numpy as np

from ..layout import Layout


class AttentionOps:
    __slots__ = ()

    def scaled_dot_product_attention(self, q_layout, k, k_layout, v, v_layout, mask,
                                     mask_layout, is_causal: bool, scale: float):  # fmt: skip
        """softmax(q kᵀ · scale + mask) v with q (*B, L, E), k (*B, S, E), v (*B, S, Ev).

        ``mask`` (or None) is bool (True = keep) or float (added), broadcast to (*B, L, S);
        ``is_causal`` keeps j ≤ i. Rows with every score masked give zeros (as PyTorch).
        Returns (out (*B, L, Ev), probabilities (*B, L, S) in the compute dtype).
        """
        dtype = self.dtype
        cdt = self.K.compute_dtype(dtype)
        batch = tuple(q_layout.shape[:-2])
        length, source = q_layout.shape[-2], k_layout.shape[-2]
        shape = (*batch, length, source)
        kt = Layout((*k_layout.shape[:-2], k_layout.shape[-1], k_layout.shape[-2]),
                    (*k_layout.strides[:-2], k_layout.strides[-1], k_layout.strides[-2]),
                    k_layout.offset)  # fmt: skip
        scores = self.matmul(q_layout, k, kt)  # (*B, L, S) in dtype
        full = Layout.contiguous(shape)
        if dtype != cdt:
            scores = scores.cast(full, cdt)
        scores = scores.affine(full, float(scale), 0.0)
        minus_inf = type(self).full((1,), -np.inf, cdt, self.index)
        everywhere = Layout(shape, (0,) * len(shape))
        if is_causal:
            keep = np.tri(length, source, dtype=np.bool_)
            keep_s = type(self).from_numpy(keep, self.index)
            keep_layout = Layout((length, source), (source, 1)).broadcast_to(shape)
            scores = keep_s.where(keep_layout, scores, full, minus_inf, everywhere)
        if mask is not None:
            m_layout = Layout.of(mask_layout).broadcast_to(shape)
            if mask.dtype == "bool":
                scores = mask.where(m_layout, scores, full, minus_inf, everywhere)
            else:
                if mask.dtype != cdt:
                    mask = mask.cast(mask_layout, cdt)
                    m_layout = Layout.contiguous(tuple(mask_layout.shape)).broadcast_to(shape)
                scores = scores.binary("add", full, mask, m_layout)
        probs = scores.softmax(full, len(shape) - 1)
        if is_causal or mask is not None:  # a row of -inf only: zeros instead of NaN
            rows = (*batch, length, 1)
            row_max = scores.reduce("max", full, (len(shape) - 1,), True, cdt)
            empty = row_max.cmp_scalar("eq", Layout.contiguous(rows), -np.inf)
            zero = type(self).full((1,), 0.0, cdt, self.index)
            probs = empty.where(Layout.contiguous(rows).broadcast_to(shape), zero, everywhere,
                                probs, full)  # fmt: skip
        p = probs if cdt == dtype else probs.cast(full, dtype)
        return p.matmul(full, v, v_layout), probs
