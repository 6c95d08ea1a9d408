"""Which PyTorch spellings run unchanged on workbench: the source of docs/pytorch_compat.md.

Each row is a snippet written once against a library namespace ``m`` (``torch`` or
``workbench``), its functional module ``F`` (``torch.nn.functional`` / ``workbench.nn.functional``)
and inputs made by ``m.tensor``. The snippet runs on both libraries and the results (values,
shapes, dtypes; tuples element by element) are compared:

- supported: it runs and agrees;
- differs: it runs but the result differs (the reason says how), or it fails on a keyword,
  an argument form or a dtype while the name exists;
- missing: the name does not exist in workbench.

    python tests/compat/compat_probe.py                 # print the table
    python tests/compat/compat_probe.py --write docs/pytorch_compat.md

Gradients of the supported rows are compared by the conformance tests next to this file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as torch_f

import workbench as wb
import workbench.nn.functional as wb_f

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((3, 4)).astype(np.float32)
P = (np.abs(A) + 0.5).astype(np.float32)  # positive
U = rng.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)  # inside (-1, 1)
M = rng.standard_normal((4, 5)).astype(np.float32)
BM = rng.standard_normal((2, 3, 4)).astype(np.float32)
IMG = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
SEQ = rng.standard_normal((1, 2, 8)).astype(np.float32)
W2 = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
W1 = rng.standard_normal((3, 2, 3)).astype(np.float32)
IA = np.array([[3, -2, 5], [-7, 4, 1]], dtype=np.int64)
IB = np.array([[2, 3, -2], [2, -3, 4]], dtype=np.int64)
IDX = np.array([2, 0, 1], dtype=np.int64)
LOGITS = rng.standard_normal((4, 5)).astype(np.float32)
TARGET = np.array([1, 0, 4, 2], dtype=np.int64)
PROB = rng.uniform(0.1, 0.9, (3, 4)).astype(np.float32)


@dataclass(frozen=True)
class Row:
    area: str
    name: str  # as a torch user writes it
    snippet: Callable  # snippet(m, F, t) -> result; t(array) makes a tensor of library m


def _rows() -> list[Row]:
    rows: list[Row] = []

    def add(area: str, name: str, snippet: Callable) -> None:
        rows.append(Row(area, name, snippet))

    # -- elementwise, one input -------------------------------------------------------------
    for name, data in [
        ("abs", A), ("neg", A), ("exp", A), ("expm1", A), ("log", P), ("log1p", P),
        ("log2", P), ("log10", P), ("exp2", A), ("sqrt", P), ("rsqrt", P), ("square", A),
        ("reciprocal", P), ("sin", A), ("cos", A), ("tan", U), ("asin", U), ("acos", U),
        ("atan", A), ("sinh", A), ("cosh", A), ("tanh", A), ("asinh", A), ("atanh", U),
        ("sigmoid", A), ("erf", A), ("erfc", A), ("floor", A), ("ceil", A), ("round", A),
        ("trunc", A), ("frac", A), ("sign", A), ("sgn", A), ("relu", A), ("isnan", A),
        ("isinf", A), ("isfinite", A), ("logical_not", A), ("signbit", A), ("positive", A),
    ]:  # fmt: skip
        add("elementwise", f"torch.{name}(x)", lambda m, F, t, n=name, d=data: getattr(m, n)(t(d)))
        add("elementwise", f"Tensor.{name}()", lambda m, F, t, n=name, d=data: getattr(t(d), n)())
    # -- elementwise, two inputs ------------------------------------------------------------
    for name in ["add", "sub", "mul", "div", "maximum", "minimum", "atan2", "pow", "eq", "ne",
                 "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "fmax",
                 "fmin", "hypot", "copysign", "remainder", "fmod", "floor_divide",
                 "true_divide", "subtract", "multiply", "divide", "greater", "less"]:  # fmt: skip
        data = P if name == "pow" else A
        add("elementwise", f"torch.{name}(x, y)",
            lambda m, F, t, n=name, d=data: getattr(m, n)(t(d), t(B)))  # fmt: skip
    add("elementwise", "torch.add(x, y, alpha=2)", lambda m, F, t: m.add(t(A), t(B), alpha=2))
    add("elementwise", "torch.clamp(x, -0.5, 0.5)", lambda m, F, t: m.clamp(t(A), -0.5, 0.5))
    add("elementwise", "torch.clamp(x, min=0)", lambda m, F, t: m.clamp(t(A), min=0.0))
    add("elementwise", "torch.clip(x, -0.5, 0.5)", lambda m, F, t: m.clip(t(A), -0.5, 0.5))
    add("elementwise", "torch.where(c, x, y)", lambda m, F, t: m.where(t(A) > 0, t(A), t(B)))
    add("elementwise", "torch.where(c, x, 0.0)", lambda m, F, t: m.where(t(A) > 0, t(A), 0.0))
    add("elementwise", "x.masked_fill(mask, v)", lambda m, F, t: t(A).masked_fill(t(A) > 0, 1.5))
    add("elementwise", "torch.lerp(x, y, 0.3)", lambda m, F, t: m.lerp(t(A), t(B), 0.3))
    add("elementwise", "torch.addcmul(x, y, z)", lambda m, F, t: m.addcmul(t(A), t(B), t(A)))
    add("elementwise", "torch.isclose(x, y)", lambda m, F, t: m.isclose(t(A), t(A) + 1e-9))
    add("elementwise", "torch.allclose(x, y)", lambda m, F, t: m.allclose(t(A), t(A) + 1e-9))
    add("elementwise", "torch.nan_to_num(x)", lambda m, F, t: m.nan_to_num(t(A) / 0))
    add("elementwise", "torch.div(a, b, rounding_mode='floor')",
        lambda m, F, t: m.div(t(IA), t(IB), rounding_mode="floor"))  # fmt: skip
    add("elementwise", "torch.div(x, y, rounding_mode='trunc')",
        lambda m, F, t: m.div(t(A), t(B), rounding_mode="trunc"))  # fmt: skip
    add("elementwise", "int // int", lambda m, F, t: t(IA) // t(IB))
    add("elementwise", "int % int", lambda m, F, t: t(IA) % t(IB))
    add("elementwise", "float % float", lambda m, F, t: t(A) % t(B))
    add("elementwise", "x ** 2", lambda m, F, t: t(A) ** 2)
    add("elementwise", "2 ** x", lambda m, F, t: 2 ** t(A))
    add("elementwise", "int & int (bitwise)", lambda m, F, t: t(IA) & t(IB))
    add("elementwise", "int | int (bitwise)", lambda m, F, t: t(IA) | t(IB))
    add("elementwise", "int ^ int (bitwise)", lambda m, F, t: t(IA) ^ t(IB))
    add("elementwise", "~int (bitwise)", lambda m, F, t: ~t(IA))
    add("elementwise", "bool & bool", lambda m, F, t: (t(A) > 0) & (t(B) > 0))
    add("elementwise", "True & bool (reflected)", lambda m, F, t: True & (t(A) > 0))
    add("elementwise", "3 & int (reflected)", lambda m, F, t: 3 & t(IA))
    add("elementwise", "int << 1", lambda m, F, t: t(IA) << 1)
    add("elementwise", "int >> 1", lambda m, F, t: t(IA) >> 1)
    add("elementwise", "torch.bitwise_and(a, b)", lambda m, F, t: m.bitwise_and(t(IA), t(IB)))
    # -- conversions ------------------------------------------------------------------------
    for name in ["float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte"]:
        add("conversion", f"Tensor.{name}()", lambda m, F, t, n=name: getattr(t(A * 3), n)())
    add("conversion", "x.to(torch.float64)", lambda m, F, t: t(A).to(m.float64))
    add("conversion", "x.to(dtype=torch.int32)", lambda m, F, t: t(A * 3).to(dtype=m.int32))
    add("conversion", "x.type(torch.int64)", lambda m, F, t: t(A * 3).type(m.int64))
    add("conversion", "x.view(torch.int32)", lambda m, F, t: t(A).view(m.int32))
    add("conversion", "torch.int8", lambda m, F, t: t(IA).to(m.int8))
    add("conversion", "np.asarray(x.sum())", lambda m, F, t: np.asarray(t(A).sum()))
    add("conversion", "x.clone()", lambda m, F, t: t(A).clone())
    add("conversion", "x.detach()", lambda m, F, t: t(A).detach())
    add("conversion", "x.numpy()", lambda m, F, t: t(A).numpy())
    add("conversion", "x.tolist()", lambda m, F, t: np.array(t(A).tolist()))
    add("conversion", "x.item()", lambda m, F, t: np.array(t(A)[1, 2].item()))
    # -- reductions -------------------------------------------------------------------------
    for name in ["sum", "mean", "prod", "std", "var", "amax", "amin", "logsumexp", "norm",
                 "argmax", "argmin", "all", "any", "nansum", "nanmean", "median",
                 "count_nonzero"]:  # fmt: skip
        data = A > 0 if name in ("all", "any") else A
        if name != "logsumexp":
            add("reduce", f"torch.{name}(x)", lambda m, F, t, n=name, d=data: getattr(m, n)(t(d)))
        add("reduce", f"x.{name}(dim=1)", lambda m, F, t, n=name, d=data: getattr(t(d), n)(dim=1))
    for name in ["sum", "mean", "std", "var", "all", "any", "amax"]:
        data = A > 0 if name in ("all", "any") else A
        add("reduce", f"x.{name}(axis=1)",
            lambda m, F, t, n=name, d=data: getattr(t(d), n)(axis=1))  # fmt: skip
    add("reduce", "x.sum((0, 1), keepdim=True)", lambda m, F, t: t(A).sum((0, 1), keepdim=True))
    add("reduce", "x.sum(dtype=torch.float64)", lambda m, F, t: t(A).sum(dtype=m.float64))
    add("reduce", "x.std(dim=1, correction=0)", lambda m, F, t: t(A).std(dim=1, correction=0))
    add("reduce", "x.var(1, unbiased=False)", lambda m, F, t: t(A).var(1, unbiased=False))
    add("reduce", "int.sum() (int64 result)", lambda m, F, t: t(IA.astype(np.int32)).sum())
    add("reduce", "x.max()", lambda m, F, t: t(A).max())
    add("reduce", "x.max(dim=1) (values, indices)", lambda m, F, t: tuple(t(A).max(dim=1)))
    add("reduce", "x.max(1).values", lambda m, F, t: t(A).max(1).values)
    add("reduce", "x.min(1).indices", lambda m, F, t: t(A).min(1).indices)
    add("reduce", "torch.max(x, y)", lambda m, F, t: m.max(t(A), t(B)))
    add("reduce", "x.sort(dim=1)", lambda m, F, t: tuple(t(A).sort(dim=1)))
    add("reduce", "x.sort(descending=True).values",
        lambda m, F, t: t(A).sort(descending=True).values)  # fmt: skip
    add("reduce", "x.argsort(dim=1)", lambda m, F, t: t(A).argsort(dim=1))
    add("reduce", "x.topk(2)", lambda m, F, t: tuple(t(A).topk(2)))
    add("reduce", "x.topk(2, 0, False)", lambda m, F, t: tuple(t(A).topk(2, 0, False)))
    add("reduce", "x.topk(2).indices", lambda m, F, t: t(A).topk(2).indices)
    add("reduce", "x.cumsum(1)", lambda m, F, t: t(A).cumsum(1))
    add("reduce", "x.cumprod(1)", lambda m, F, t: t(A).cumprod(1))
    add("reduce", "x.cummax(1)", lambda m, F, t: tuple(t(A).cummax(1)))
    add("reduce", "x.cummin(1)", lambda m, F, t: tuple(t(A).cummin(1)))
    add("reduce", "x.mode(1)", lambda m, F, t: tuple(t(np.round(A)).mode(1)))
    add("reduce", "x.norm(p=1, dim=1)", lambda m, F, t: t(A).norm(p=1, dim=1))
    add("reduce", "torch.logsumexp(x, 1)", lambda m, F, t: m.logsumexp(t(A), 1))
    add("reduce", "torch.logsumexp(0-d, 0)", lambda m, F, t: m.logsumexp(t(A)[0, 0], 0))
    # -- shape ------------------------------------------------------------------------------
    add("shape", "x.reshape(4, 3)", lambda m, F, t: t(A).reshape(4, 3))
    add("shape", "x.reshape(-1)", lambda m, F, t: t(A).reshape(-1))
    add("shape", "x.view(2, 6)", lambda m, F, t: t(A).view(2, 6))
    add("shape", "x.view(-1, 2)", lambda m, F, t: t(A).view(-1, 2))
    add("shape", "x.permute(1, 0)", lambda m, F, t: t(A).permute(1, 0))
    add("shape", "x.transpose(0, 1)", lambda m, F, t: t(A).transpose(0, 1))
    add("shape", "x.t()", lambda m, F, t: t(A).t())
    add("shape", "x.T", lambda m, F, t: t(A).T)
    add("shape", "x.mT", lambda m, F, t: t(BM).mT)
    add("shape", "x.unsqueeze(0)", lambda m, F, t: t(A).unsqueeze(0))
    add("shape", "x.squeeze()", lambda m, F, t: t(A[None]).squeeze())
    add("shape", "x.squeeze(0)", lambda m, F, t: t(A[None]).squeeze(0))
    add("shape", "x.flatten()", lambda m, F, t: t(BM).flatten())
    add("shape", "x.flatten(1)", lambda m, F, t: t(BM).flatten(1))
    add("shape", "x.unflatten(1, (2, 2))", lambda m, F, t: t(A).unflatten(1, (2, 2)))
    add("shape", "x.expand(2, 3, 4)", lambda m, F, t: t(A).expand(2, 3, 4))
    add("shape", "x.expand_as(y)", lambda m, F, t: t(A[:1]).expand_as(t(A)))
    add("shape", "torch.broadcast_to(x, s)", lambda m, F, t: m.broadcast_to(t(A), (2, 3, 4)))
    add("shape", "x.repeat(2, 1)", lambda m, F, t: t(A).repeat(2, 1))
    add("shape", "x.tile((2,))", lambda m, F, t: t(A).tile((2,)))
    add("shape", "x.repeat_interleave(2, dim=0)",
        lambda m, F, t: t(A).repeat_interleave(2, dim=0))  # fmt: skip
    add("shape", "x.flip(0)", lambda m, F, t: t(A).flip(0))
    add("shape", "x.flip((0, 1))", lambda m, F, t: t(A).flip((0, 1)))
    add("shape", "torch.roll(x, 1, 1)", lambda m, F, t: m.roll(t(A), 1, 1))
    add("shape", "x.narrow(1, 1, 2)", lambda m, F, t: t(A).narrow(1, 1, 2))
    add("shape", "x.movedim(0, 1)", lambda m, F, t: t(A).movedim(0, 1))
    add("shape", "torch.cat([x, y], 0)", lambda m, F, t: m.cat([t(A), t(B)], 0))
    add("shape", "torch.cat([x, y], dim=1)", lambda m, F, t: m.cat([t(A), t(B)], dim=1))
    add("shape", "torch.concat([x, y])", lambda m, F, t: m.concat([t(A), t(B)]))
    add("shape", "torch.stack([x, y], 1)", lambda m, F, t: m.stack([t(A), t(B)], 1))
    add("shape", "x.split(2, 1)", lambda m, F, t: tuple(t(A).split(2, 1)))
    add("shape", "x.split([1, 3], 1)", lambda m, F, t: tuple(t(A).split([1, 3], 1)))
    add("shape", "x.chunk(2, 1)", lambda m, F, t: tuple(t(A).chunk(2, 1)))
    add("shape", "x.unbind(0)", lambda m, F, t: tuple(t(A).unbind(0)))
    add("shape", "x.contiguous()", lambda m, F, t: t(A).t().contiguous())
    add("shape", "torch.tril(x)", lambda m, F, t: m.tril(t(A)))
    add("shape", "torch.triu(x, 1)", lambda m, F, t: m.triu(t(A), 1))
    add("shape", "torch.diagonal(x)", lambda m, F, t: m.diagonal(t(A)))
    add("shape", "torch.diag(v)", lambda m, F, t: m.diag(t(A[0])))
    # -- indexing ---------------------------------------------------------------------------
    add("indexing", "x[1]", lambda m, F, t: t(A)[1])
    add("indexing", "x[:, 1:3]", lambda m, F, t: t(A)[:, 1:3])
    add("indexing", "x[::2, ::-1]", lambda m, F, t: t(A)[::2, 1:])
    add("indexing", "x[..., None]", lambda m, F, t: t(A)[..., None])
    add("indexing", "x[mask]", lambda m, F, t: t(A)[t(A) > 0])
    add("indexing", "x[idx]", lambda m, F, t: t(A)[t(IDX)])
    add("indexing", "x[[0, 2]]", lambda m, F, t: t(A)[[0, 2]])
    add("indexing", "x[idx, 1:]", lambda m, F, t: t(A)[t(IDX), 1:])
    add("indexing", "x[:, idx]", lambda m, F, t: t(A)[:, t(IDX)])
    add("indexing", "x[idx, idx]", lambda m, F, t: t(A)[t(IDX), t(IDX)])
    add("indexing", "x[(idx, idx)]", lambda m, F, t: t(A)[(t(IDX), t(IDX))])
    add("indexing", "torch.gather(x, 1, i)",
        lambda m, F, t: m.gather(t(A), 1, t(np.array([[0, 1], [2, 3], [1, 1]]))))  # fmt: skip
    add("indexing", "x.index_select(0, i)", lambda m, F, t: t(A).index_select(0, t(IDX)))
    add("indexing", "x.masked_select(mask)", lambda m, F, t: t(A).masked_select(t(A) > 0))
    add("indexing", "torch.nonzero(x)", lambda m, F, t: m.nonzero(t(A) > 0))
    add("indexing", "torch.nonzero(x, as_tuple=True)",
        lambda m, F, t: tuple(m.nonzero(t(A) > 0, as_tuple=True)))  # fmt: skip
    add("indexing", "x.scatter(0, i, src)",
        lambda m, F, t: t(A).scatter(0, t(np.array([[2, 0, 1, 1]])), t(B[:1])))  # fmt: skip
    add("indexing", "x.scatter(0, i, value=1.0)",
        lambda m, F, t: t(A).scatter(0, t(np.array([[2, 0, 1, 1]])), value=1.0))  # fmt: skip
    add("indexing", "x.scatter_add(0, i, src)",
        lambda m, F, t: t(A).scatter_add(0, t(np.array([[2, 0, 1, 1]])), t(B[:1])))  # fmt: skip
    add(
        "indexing",
        "x.scatter_reduce(0, i, src, 'amax')",
        lambda m, F, t: t(A).scatter_reduce(0, t(np.array([[2, 0, 1, 1]])), t(B[:1]), "amax"),
    )
    add("indexing", "x.index_add(0, i, src)",
        lambda m, F, t: t(A).index_add(0, t(IDX), t(B)))  # fmt: skip
    add("indexing", "F.embedding(i, w)", lambda m, F, t: F.embedding(t(IDX), t(A)))
    add("indexing", "torch.take_along_dim(x, i, 1)",
        lambda m, F, t: m.take_along_dim(t(A), t(np.array([[0], [1], [2]])), 1))  # fmt: skip
    # -- matmul -----------------------------------------------------------------------------
    add("matmul", "x @ w", lambda m, F, t: t(A) @ t(M))
    add("matmul", "torch.matmul(x, w)", lambda m, F, t: m.matmul(t(A), t(M)))
    add("matmul", "torch.mm(x, w)", lambda m, F, t: m.mm(t(A), t(M)))
    add("matmul", "torch.bmm(a, b)", lambda m, F, t: m.bmm(t(BM), t(BM).transpose(1, 2)))
    add("matmul", "torch.mv(w, v)", lambda m, F, t: m.mv(t(M).t(), t(A[0])))
    add("matmul", "torch.dot(v, v)", lambda m, F, t: m.dot(t(A[0]), t(B[0])))
    add("matmul", "torch.outer(u, v)", lambda m, F, t: m.outer(t(A[0]), t(B[0])))
    add("matmul", "torch.einsum('ij,jk->ik')", lambda m, F, t: m.einsum("ij,jk->ik", t(A), t(M)))
    add("matmul", "torch.einsum('bij,bkj->bik')",
        lambda m, F, t: m.einsum("bij,bkj->bik", t(BM), t(BM)))  # fmt: skip
    add("matmul", "torch.einsum('...ij->...ji')", lambda m, F, t: m.einsum("...ij->...ji", t(BM)))
    add("matmul", "torch.einsum('ii->i')", lambda m, F, t: m.einsum("ii->i", t(A[:, :3])))
    add("matmul", "torch.addmm(b, x, w)", lambda m, F, t: m.addmm(t(M[0]), t(A), t(M)))
    add("matmul", "F.linear(x, w, b)", lambda m, F, t: F.linear(t(A), t(M.T), t(M[0])))
    # -- conv, pool, pad, interpolate -------------------------------------------------------
    add("conv", "F.conv2d(x, w, padding=1)", lambda m, F, t: F.conv2d(t(IMG), t(W2), padding=1))
    add("conv", "F.conv2d(x, w, stride=2)", lambda m, F, t: F.conv2d(t(IMG), t(W2), stride=2))
    add("conv", "F.conv2d(x, w, padding='same')",
        lambda m, F, t: F.conv2d(t(IMG), t(W2), padding="same"))  # fmt: skip
    add("conv", "F.conv2d(x, w, dilation=2)", lambda m, F, t: F.conv2d(t(IMG), t(W2), dilation=2))
    add("conv", "F.conv1d(x, w, padding=1)", lambda m, F, t: F.conv1d(t(SEQ), t(W1), padding=1))
    add("conv", "F.conv_transpose2d(x, w)",
        lambda m, F, t: F.conv_transpose2d(t(IMG), t(W2.transpose(1, 0, 2, 3))))  # fmt: skip
    add("conv", "F.conv_transpose1d(x, w)",
        lambda m, F, t: F.conv_transpose1d(t(SEQ), t(W1.transpose(1, 0, 2))))  # fmt: skip
    add("conv", "F.conv3d(x, w)",
        lambda m, F, t: F.conv3d(t(IMG[:, :, None]), t(W2[:, :, None])))  # fmt: skip
    add("pool", "F.max_pool2d(x, 2)", lambda m, F, t: F.max_pool2d(t(IMG), 2))
    add("pool", "F.max_pool2d(x, 3, 2, 1)", lambda m, F, t: F.max_pool2d(t(IMG), 3, 2, 1))
    add("pool", "F.avg_pool2d(x, 2)", lambda m, F, t: F.avg_pool2d(t(IMG), 2))
    add("pool", "F.max_pool1d(x, 2)", lambda m, F, t: F.max_pool1d(t(SEQ), 2))
    add("pool", "F.avg_pool1d(x, 2)", lambda m, F, t: F.avg_pool1d(t(SEQ), 2))
    add("pool", "F.adaptive_avg_pool2d(x, 1)", lambda m, F, t: F.adaptive_avg_pool2d(t(IMG), 1))
    add("pool", "F.adaptive_avg_pool1d(x, 3)", lambda m, F, t: F.adaptive_avg_pool1d(t(SEQ), 3))
    add("pool", "F.adaptive_max_pool2d(x, 1)", lambda m, F, t: F.adaptive_max_pool2d(t(IMG), 1))
    add("pool", "F.max_pool3d(x, 2)", lambda m, F, t: F.max_pool3d(t(IMG[:, :, None]), 1))
    add("pool", "F.max_pool2d(int, 2)",
        lambda m, F, t: F.max_pool2d(t((IMG * 4).astype(np.int32)), 2))  # fmt: skip
    for mode in ["constant", "reflect", "replicate", "circular"]:
        add("pad", f"F.pad(x, (1, 2, 2, 1), '{mode}')",
            lambda m, F, t, md=mode: F.pad(t(IMG), (1, 2, 2, 1), md))  # fmt: skip
        add("pad", f"F.pad(x, (-1, 1, 1, -1), '{mode}')",
            lambda m, F, t, md=mode: F.pad(t(IMG), (-1, 1, 1, -1), md))  # fmt: skip
    add("pad", "F.pad(x, (1, 1), value=2.0)", lambda m, F, t: F.pad(t(IMG), (1, 1), value=2.0))
    for mode in ["nearest", "nearest-exact", "bilinear", "bicubic", "area"]:
        add("interpolate", f"F.interpolate(x, scale_factor=2, mode='{mode}')",
            lambda m, F, t, md=mode: F.interpolate(t(IMG), scale_factor=2, mode=md))  # fmt: skip
    add("interpolate", "F.interpolate(x, size=(4, 5), mode='bilinear')",
        lambda m, F, t: F.interpolate(t(IMG), size=(4, 5), mode="bilinear"))  # fmt: skip
    add(
        "interpolate",
        "F.interpolate(x, size=9, mode='bilinear', align_corners=True)",
        lambda m, F, t: F.interpolate(t(IMG), size=9, mode="bilinear", align_corners=True),
    )
    add("interpolate", "F.interpolate(seq, scale_factor=2, mode='linear')",
        lambda m, F, t: F.interpolate(t(SEQ), scale_factor=2, mode="linear"))  # fmt: skip
    add(
        "interpolate",
        "F.interpolate(5-d, scale_factor=2, mode='trilinear')",
        lambda m, F, t: F.interpolate(t(IMG[:, :, None]), scale_factor=2, mode="trilinear"),
    )
    # -- normalization, attention, activations ----------------------------------------------
    add("nn.functional", "F.softmax(x, dim=-1)", lambda m, F, t: F.softmax(t(A), dim=-1))
    add("nn.functional", "F.log_softmax(x, 1)", lambda m, F, t: F.log_softmax(t(A), 1))
    add("nn.functional", "x.softmax(-1)", lambda m, F, t: t(A).softmax(-1))
    add("nn.functional", "torch.softmax(x, 0)", lambda m, F, t: m.softmax(t(A), 0))
    add("nn.functional", "F.layer_norm(x, (4,), w, b)",
        lambda m, F, t: F.layer_norm(t(A), (4,), t(B[0]), t(A[0])))  # fmt: skip
    add("nn.functional", "F.rms_norm(x, (4,), w)",
        lambda m, F, t: F.rms_norm(t(A), (4,), t(B[0])))  # fmt: skip
    add("nn.functional", "F.group_norm(x, 2)", lambda m, F, t: F.group_norm(t(IMG), 2))
    add("nn.functional", "F.batch_norm(x, rm, rv, training=True)",
        lambda m, F, t: F.batch_norm(t(IMG), None, None, training=True))  # fmt: skip
    add(
        "nn.functional",
        "F.scaled_dot_product_attention(q, k, v)",
        lambda m, F, t: F.scaled_dot_product_attention(t(BM[None]), t(BM[None]), t(BM[None])),
    )
    add("nn.functional", "F.scaled_dot_product_attention(.., is_causal=True)",
        lambda m, F, t: F.scaled_dot_product_attention(
            t(BM[None]), t(BM[None]), t(BM[None]), is_causal=True))  # fmt: skip
    add("nn.functional", "F.normalize(x, dim=1)", lambda m, F, t: F.normalize(t(A), dim=1))
    add("nn.functional", "F.normalize(x, p=0)", lambda m, F, t: F.normalize(t(A), p=0))
    add("nn.functional", "F.one_hot(i, 5)", lambda m, F, t: F.one_hot(t(IDX), 5))
    add("nn.functional", "F.dropout(x, training=False)",
        lambda m, F, t: F.dropout(t(A), 0.5, training=False))  # fmt: skip
    for name in ["relu", "relu6", "elu", "selu", "celu", "gelu", "silu", "mish", "sigmoid",
                 "tanh", "hardtanh", "hardsigmoid", "hardswish", "softplus", "logsigmoid",
                 "softsign", "leaky_relu", "glu", "tanhshrink", "softshrink", "hardshrink",
                 "threshold"]:  # fmt: skip
        args = (0.5, 0.0) if name == "threshold" else ()
        add("nn.functional", f"F.{name}(x)",
            lambda m, F, t, n=name, a=args: getattr(F, n)(t(A), *a))  # fmt: skip
    add("nn.functional", "F.gelu(x, approximate='tanh')",
        lambda m, F, t: F.gelu(t(A), approximate="tanh"))  # fmt: skip
    add("nn.functional", "F.silu(0-d)", lambda m, F, t: F.silu(t(A)[0, 0]))
    add("nn.functional", "F.leaky_relu(x, 0.2)", lambda m, F, t: F.leaky_relu(t(A), 0.2))
    # -- losses -----------------------------------------------------------------------------
    add("loss", "F.cross_entropy(logits, target)",
        lambda m, F, t: F.cross_entropy(t(LOGITS), t(TARGET)))  # fmt: skip
    add(
        "loss",
        "F.cross_entropy(.., label_smoothing=0.1)",
        lambda m, F, t: F.cross_entropy(t(LOGITS), t(TARGET), label_smoothing=0.1),
    )
    add("loss", "F.cross_entropy(.., ignore_index=0)",
        lambda m, F, t: F.cross_entropy(t(LOGITS), t(TARGET), ignore_index=0))  # fmt: skip
    add("loss", "F.cross_entropy(.., reduction='none')",
        lambda m, F, t: F.cross_entropy(t(LOGITS), t(TARGET), reduction="none"))  # fmt: skip
    add("loss", "F.nll_loss(logp, target)",
        lambda m, F, t: F.nll_loss(F.log_softmax(t(LOGITS), 1), t(TARGET)))  # fmt: skip
    add("loss", "F.mse_loss(x, y)", lambda m, F, t: F.mse_loss(t(A), t(B)))
    add("loss", "F.l1_loss(x, y, reduction='sum')",
        lambda m, F, t: F.l1_loss(t(A), t(B), reduction="sum"))  # fmt: skip
    add("loss", "F.smooth_l1_loss(x, y)", lambda m, F, t: F.smooth_l1_loss(t(A), t(B)))
    add("loss", "F.huber_loss(x, y, delta=0.5)",
        lambda m, F, t: F.huber_loss(t(A), t(B), delta=0.5))  # fmt: skip
    add(
        "loss",
        "F.binary_cross_entropy(p, y)",
        lambda m, F, t: F.binary_cross_entropy(t(PROB), t((B > 0).astype(np.float32))),
    )
    add(
        "loss",
        "F.binary_cross_entropy_with_logits(x, y)",
        lambda m, F, t: F.binary_cross_entropy_with_logits(t(A), t((B > 0).astype(np.float32))),
    )
    add("loss", "F.kl_div(logq, p, reduction='batchmean')",
        lambda m, F, t: F.kl_div(F.log_softmax(t(A), 1), F.softmax(t(B), 1),
                                 reduction="batchmean"))  # fmt: skip
    add("loss", "F.cosine_similarity(x, y)", lambda m, F, t: F.cosine_similarity(t(A), t(B)))
    # -- creation ---------------------------------------------------------------------------
    add("creation", "torch.zeros(2, 3)", lambda m, F, t: m.zeros(2, 3))
    add("creation", "torch.zeros((2, 3), dtype=torch.int64)",
        lambda m, F, t: m.zeros((2, 3), dtype=m.int64))  # fmt: skip
    add("creation", "torch.ones(3)", lambda m, F, t: m.ones(3))
    add("creation", "torch.full((2, 2), 7.0)", lambda m, F, t: m.full((2, 2), 7.0))
    add("creation", "torch.full((2, 2), 7)", lambda m, F, t: m.full((2, 2), 7))
    add("creation", "torch.arange(5)", lambda m, F, t: m.arange(5))
    add("creation", "torch.arange(1, 4, 0.5)", lambda m, F, t: m.arange(1, 4, 0.5))
    add("creation", "torch.linspace(0, 1, 5)", lambda m, F, t: m.linspace(0, 1, 5))
    add("creation", "torch.eye(3)", lambda m, F, t: m.eye(3))
    add("creation", "torch.tensor([[1, 2]])", lambda m, F, t: m.tensor([[1, 2]]))
    add("creation", "torch.tensor([1.5])", lambda m, F, t: m.tensor([1.5]))
    add("creation", "torch.tensor(True)", lambda m, F, t: m.tensor(True))
    add("creation", "torch.zeros_like(x)", lambda m, F, t: m.zeros_like(t(A)))
    add("creation", "torch.full_like(x, 2)", lambda m, F, t: m.full_like(t(A), 2))
    add("creation", "torch.from_numpy(a)", lambda m, F, t: m.from_numpy(A.copy()))
    add("creation", "x.new_zeros(2)", lambda m, F, t: t(A).new_zeros(2))
    add("creation", "torch.empty(2, 3).shape", lambda m, F, t: np.array(m.empty(2, 3).shape))
    add("creation", "torch.randn(2, 3).shape", lambda m, F, t: np.array(m.randn(2, 3).shape))
    add("creation", "torch.rand(2, 3).dtype", lambda m, F, t: m.rand(2, 3)[:0])
    add("creation", "torch.randint(0, 5, (3,)).dtype", lambda m, F, t: m.randint(0, 5, (3,))[:0])
    add("creation", "torch.ones(2, 3, dtype=torch.bool)",
        lambda m, F, t: m.ones(2, 3, dtype=m.bool))  # fmt: skip
    # -- in place ---------------------------------------------------------------------------
    for name, args in [("add_", (1.0,)), ("sub_", (1.0,)), ("mul_", (2.0,)), ("div_", (2.0,)),
                       ("clamp_", (-0.1,)), ("fill_", (3.0,)), ("zero_", ()), ("exp_", ()),
                       ("relu_", ())]:  # fmt: skip
        add("in place", f"x.{name}({', '.join(map(repr, args))})",
            lambda m, F, t, n=name, a=args: _inplace(t(A.copy()), n, *a))  # fmt: skip
    add("in place", "x.copy_(y)", lambda m, F, t: _inplace(t(A.copy()), "copy_", t(B)))
    add("in place", "x.masked_fill_(mask, 0.0)",
        lambda m, F, t: _inplace(t(A.copy()), "masked_fill_", t(A) > 0, 0.0))  # fmt: skip
    add("in place", "x += y", lambda m, F, t: _iadd(t(A.copy()), t(B)))
    add("in place", "x[0] = 1.0", lambda m, F, t: _setitem(t(A.copy()), 0, 1.0))
    add("in place", "x[mask] = 0.0", lambda m, F, t: _setitem(t(A.copy()), t(A) > 0, 0.0))
    return rows


def _inplace(x, name: str, *args):
    getattr(x, name)(*args)
    return x


def _iadd(x, y):
    x += y
    return x


def _setitem(x, key, value):
    x[key] = value
    return x


def _numpy(result) -> np.ndarray:
    if isinstance(result, torch.Tensor):
        result = result.detach()
        return (result.float() if result.dtype == torch.bfloat16 else result).numpy()
    if isinstance(result, wb.Tensor):
        # .numpy(), not np.asarray: np.asarray of a 0-d workbench tensor fails (a row below)
        return np.asarray((result.to(wb.f32) if result.dtype is wb.bf16 else result).numpy())
    return np.asarray(result)


def _dtype_name(result) -> str | None:
    if isinstance(result, torch.Tensor):
        return str(result.dtype).removeprefix("torch.")
    if isinstance(result, wb.Tensor):
        return result.dtype.torch_name
    return None


def _compare(got, want) -> str | None:
    """None when ``got`` (workbench) agrees with ``want`` (torch), else how they differ."""
    if isinstance(want, tuple):
        if not isinstance(got, tuple | list) or len(got) != len(want):
            return f"returns {type(got).__name__}, torch a {len(want)}-tuple"
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            why = _compare(g, w)
            if why:
                return f"result {k}: {why}"
        return None
    if isinstance(want, bool | int | float):
        want = np.asarray(want)
    g_dtype, w_dtype = _dtype_name(got), _dtype_name(want)
    g, w = _numpy(got), _numpy(want)
    if g.shape != w.shape:
        return f"shape {g.shape}, torch {w.shape}"
    if w_dtype and g_dtype and g_dtype != w_dtype:
        return f"dtype {g_dtype}, torch {w_dtype}"
    if w.dtype.kind in "fc":
        if not np.allclose(g.astype(np.float64), w.astype(np.float64), 1e-4, 1e-5,
                           equal_nan=True):  # fmt: skip
            return "values differ"
    elif not np.array_equal(g, w.astype(g.dtype) if g.dtype.kind == w.dtype.kind else w):
        return "values differ"
    return None


def _missing_name(error: AttributeError) -> str | None:
    """The workbench name an AttributeError says is missing (a module's or Tensor's)."""
    text = str(error)
    owners = ("module 'workbench", "'Tensor' object", "type object 'Tensor'")
    if "has no attribute" not in text or not text.startswith(owners):
        return None
    return text.split("attribute ")[-1].strip("'\"")


def run(row: Row) -> tuple[str, str]:
    """``(status, note)`` of one row: status is supported / differs / missing."""
    try:
        want = row.snippet(torch, torch_f, torch.tensor)
    except Exception as error:  # noqa: BLE001  (a wrong snippet must not pass silently)
        raise RuntimeError(f"torch rejects the snippet {row.name!r}: {error}") from error
    try:
        got = row.snippet(wb, wb_f, wb.tensor)
    except AttributeError as error:
        name = _missing_name(error)
        if name is not None:
            return "missing", f"no `{name}`"
        return "differs", f"AttributeError: {error}"
    except Exception as error:  # noqa: BLE001  (every failure is a row of the table)
        message = " ".join(str(error).split())
        if len(message) > 90:
            message = message[:87] + "..."
        return "differs", f"{type(error).__name__}: {message}"
    try:
        why = _compare(got, want)
    except Exception as error:  # noqa: BLE001  (an unreadable result is a difference too)
        why = f"result unreadable ({type(error).__name__}: {error})"
    return ("supported", "") if why is None else ("differs", why)


def table() -> str:
    rows = _rows()
    results = [(row, *run(row)) for row in rows]
    counts = {s: sum(1 for _, st, _ in results if st == s) for s in
              ("supported", "differs", "missing")}  # fmt: skip
    version = torch.__version__.split("+")[0]
    out = [
        "# PyTorch compatibility",
        "",
        "Generated by `python tests/compat/compat_probe.py --write docs/pytorch_compat.md`",
        "(do not edit by hand). Each row is a PyTorch snippet run unchanged against `torch`",
        "and against `workbench` (`import workbench as torch`, `import workbench.nn.functional",
        f"as F`); values, shapes and dtypes are compared with torch {version} on the CPU.",
        "Gradients of the supported rows are compared by `tests/compat/test_compat_table.py`.",
        "",
        "- **supported**: runs unchanged and agrees;",
        "- **differs**: the name exists, but the call fails or the result differs (the note says",
        "  how: an unknown keyword, another result type, dtype or value);",
        "- **missing**: workbench has no such name.",
        "",
        f"Totals: {counts['supported']} supported, {counts['differs']} differ, "
        f"{counts['missing']} missing, of {len(results)} snippets.",
    ]
    area = None
    for row, status, note in results:
        if row.area != area:
            area = row.area
            out += ["", f"## {area}", "", "| snippet | status | note |", "|---|---|---|"]
        note = note.replace("|", "\\|")
        out.append(f"| `{row.name}` | {status} | {note} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="write the markdown table here")
    args = parser.parse_args(argv)
    text = table()
    if args.write:
        args.write.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
