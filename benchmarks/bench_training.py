"""Training steps of small CNNs with ``nn`` + ``optim``, against the same model in PyTorch.

One step = forward, cross-entropy, backward, AdamW update, on batches of 64 cycling through
8 fixed random batches. Two models: the CNN of ``notebooks/02_training.ipynb`` on 8×8 digits
(dispatch-bound) and an MNIST-sized one on 28×28 images (compute-bound). Both libraries start
from the same weights (copied workbench → torch), so the first step's losses must agree.

    python -m benchmarks --filter training
    python -m benchmarks.bench_training           # these workloads alone
"""

from __future__ import annotations

import numpy as np
import torch

import workbench as wb

from ._harness import Skip, Workload

BATCH = 64
N_BATCHES = 8


def _need(*names: str) -> None:
    missing = [n for n in names if getattr(wb, n, None) is None]
    if missing:
        raise Skip(f"wb.{', wb.'.join(missing)} not available yet")


def _digits_cnn(nn):
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 10),
    )  # fmt: skip


def _mnist_cnn(nn):
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10),
    )  # fmt: skip


def _workload(build, size: int):
    def make():
        _need("conv2d", "max_pool2d", "log_softmax", "gather")
        from workbench import nn, optim

        wb.manual_seed(0)
        model = build(nn)
        reference = build(torch.nn)
        reference.load_state_dict(
            {k: torch.from_numpy(np.array(v.numpy())) for k, v in model.state_dict().items()}
        )
        rng = np.random.default_rng(0)
        xs = rng.standard_normal((N_BATCHES, BATCH, 1, size, size), dtype=np.float32)
        ys = rng.integers(0, 10, (N_BATCHES, BATCH))
        wb_data = [(wb.tensor(x), wb.tensor(y)) for x, y in zip(xs, ys, strict=True)]
        torch_data = [
            (torch.from_numpy(x), torch.from_numpy(y)) for x, y in zip(xs, ys, strict=True)
        ]
        opt = optim.AdamW(model.parameters(), lr=1e-3)
        topt = torch.optim.AdamW(reference.parameters(), lr=1e-3)
        counters = {"wb": 0, "torch": 0}

        def wb_step():
            x, y = wb_data[counters["wb"] % N_BATCHES]
            counters["wb"] += 1
            loss = nn.functional.cross_entropy(model(x), y)
            opt.backward_step(loss)
            return loss

        def torch_step():
            x, y = torch_data[counters["torch"] % N_BATCHES]
            counters["torch"] += 1
            topt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(reference(x), y)
            loss.backward()
            topt.step()
            return loss

        return {"workbench": wb_step, "torch": torch_step}

    return make


WORKLOADS = [
    Workload("training/cnn_digits_1x8x8_b64", _workload(_digits_cnn, 8), target=0.8,
             note="conv-bn-relu-pool ×2 + linear, cross-entropy, AdamW"),
    Workload("training/cnn_mnist_1x28x28_b64", _workload(_mnist_cnn, 28), target=0.8,
             note="conv-relu-pool ×2 + MLP, cross-entropy, AdamW"),
]  # fmt: skip


if __name__ == "__main__":
    import sys

    from .__main__ import main

    sys.exit(main(["--filter", "training", *sys.argv[1:]]))
