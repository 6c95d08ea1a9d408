"""CUDA throughput against PyTorch CUDA in one run: bf16 matmul 8192² (TFLOP/s) and
elementwise add (GB/s). Only runs where a CUDA GPU is usable; elsewhere it says why.

    python -m benchmarks.bench_cuda [--size 8192] [--numel 67108864] [--repeats 20]

Times are device times between two CUDA events around ``repeats`` launches (after a warm-up),
for workbench (``backends.cuda.device_timer``) and torch (``torch.cuda.Event``).
The ``python -m benchmarks`` harness times CPU workloads; this module adds none to it.
"""

from __future__ import annotations

import argparse

WORKLOADS: list = []  # GPU timings need events, not the CPU harness


def _time_wb(fn, repeats: int) -> float:
    """Seconds per call on the device."""
    from workbench.backends import cuda

    fn()
    cuda.synchronize(0)
    timer = cuda.device_timer(0)
    timer.start()
    for _ in range(repeats):
        fn()
    return timer.stop_ns() / 1e9 / repeats


def _time_torch(fn, repeats: int) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / repeats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_cuda")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--numel", type=int, default=1 << 26)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)

    import numpy as np

    import workbench as wb
    from workbench.device import _load_backend

    try:
        ok, reason = _load_backend("cuda").is_available()
    except ImportError as err:
        ok, reason = False, str(err)
    if not ok:
        print(f"bench_cuda: no usable CUDA GPU here ({reason}); nothing measured.")
        return 0
    try:
        import torch

        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False

    n, repeats = args.size, args.repeats
    rng = np.random.default_rng(0)
    rows = []
    a = wb.tensor(rng.standard_normal((n, n), dtype=np.float32), device="cuda").to("bf16")
    b = wb.tensor(rng.standard_normal((n, n), dtype=np.float32), device="cuda").to("bf16")
    flops = 2.0 * n**3
    rows.append((f"matmul bf16 {n}²", "TFLOP/s", flops / _time_wb(lambda: a @ b, repeats) / 1e12))
    x = wb.tensor(rng.standard_normal(args.numel, dtype=np.float32), device="cuda")
    y = wb.tensor(rng.standard_normal(args.numel, dtype=np.float32), device="cuda")
    moved = 3 * 4 * args.numel  # two reads, one write
    rows.append((f"add f32 {args.numel}", "GB/s", moved / _time_wb(lambda: x + y, repeats) / 1e9))
    if has_torch:
        ta = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        tb = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        tx = torch.randn(args.numel, device="cuda")
        ty = torch.randn(args.numel, device="cuda")
        torch_values = [
            flops / _time_torch(lambda: ta @ tb, repeats) / 1e12,
            moved / _time_torch(lambda: tx + ty, repeats) / 1e9,
        ]
    else:
        torch_values = [None, None]
    print(f"{'workload':28} {'unit':8} {'workbench':>10} {'torch':>10} {'ratio':>6}")
    for (name, unit, value), ref in zip(rows, torch_values, strict=True):
        ref_s = f"{ref:10.1f}" if ref else f"{'n/a':>10}"
        ratio = f"{value / ref:6.2f}" if ref else f"{'':>6}"
        print(f"{name:28} {unit:8} {value:10.1f} {ref_s} {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
