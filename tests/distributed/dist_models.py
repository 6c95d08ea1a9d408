"""Models and reference runs shared by the in-process tests and the MPI workers.

``train`` runs data-parallel training on one rank (any communicator) and ``train_reference``
the same steps in one process on the concatenated batches: they must agree. ``Block`` is a
small transformer-like block (causal multi-head attention + MLP) written with plain ops;
``TPBlock`` is its tensor-parallel version built from the same weights through a
``ShardedVarBuilder``.
"""

from __future__ import annotations

import math

import numpy as np

import workbench as wb
from workbench import distributed as dist
from workbench import nn, optim

N_SAMPLES, IN, HIDDEN, OUT = 72, 10, 16, 3
STEPS, BATCH = 20, 6  # per-rank batch; 72 samples / (6 * 2 ranks) = 6 steps an epoch


def dataset():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((N_SAMPLES, IN)).astype(np.float32)
    y = rng.integers(0, OUT, N_SAMPLES)
    return x, y


def mlp(seed: int) -> nn.Module:
    wb.manual_seed(seed)
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, OUT))  # fmt: skip


def _loss(model, xb, yb):
    return nn.functional.cross_entropy(model(xb), yb)


def train(comm: dist.Communicator, model=None, bucket_cap_mb=1e-4) -> tuple[dict, list[float]]:
    """20 AdamW steps of DDP; ranks start from different weights (rank 0's win).

    Thread ranks pass ``model`` (built beforehand: they share the global generator).
    """
    model = dist.DistributedDataParallel(model or mlp(seed=100 + comm.rank), comm, bucket_cap_mb)
    opt = optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01)
    x, y = dataset()
    batcher = dist.DistributedBatcher(x, y, batch_size=BATCH, shuffle=True, seed=3, comm=comm)
    losses, step = [], 0
    while step < STEPS:
        for xb, yb in batcher:
            loss = _loss(model, xb, yb)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(comm.all_reduce(loss.detach(), "mean").item())
            step += 1
            if step == STEPS:
                break
    model.close()
    return {k: v.numpy().copy() for k, v in model.module.state_dict().items()}, losses


def train_reference(world_size: int) -> tuple[dict, list[float]]:
    """The same 20 steps in one process, on the concatenation of the ranks' batches."""
    model = mlp(seed=100)
    opt = optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01)
    x, y = dataset()
    order_of = dist.DistributedBatcher(
        x, y, batch_size=BATCH, shuffle=True, seed=3, rank=0, world_size=world_size
    )
    losses, step, epoch = [], 0, 0
    step_size = BATCH * world_size
    while step < STEPS:
        order_of.set_epoch(epoch)
        order = order_of.order()
        for b in range(len(order) // step_size):
            idx = order[b * step_size : (b + 1) * step_size]
            loss = _loss(model, wb.from_numpy(x[idx]), wb.from_numpy(y[idx]))
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
            step += 1
            if step == STEPS:
                break
        epoch += 1
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}, losses


# -- tensor parallel ------------------------------------------------------------------------
D, HEADS, FF, T = 16, 4, 32, 5


def block_weights(seed: int = 11) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32)

    return {
        "attn.q.weight": w(D, D), "attn.q.bias": w(D), "attn.k.weight": w(D, D),
        "attn.k.bias": w(D), "attn.v.weight": w(D, D), "attn.v.bias": w(D),
        "attn.o.weight": w(D, D), "attn.o.bias": w(D),
        "mlp.up.weight": w(FF, D), "mlp.up.bias": w(FF), "mlp.down.weight": w(D, FF),
        "mlp.down.bias": w(D),
    }  # fmt: skip


def _attention(q, k, v, heads: int):
    """Causal attention over (T, heads·dh) projections, head by head."""
    dh = q.shape[-1] // heads
    q, k, v = (t.reshape(T, heads, dh).transpose(0, 1) for t in (q, k, v))
    scores = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(dh))
    mask = wb.from_numpy(np.triu(np.full((T, T), -1e9, np.float32), 1))
    out = wb.softmax(scores + mask, dim=-1) @ v
    return out.transpose(0, 1).reshape(T, heads * dh)


def block_reference(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The block in float64 numpy (x: (T, D)): x + attn(x), then h + mlp(h)."""
    W = {k: v.astype(np.float64) for k, v in weights.items()}

    def lin(name, a):
        return a @ W[f"{name}.weight"].T + W[f"{name}.bias"]

    x = x.astype(np.float64)
    q, k, v = (lin(f"attn.{n}", x).reshape(T, HEADS, -1).transpose(1, 0, 2) for n in "qkv")
    s = q @ k.transpose(0, 2, 1) / math.sqrt(D // HEADS) + np.triu(np.full((T, T), -1e9), 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    h = x + lin("attn.o", (p @ v).transpose(1, 0, 2).reshape(T, D))
    return h + lin("mlp.down", np.maximum(lin("mlp.up", h), 0))


class TPBlock(nn.Module):
    """The block with heads and the MLP hidden dim split over the ranks."""

    def __init__(self, vb, comm):
        super().__init__()
        a, m = vb.pp("attn"), vb.pp("mlp")
        self.q, self.k, self.v = (dist.ColumnParallelLinear(D, D, comm, a.pp(n)) for n in "qkv")
        self.o = dist.RowParallelLinear(D, D, comm, a.pp("o"))
        self.up = dist.ColumnParallelLinear(D, FF, comm, m.pp("up"))
        self.down = dist.RowParallelLinear(FF, D, comm, m.pp("down"))
        self.local_heads = HEADS // comm.world_size

    def forward(self, x):
        h = x + self.o(_attention(self.q(x), self.k(x), self.v(x), self.local_heads))
        return h + self.down(self.up(h).relu())


# -- tensor-parallel LLMs -------------------------------------------------------------------
def greedy(lm, ids: list[int], n: int) -> tuple[list[int], np.ndarray]:
    """``n`` greedy tokens after ``ids`` through the KV cache (the decode path of ``generate``),
    and the logits each was chosen from: (tokens, (n, n_vocab)). Under tensor parallelism the
    choice is rank 0's, as in ``generate``."""
    tf = lm.transformer
    cache = tf.new_cache(1, len(ids) + n)
    logits = tf.forward([list(ids)], [0], cache)[0]
    tokens, steps = [], []
    for i in range(n):
        steps.append(logits)
        tokens.append(lm.tp.from_rank0(int(np.argmax(logits))))
        if i + 1 < n:
            logits = tf.forward([[tokens[-1]]], [0], cache)[0]
    return tokens, np.stack(steps)


def compare_greedy(tokens, steps, ref_tokens, ref_steps, tol: float) -> tuple[int, str | None]:
    """Compare a greedy run with one process's, step by step: (tokens that agree, a failure).

    At each step the logits must be within ``tol`` (max abs) of one process's. Two runs within
    ``tol`` may pick different tokens only where one process's top two are within ``2·tol``
    (a near tie that the other rounding breaks the other way): that ends the comparison, as
    the continuations then differ legitimately; a different pick with a wider margin fails.
    """
    for i, (token, want) in enumerate(zip(ref_tokens, ref_steps, strict=True)):
        err = float(np.abs(steps[i] - want).max())
        if err > tol:
            return i, f"step {i}: logits off by {err:.3g} (tolerance {tol:.3g})"
        if tokens[i] != token:
            gap = float(want[token] - want[tokens[i]])
            if gap > 2 * tol:
                return i, (
                    f"step {i}: token {tokens[i]}, one process {token}, which it ranks "
                    f"{gap:.3g} higher (more than 2 x tolerance {tol:.3g})"
                )
            return i, None
    return len(ref_tokens), None
