"""The plain-text repr: header, a preview of the values, and a stats line for big tensors.

Tensor[2, 3] f32 cpu
[[ 0.1, -1.2,  0.3],
 [ 2.0,  0.0, -0.5]]

Tensor[1000, 1000] f32 cpu  n=1000000 (3.8 MiB) x∈[-4.731, 4.883] μ=0.001 σ=1.000
[[...]]
"""

from __future__ import annotations

import numpy as np

_PREVIEW_LIMIT = 100  # elements shown in full; more are summarised with edges
_STATS_SAMPLE = 1 << 20  # stats on at most this many evenly spaced elements


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def special_counts(nan: int, inf: int) -> str:
    """``"1 NaN, 2 Infs"``: the non-zero counts of NaN and infinite values ("" when none)."""
    counts = ((nan, "NaN"), (inf, "Inf"))
    return ", ".join(f"{n} {label}{'' if n == 1 else 's'}" for n, label in counts if n)


def stats_line(values: np.ndarray, nbytes: int) -> str:
    """``n=… (size) x∈[min, max] μ=… σ=…`` then the NaN/Inf counts (``1 NaN, 2 Infs``);
    sampled when huge."""
    flat = values.reshape(-1)
    sampled = flat.size > _STATS_SAMPLE
    if sampled:
        flat = flat[:: flat.size // _STATS_SAMPLE]
    parts = [f"n={values.size}", f"({human_bytes(nbytes)})"]
    if flat.dtype.kind in "fc" or flat.dtype.name == "bfloat16":
        f = flat.astype(np.float64)
        nan = int(np.isnan(f).sum())
        inf = int(np.isinf(f).sum())
        finite = f[np.isfinite(f)]
        if finite.size:
            parts.append(f"x∈[{finite.min():.4g}, {finite.max():.4g}]")
            parts.append(f"μ={finite.mean():.4g} σ={finite.std():.4g}")
        if nan or inf:
            parts.append(special_counts(nan, inf))
    elif flat.dtype.kind != "b" and flat.size:
        parts.append(f"x∈[{flat.min()}, {flat.max()}]")
    elif flat.size:
        parts.append(f"true={int(flat.sum())}")
    if sampled:
        parts.append("(stats sampled)")
    return " ".join(parts)


def tensor_repr(t) -> str:
    header = f"Tensor[{', '.join(map(str, t.shape))}] {t.dtype.name} {t.device}"
    if t.grad_fn is not None:
        header += f" grad_fn={t.grad_fn}"
    elif t.requires_grad:
        header += " requires_grad"
    values = t.detach().to("cpu").numpy()
    if values.dtype.name == "bfloat16":
        values = values.astype(np.float32)
    if t.numel > _PREVIEW_LIMIT:
        header += "  " + stats_line(values, t.nbytes)
    body = np.array2string(
        values, threshold=_PREVIEW_LIMIT, edgeitems=3, precision=4, separator=", ",
        suppress_small=True,
    )  # fmt: skip
    return f"{header}\n{body}"
