"""One MLP training step (forward and backward, no optimizer): 784 → 512 → 512 → 10, ReLU,
batch 256, cross-entropy through log_softmax + gather (mean squared error when those ops are
missing). numpy runs a hand-written forward and backward pass."""

from __future__ import annotations

import numpy as np
import torch

import workbench as wb

from ._harness import Workload

SIZES = (784, 512, 512, 10)
BATCH = 256


def _data():
    rng = np.random.default_rng(0)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:], strict=True):
        bound = 1.0 / np.sqrt(fan_in)
        params.append(rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32))
        params.append(rng.uniform(-bound, bound, fan_out).astype(np.float32))
    x = rng.standard_normal((BATCH, SIZES[0]), dtype=np.float32)
    labels = rng.integers(0, SIZES[-1], BATCH)
    return params, x, labels


def _cross_entropy_available() -> bool:
    return all(hasattr(wb, name) for name in ("log_softmax", "gather"))


def _workbench(params_np, x_np, labels_np, ce: bool):
    params = [wb.Var(p) for p in params_np]
    x = wb.tensor(x_np)
    labels = wb.tensor(labels_np).unsqueeze(1)
    onehot = wb.tensor(np.eye(SIZES[-1], dtype=np.float32)[labels_np])

    def step():
        for p in params:
            p.grad = None
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i + 2 < len(params):
                h = h.relu()
        if ce:
            loss = -wb.gather(wb.log_softmax(h, -1), 1, labels).mean()
        else:
            d = h - onehot
            loss = (d * d).mean()
        grads = loss.backward()
        return (loss, *(grads[p] for p in params))

    return step


def _torch(params_np, x_np, labels_np, ce: bool):
    params = [torch.tensor(p, requires_grad=True) for p in params_np]
    x = torch.from_numpy(x_np.copy())
    labels = torch.from_numpy(labels_np.copy()).unsqueeze(1)
    onehot = torch.from_numpy(np.eye(SIZES[-1], dtype=np.float32)[labels_np])

    def step():
        for p in params:
            p.grad = None
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i + 2 < len(params):
                h = h.relu()
        if ce:
            loss = -torch.log_softmax(h, -1).gather(1, labels).mean()
        else:
            d = h - onehot
            loss = (d * d).mean()
        loss.backward()
        return (loss, *(p.grad for p in params))

    return step


def _numpy(params, x, labels, ce: bool):
    rows = np.arange(len(labels))
    onehot = np.eye(SIZES[-1], dtype=np.float32)[labels]

    def step():
        acts, pre = [x], []
        h = x
        for i in range(0, len(params), 2):
            z = h @ params[i] + params[i + 1]
            pre.append(z)
            h = np.maximum(z, 0) if i + 2 < len(params) else z
            acts.append(h)
        if ce:
            shifted = h - h.max(1, keepdims=True)
            e = np.exp(shifted)
            s = e.sum(1, keepdims=True)
            loss = -np.mean(shifted[rows, labels] - np.log(s[:, 0]))
            dz = e / s
            dz[rows, labels] -= 1.0
            dz /= len(labels)
        else:
            d = h - onehot
            loss = np.mean(d * d)
            dz = d * (2.0 / d.size)
        grads = []
        for layer in reversed(range(len(params) // 2)):
            grads[:0] = [acts[layer].T @ dz, dz.sum(0)]
            if layer:
                dz = (dz @ params[2 * layer].T) * (pre[layer - 1] > 0)
        return (np.float32(loss), *grads)

    return step


def _mlp():
    params, x, labels = _data()
    ce = _cross_entropy_available()
    return {
        "workbench": _workbench(params, x, labels, ce),
        "numpy": _numpy(params, x, labels, ce),
        "torch": _torch(params, x, labels, ce),
    }


WORKLOADS = [
    Workload(
        "mlp/step_784-512-512-10_b256",
        _mlp,
        target=1.0,
        note="forward + backward" + ("" if _cross_entropy_available() else ", MSE loss"),
    ),
]
