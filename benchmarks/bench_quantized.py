"""Quantized tensors: block decoding against gguf-py's numpy code, QMatMul against f32 matmul.

    python -m benchmarks.bench_quantized            # the table below, with GB/s
    python -m benchmarks.bench_quantized --quick
    python -m benchmarks -k quantized               # the same workloads in the suite's table

- ``dequant/<type>``: decode 1M weights (256 x 4096) to f32. "workbench" is
  ``workbench.backends.cpu.ggml``, "numpy" is gguf-py's ``gguf.quants.dequantize`` (pure numpy,
  the reference the tests compare with bit for bit). GB/s counts f32 output bytes.
- ``qmatmul/<type>/b<batch>``: ``x (batch, 4096) @ W.T`` with ``W`` 4096 x 4096. "workbench"
  is ``QMatMul`` (W decoded by row tiles into a reused f32 buffer, each tile through BLAS),
  "numpy" the f32 matmul with the f32 weight, "torch" the same in PyTorch. GB/s counts the
  weight bytes read (quantized for QMatMul, f32 for the baselines).
- ``qmatmul-int8/<type>/b<batch>``: the alternative QMatMul design, measured and rejected:
  quantize ``x`` to Q8_0 and take per-block integer dot products (ggml's CPU approach) with
  numpy's einsum, which has no int8 GEMM. Kept here so the numbers can be re-checked.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ._harness import Result, Settings, Skip, Workload, run

K = N = 4096
DEQUANT_ROWS = 256
TYPES = ("F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
         "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS")  # fmt: skip
QMATMUL_TYPES = ("Q4_0", "Q8_0", "Q4_K", "Q6_K", "IQ4_XS")


def _weights(rows: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((rows, K), dtype=np.float32)


def _dequant(name: str):
    def make():
        from workbench.backends.cpu import ggml

        raw = ggml.quantize(_weights(DEQUANT_ROWS), name)
        fns = {"workbench": lambda: ggml.dequantize(raw, name)}
        try:
            import gguf
            from gguf import quants

            qtype = gguf.GGMLQuantizationType[name]
            ref = quants.dequantize(raw, qtype).reshape(-1)
        except (ImportError, NotImplementedError):
            return fns  # gguf-py has no decoder for Q8_1 / Q8_K
        if not np.array_equal(fns["workbench"](), ref):
            raise Skip(f"{name}: results differ from gguf-py")
        fns["numpy"] = lambda: quants.dequantize(raw, qtype)
        return fns

    return make


def _qmatmul(name: str, batch: int):
    def make():
        import torch

        from workbench.quantized import QMatMul, QTensor

        w = _weights(N)
        mm = QMatMul(QTensor.quantize(w, name))
        x = np.random.default_rng(1).standard_normal((batch, K), dtype=np.float32)
        tw, tx = torch.from_numpy(w.copy()), torch.from_numpy(x.copy())
        return {"workbench": lambda: mm(x), "numpy": lambda: x @ w.T, "torch": lambda: tx @ tw.T}

    return make


# ------------------------------------------------------------------- the rejected design
def _int8_dot(weight_blocks: np.ndarray, weight_scales: np.ndarray, x: np.ndarray):
    """``x @ W.T`` with W as int8 blocks ``(N, nb, 32)`` and f32 scales ``(N, nb)``: quantize
    x to Q8_0, integer dot per block (int32), then sum_b dw * dx * dot."""
    from workbench.backends.cpu import ggml

    n, nb, _ = weight_blocks.shape
    xq = ggml.quantize(x, "Q8_0").reshape(x.shape[0], nb, 34)
    dx = xq[:, :, :2].copy().view(np.float16)[..., 0].astype(np.float32)
    qx = xq[:, :, 2:].view(np.int8)
    out = np.empty((x.shape[0], n), np.float32)
    step = 256
    for r0 in range(0, n, step):
        dots = np.einsum("nbi,mbi->mnb", weight_blocks[r0 : r0 + step], qx, dtype=np.int32)
        dots = dots.astype(np.float32) * weight_scales[None, r0 : r0 + step] * dx[:, None]
        out[:, r0 : r0 + step] = dots.sum(axis=2)
    return out


def _qmatmul_int8(name: str, batch: int):
    def make():
        from workbench.backends.cpu import ggml

        w = _weights(N)
        raw = ggml.quantize(w, name).reshape(N, K // 32, -1)
        d = raw[:, :, :2].copy().view(np.float16)[..., 0].astype(np.float32)
        x = np.random.default_rng(1).standard_normal((batch, K), dtype=np.float32)
        if name == "Q8_0":
            qw = raw[:, :, 2:].view(np.int8)

            def fn():
                return _int8_dot(qw, d, x)
        elif name == "Q4_0":
            qs = raw[:, :, 2:]

            def fn():  # the nibbles are unpacked per call: that is part of this design's cost
                q = np.concatenate([qs & 0x0F, qs >> 4], axis=2).view(np.int8) - np.int8(8)
                return _int8_dot(q, d, x)
        else:
            raise Skip(f"no integer path for {name}")
        return {"workbench": fn, "numpy": lambda: x @ w.T}

    return make


WORKLOADS = (
    [Workload(f"quantized/dequant/{t}", _dequant(t)) for t in TYPES]
    + [
        Workload(f"quantized/qmatmul/{t}/b{b}", _qmatmul(t, b), tolerance=30.0)
        for t in QMATMUL_TYPES
        for b in (1, 64)
    ]
    + [
        Workload(f"quantized/qmatmul-int8/{t}/b{b}", _qmatmul_int8(t, b))
        for t in ("Q8_0", "Q4_0")
        for b in (1, 64)
    ]
)


# ------------------------------------------------------------------- standalone report
def _gbps(nbytes: float, seconds: float | None) -> str:
    return "-" if not seconds else f"{nbytes / seconds / 1e9:.2f}"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:.2f}x"


def report(results: list[Result]) -> str:
    from workbench.quantized import GgmlDType

    lines = [
        "dequantization, 1M weights -> f32 (GB/s of f32 output; gguf-py = gguf.quants numpy)",
        f"{'type':8} {'workbench ms':>13} {'GB/s':>6} {'gguf-py ms':>11} {'GB/s':>6} "
        f"{'speed-up':>9}",
    ]
    out_bytes = DEQUANT_ROWS * K * 4
    for r in results:
        if not r.name.startswith("quantized/dequant/"):
            continue
        t = r.name.rsplit("/", 1)[1]
        if r.skipped:
            lines.append(f"{t:8} skipped: {r.skipped}")
            continue
        ours, ref = r.median("workbench"), r.median("numpy")
        lines.append(
            f"{t:8} {_ms(ours):>13} {_gbps(out_bytes, ours):>6} {_ms(ref):>11} "
            f"{_gbps(out_bytes, ref):>6} {_ratio(ref, ours):>9}"
        )
    lines += [
        "",
        f"QMatMul, x (batch, {K}) @ W.T, W {N}x{K} (GB/s of weight bytes read)",
        f"{'workload':22} {'QMatMul ms':>11} {'GB/s':>6} {'f32 numpy ms':>13} {'GB/s':>6} "
        f"{'torch ms':>9} {'vs numpy':>9}",
    ]
    for r in results:
        if not r.name.startswith("quantized/qmatmul"):
            continue
        parts = r.name.split("/")
        label = "/".join(parts[1:])
        if r.skipped:
            lines.append(f"{label:22} skipped: {r.skipped}")
            continue
        gd = GgmlDType[parts[2]]
        ours, f32, torch_t = r.median("workbench"), r.median("numpy"), r.median("torch")
        lines.append(
            f"{label:22} {_ms(ours):>11} {_gbps(N * gd.row_bytes(K), ours):>6} {_ms(f32):>13} "
            f"{_gbps(N * K * 4, f32):>6} {_ms(torch_t):>9} {_ratio(ours, f32):>9}"
        )
    lines.append("\nTimes are medians of interleaved repetitions; 'vs numpy' > 1 means slower.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_quantized")
    parser.add_argument("--quick", action="store_true", help="5 short repetitions")
    parser.add_argument("--filter", "-k", default="", help="substring of workload names")
    args = parser.parse_args(argv)
    settings = Settings(repeats=5, min_time=0.01, warmup=1) if args.quick else Settings()
    results = []
    for w in WORKLOADS:
        if args.filter in w.name:
            print(f"  {w.name} ...", file=sys.stderr, flush=True)
            results.append(run(w, settings))
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
