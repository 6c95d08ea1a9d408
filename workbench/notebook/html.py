"""HTML reprs for tensors, modules and quantized tensors, in the spirit of lovely-tensors.

Stats on big tensors are computed on an evenly spaced sample of at most ``SAMPLE`` elements, so
the repr of a 100M-element tensor stays fast. Every string that comes from the user (module and
parameter names, reprs) goes through ``html.escape``.
"""

from __future__ import annotations

import html

import numpy as np

from ..printing import human_bytes, special_counts

SAMPLE = 1 << 16  # elements the stats and histogram look at, at most
PREVIEW = 64  # tensors with at most this many elements show their values
_BLOCKS = "▁▂▃▄▅▆▇█"
_STYLE = (
    "font-family: var(--jp-code-font-family, monospace); font-size: 12px; "
    "border-left: 3px solid #7aa6da; padding: 2px 8px;"
)


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def host_sample(t) -> tuple[np.ndarray, bool]:
    """Up to ``SAMPLE`` evenly spaced values of ``t`` as a flat numpy array on the host, and
    whether it was sampled. Big tensors are sampled before anything is copied: on the CPU by
    indexing the numpy view, elsewhere with a strided slice on the device, so only the sample
    crosses to the host."""
    t = t.detach()
    sampled = t.numel > SAMPLE
    if t.device.is_cpu:
        values = t.numpy()
        if sampled:
            values = values.flat[np.linspace(0, values.size - 1, SAMPLE).astype(np.int64)]
    else:
        flat = t.reshape(-1)
        if sampled:
            flat = flat[:: -(-flat.numel // SAMPLE)]
        values = flat.to("cpu").numpy()
    if values.dtype.name == "bfloat16":
        values = values.astype(np.float32)
    return values.reshape(-1), sampled


def stats(flat: np.ndarray) -> dict:
    """min, max, mean, std over finite values; NaN/Inf counts (``flat`` is 1-D)."""
    out: dict = {"nan": 0, "inf": 0}
    if flat.size == 0:
        return out
    if flat.dtype.kind == "b":
        out["true"] = int(flat.sum())
        return out
    f = flat.astype(np.float64)
    if flat.dtype.kind in "fc":
        out["nan"] = int(np.isnan(f).sum())
        out["inf"] = int(np.isinf(f).sum())
        f = f[np.isfinite(f)]
    if f.size:
        out.update(min=f.min(), max=f.max(), mean=f.mean(), std=f.std())
    return out


def sparkline(flat: np.ndarray, bins: int = 16) -> str:
    """A histogram of the finite values as unicode blocks, e.g. ``▁▂▅█▅▂▁``."""
    if flat.dtype.kind == "b" or flat.size == 0:
        return ""
    f = flat.astype(np.float64)
    f = f[np.isfinite(f)]
    if f.size == 0 or f.min() == f.max():
        return ""
    counts, _ = np.histogram(f, bins=bins)
    top = counts.max()
    return "".join(
        _BLOCKS[0] if c == 0 else _BLOCKS[min(7, int(c * 8 / (top + 1)))] for c in counts
    )


def _g(x: float) -> str:
    return f"{x:.4g}"


def tensor_html(t) -> str:
    """``Tensor[3, 4] f32 cpu  n=12 (48 B) x∈[..] μ=.. σ=.. ▁▃█▃▁`` plus values when small."""
    flat, sampled = host_sample(t)
    s = stats(flat)
    shape = ", ".join(map(str, t.shape))
    head = f"<b>Tensor[{_esc(shape)}]</b> {_esc(t.dtype.name)} {_esc(t.device)}"
    if t.grad_fn is not None:
        head += f" <i>grad_fn={_esc(t.grad_fn)}</i>"
    elif t.requires_grad:
        head += " <i>requires_grad</i>"
    parts = [f"n={t.numel}", f"({_esc(human_bytes(t.nbytes))})"]
    if "min" in s:
        parts.append(f"x∈[{_g(s['min'])}, {_g(s['max'])}]")
        parts.append(f"μ={_g(s['mean'])} σ={_g(s['std'])}")
    if "true" in s:
        parts.append(f"true={s['true']}")
    bad = special_counts(s["nan"], s["inf"])
    if bad:  # shouted, as in lovely-tensors: "1 NaN, 2 Infs"
        parts.append(f"<b style='color:#d62728'>{bad}</b>")
    line = sparkline(flat)
    if line:
        parts.append(f"<span title='histogram'>{line}</span>")
    if sampled:
        parts.append(f"<i>(stats on {flat.size} sampled values)</i>")
    body = ""
    if 0 < t.numel <= PREVIEW:
        text = np.array2string(
            flat.reshape(t.shape), precision=4, separator=", ", suppress_small=True
        )
        body = f"<pre style='margin:2px 0'>{_esc(text)}</pre>"
    return f"<div class='wb-tensor' style='{_STYLE}'>{head} {' '.join(parts)}{body}</div>"


def _param_rows(module) -> tuple[list[tuple[str, int, int, str]], int, int]:
    """(name, depth, own parameter count, own description) per submodule, totals."""
    rows: list[tuple[str, int, int, str]] = []
    total_n = total_bytes = 0

    def walk(name: str, mod, depth: int) -> None:
        nonlocal total_n, total_bytes
        own = list(mod.named_parameters(recurse=False))
        count = sum(p.numel for _, p in own)
        total_n += count
        total_bytes += sum(p.nbytes for _, p in own)
        desc = ", ".join(f"{n}: [{', '.join(map(str, p.shape))}] {p.dtype.name}" for n, p in own)
        rows.append((f"{name} ({type(mod).__name__})" if name else type(mod).__name__,
                     depth, count, desc))  # fmt: skip
        for child_name, child in mod.named_children():
            walk(child_name, child, depth + 1)

    walk("", module, 0)
    return rows, total_n, total_bytes


def module_html(module) -> str:
    """A tree of submodules with parameter counts, shapes, dtypes and the total size."""
    rows, total_n, total_bytes = _param_rows(module)
    lines = []
    for name, depth, count, desc in rows:
        pad = "&nbsp;" * (4 * depth)
        n = f"{count:,}" if count else ""
        lines.append(
            f"<tr><td style='text-align:left'>{pad}{_esc(name)}</td>"
            f"<td style='text-align:right'>{n}</td>"
            f"<td style='text-align:left'>{_esc(desc)}</td></tr>"
        )
    return (
        f"<div class='wb-module' style='{_STYLE}'><b>{_esc(type(module).__name__)}</b> "
        f"{total_n:,} parameters ({_esc(human_bytes(total_bytes))})"
        "<table><tr><th style='text-align:left'>module</th><th>params</th>"
        "<th style='text-align:left'>own parameters</th></tr>" + "".join(lines) + "</table></div>"
    )


def qtensor_html(q) -> str:
    """``QTensor[4096, 4096] q4_0  n=… (9.0 MiB, 4.50 bits/weight)``."""
    shape = ", ".join(map(str, q.shape))
    dtype = getattr(q.ggml_dtype, "name", q.ggml_dtype)
    bpw = getattr(q, "bits_per_weight", None)
    extra = f", {bpw:.2f} bits/weight" if isinstance(bpw, int | float) else ""
    return (
        f"<div class='wb-qtensor' style='{_STYLE}'><b>QTensor[{_esc(shape)}]</b> "
        f"{_esc(str(dtype).lower())} n={q.numel} ({_esc(human_bytes(q.nbytes))}{_esc(extra)})</div>"
    )
