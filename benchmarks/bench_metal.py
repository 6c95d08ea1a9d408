"""Metal throughput against PyTorch MPS and MLX on the same Mac in one run: f16 matmul 4096²
(TFLOP/s) and elementwise add bandwidth (GB/s), printed with the ratios workbench / peer.

    python -m benchmarks.bench_metal [--size 4096] [--numel 67108864] [--repeats 20]

Each library runs ``repeats`` calls after a warm-up and is timed on the host clock from before
the first call to after its own sync (``Device.synchronize``, ``torch.mps.synchronize``,
``mx.eval``), so queued work is counted the same way for all three, one library after the
other in one process. Only runs where Metal is usable; elsewhere it says why.
The ``python -m benchmarks`` harness times CPU workloads; this module adds none to it.
"""

from __future__ import annotations

import argparse
import time

WORKLOADS: list = []  # GPU timings need device syncs, not the CPU harness


def _seconds(call, sync, repeats: int) -> float:
    """Seconds per call: ``repeats`` calls then one sync, after a warm-up call and sync."""
    sync(call())
    start = time.perf_counter()
    out = None
    for _ in range(repeats):
        out = call()
    sync(out)
    return (time.perf_counter() - start) / repeats


def _workbench(n: int, numel: int, repeats: int, rng) -> list[float]:
    import numpy as np

    import workbench as wb

    def sync(_):
        wb.Device("metal").synchronize()

    a = wb.tensor(rng.standard_normal((n, n), dtype=np.float32), device="metal").to("f16")
    b = wb.tensor(rng.standard_normal((n, n), dtype=np.float32), device="metal").to("f16")
    x = wb.tensor(rng.standard_normal(numel, dtype=np.float32), device="metal")
    y = wb.tensor(rng.standard_normal(numel, dtype=np.float32), device="metal")
    return [_seconds(lambda: a @ b, sync, repeats), _seconds(lambda: x + y, sync, repeats)]


def _torch(n: int, numel: int, repeats: int) -> list[float] | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.backends.mps.is_available():
        return None

    def sync(_):
        torch.mps.synchronize()

    a = torch.randn(n, n, device="mps", dtype=torch.float16)
    b = torch.randn(n, n, device="mps", dtype=torch.float16)
    x, y = torch.randn(numel, device="mps"), torch.randn(numel, device="mps")
    return [_seconds(lambda: a @ b, sync, repeats), _seconds(lambda: x + y, sync, repeats)]


def _mlx(n: int, numel: int, repeats: int) -> list[float] | None:
    try:
        import mlx.core as mx
    except ImportError:
        return None

    a = mx.random.normal((n, n)).astype(mx.float16)
    b = mx.random.normal((n, n)).astype(mx.float16)
    x, y = mx.random.normal((numel,)), mx.random.normal((numel,))
    mx.eval(a, b, x, y)
    return [_seconds(lambda: a @ b, mx.eval, repeats), _seconds(lambda: x + y, mx.eval, repeats)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_metal")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--numel", type=int, default=1 << 26)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)

    import numpy as np

    from workbench.device import _load_backend

    try:
        ok, reason = _load_backend("metal").is_available()
    except ImportError as err:
        ok, reason = False, str(err)
    if not ok:
        print(f"bench_metal: no usable Metal device here ({reason}); nothing measured.")
        return 0
    n, numel, repeats = args.size, args.numel, args.repeats
    rng = np.random.default_rng(0)
    wb_s = _workbench(n, numel, repeats, rng)
    torch_s = _torch(n, numel, repeats)
    mlx_s = _mlx(n, numel, repeats)
    work = [2.0 * n**3 / 1e12, 3 * 4 * numel / 1e9]  # TFLOP, GB moved (two reads, one write)
    names = [(f"matmul f16 {n}²", "TFLOP/s"), (f"add f32 {numel}", "GB/s")]
    print(f"{'workload':26} {'unit':8} {'workbench':>10} {'torch mps':>10} {'mlx':>10} "
          f"{'wb/torch':>9} {'wb/mlx':>7}")  # fmt: skip
    for i, (name, unit) in enumerate(names):
        ours = work[i] / wb_s[i]
        peers = [work[i] / s[i] if s else None for s in (torch_s, mlx_s)]
        cells = [f"{p:10.2f}" if p else f"{'n/a':>10}" for p in peers]
        ratios = [f"{ours / p:9.2f}" if p else f"{'':>9}" for p in peers]
        print(f"{name:26} {unit:8} {ours:10.2f} {cells[0]} {cells[1]} {ratios[0]} {ratios[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
