"""ggml's scale searches, vectorised over groups (rows of ``x``).

Each function runs one small loop over candidate scales (or over the 16 positions of a
group), never over groups: ``x`` is ``(n_groups, group_size)`` float32.

- :func:`make_qx_quants` -- symmetric levels ``l in [-nmax, nmax)``: try iscale =
  -(nmax + 0.1*k)/max for k = -9..9, keep the least-squares scale sum(w x l)/sum(w l^2) with
  the largest sum(w x l)^2/sum(w l^2) (i.e. the smallest weighted squared error).
- :func:`make_q3_quants` -- symmetric, then up to 5 passes of coordinate descent that move
  one level at a time when it raises sum(w x l)^2/sum(w l^2), with w = x^2.
- :func:`make_qkx2_quants` -- affine ``x ~ scale*l + min`` (min <= 0, l in [0, nmax]): try
  iscale = (nmax + rmin + rdelta*k)/(max - min) for k = 0..nstep, with levels
  l = round(iscale*(x - min)) measured from the best min so far, solve the 2x2 weighted
  least-squares for (scale, min) on each candidate's levels, keep the lowest weighted
  absolute (``use_mad``) or squared error.

The symmetric searches are scale-invariant, so they run on ``x / max|x|`` and scale the result
back: their sums grow like ``|x|**8`` and would overflow float32 for ``|x|`` above ~1e4
(ggml has that limit; weights never get near it, but arbitrary tensors may).
"""

from __future__ import annotations

import numpy as np

from ._common import F32, GROUP_MAX_EPS, nearest_int, signed_absmax


def _rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(a * b).sum(axis=1)`` without the temporary."""
    return np.einsum("ij,ij->i", a, b)


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (a / b).astype(F32)


def make_qx_quants(
    x: np.ndarray, nmax: int, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric scale search (ggml's ``make_qx_quants`` with rmse_type 1).

    Returns ``(scale (n,), levels (n, m) uint8 in [0, 2*nmax))`` with ``x ~ scale*(L - nmax)``.
    ``weights`` default to ``x**2``.
    """
    mx = signed_absmax(x)
    zero = np.abs(mx[:, 0]) < GROUP_MAX_EPS
    amax = np.where(zero[:, None], F32(1), np.abs(mx))
    x = x / amax
    mx = np.where(zero[:, None], F32(1), mx / amax)
    w = x * x if weights is None else weights

    def levels_for(iscale: np.ndarray) -> np.ndarray:
        return np.clip(nearest_int(iscale * x), -nmax, nmax - 1)

    def trial(iscale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lv = levels_for(iscale)
        wl = w * lv
        return _rowdot(wl, x), _rowdot(wl, lv)

    # Only the winning iscale is kept per group; its levels are recomputed once at the end.
    best_is = F32(-nmax) / mx
    sumlx, suml2 = trial(best_is)
    scale = np.where(suml2 != 0, _div(sumlx, suml2), F32(0))
    best = scale * sumlx
    for k in range(-9, 10):
        if k == 0:
            continue
        iscale = -(F32(nmax) + F32(0.1) * F32(k)) / mx
        slx, sl2 = trial(iscale)
        better = (sl2 > 0) & (slx * slx > best * sl2)
        best_is = np.where(better[:, None], iscale, best_is)
        scale = np.where(better, _div(slx, sl2), scale)
        best = np.where(better, scale * slx, best)
    levels = levels_for(best_is)
    scale = scale * amax[:, 0]
    scale[zero] = 0
    out = (levels + nmax).astype(np.uint8)
    out[zero] = 0
    return scale.astype(F32), out


def make_q3_quants(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric search plus coordinate descent (ggml's ``make_q3_quants``, do_rmse).

    Returns ``(scale (n,), levels (n, m) uint8 in [0, 2*nmax))``.
    """
    mx = signed_absmax(x)
    zero = np.abs(mx[:, 0]) < GROUP_MAX_EPS
    amax = np.where(zero[:, None], F32(1), np.abs(mx))
    x = x / amax
    mx = np.where(zero[:, None], F32(1), mx / amax)
    w = x * x
    levels = np.clip(nearest_int((F32(-nmax) / mx) * x), -nmax, nmax - 1).astype(F32)
    sumlx = (w * x * levels).sum(axis=1)
    suml2 = (w * levels * levels).sum(axis=1)
    # Coordinate descent walks the positions in order; work on transposed copies so that
    # each position is a contiguous row.
    xt, wt, lt = x.T.copy(), w.T.copy(), levels.T.copy()
    wxt = wt * xt
    for _ in range(5):
        changed = np.zeros(x.shape[0], bool)
        for i in range(x.shape[1]):
            li, wi, wxi = lt[i], wt[i], wxt[i]
            slx = sumlx - wxi * li
            sl2 = suml2 - wi * li * li
            new = np.clip(nearest_int(_div(xt[i] * sl2, slx)), -nmax, nmax - 1)
            slx_new = slx + wxi * new
            sl2_new = sl2 + wi * new * new
            take = (slx > 0) & (new != li) & (sl2_new > 0)
            take &= slx_new * slx_new * suml2 > sumlx * sumlx * sl2_new
            lt[i] = np.where(take, new, li)
            sumlx = np.where(take, slx_new, sumlx)
            suml2 = np.where(take, sl2_new, suml2)
            changed |= take
        if not changed.any():
            break
    levels = lt.T
    scale = np.where(suml2 > 0, _div(sumlx, suml2), F32(0)) * amax[:, 0]
    scale[zero] = 0
    out = (levels + nmax).astype(np.uint8)
    out[zero] = 0
    return scale.astype(F32), out


def make_qkx2_quants(
    x: np.ndarray,
    weights: np.ndarray,
    nmax: int,
    rmin: float,
    rdelta: float,
    nstep: int,
    use_mad: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Affine scale+min search (ggml's ``make_qkx2_quants``).

    Returns ``(scale (n,), neg_min (n,) >= 0, levels (n, m) uint8 in [0, nmax])`` with
    ``x ~ scale*L - neg_min``.
    """
    w = weights
    lo = np.minimum(x.min(axis=1), F32(0))
    hi = x.max(axis=1)[:, None]
    flat = hi[:, 0] == lo
    sum_w = w.sum(axis=1)
    sum_x = _rowdot(w, x)
    sum_x2 = _rowdot(w * x, x).astype(np.float64)

    def error(scale, mn, lv, sum_l, sum_l2, sum_xl) -> np.ndarray:
        """sum(w * |scale*l + mn - x|) or sum(w * (scale*l + mn - x)**2).

        The squared error is expanded into the sums already at hand (in float64):
        s^2 S(wl^2) + m^2 S(w) + S(wx^2) + 2sm S(wl) - 2s S(wlx) - 2m S(wx).
        """
        with np.errstate(invalid="ignore"):  # NaN scales of rejected candidates
            if use_mad:
                return _rowdot(w, np.abs(scale[:, None] * lv + mn[:, None] - x))
            s, m = scale.astype(np.float64), mn.astype(np.float64)
            return (
                s * s * sum_l2 + m * m * sum_w + sum_x2
                + 2 * s * m * sum_l - 2 * s * sum_xl - 2 * m * sum_x
            )  # fmt: skip

    def levels_for(iscale: np.ndarray, base: np.ndarray):
        lv = nearest_int(iscale * (x - base))
        np.clip(lv, 0, nmax, out=lv)
        wl = w * lv
        return lv, wl.sum(axis=1), _rowdot(wl, lv), _rowdot(wl, x)

    # As in ggml, each candidate measures levels from the best min found so far (and spans
    # max - that min). Only the winning (iscale, base) pair is kept per group; its levels are
    # recomputed once at the end.
    mn = lo
    base = mn[:, None]
    span = np.where(flat[:, None], F32(1), hi - base)
    best_is, best_base = F32(nmax) / span, base
    levels, *sums = levels_for(best_is, best_base)
    scale = (F32(1) / best_is)[:, 0]
    best = error(scale, mn, levels, *sums)
    for k in range(nstep + 1):
        base = mn[:, None]
        span = np.where(flat[:, None], F32(1), hi - base)
        iscale = (F32(rmin) + F32(rdelta) * F32(k) + F32(nmax)) / span
        lv, sum_l, sum_l2, sum_xl = levels_for(iscale, base)
        det = sum_w * sum_l2 - sum_l * sum_l
        this_scale = _div(sum_w * sum_xl - sum_x * sum_l, det)
        this_min = _div(sum_l2 * sum_x - sum_l * sum_xl, det)
        clamp = this_min > 0
        this_min = np.where(clamp, F32(0), this_min)
        this_scale = np.where(clamp, _div(sum_xl, sum_l2), this_scale)
        cur = error(this_scale, this_min, lv, sum_l, sum_l2, sum_xl)
        better = (det > 0) & (cur < best)
        best_is = np.where(better[:, None], iscale, best_is)
        best_base = np.where(better[:, None], base, best_base)
        scale = np.where(better, this_scale, scale)
        mn = np.where(better, this_min, mn)
        best = np.where(better, cur, best)
    levels = levels_for(best_is, best_base)[0]
    scale = np.where(flat, F32(0), scale)
    mn = np.where(flat, lo, mn)
    out = levels.astype(np.uint8)
    out[flat] = 0
    return scale.astype(F32), (-mn).astype(F32), out
