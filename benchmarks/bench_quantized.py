"""Quantized tensors: block decoding against gguf-py's numpy code, QMatMul against f32 matmul.

    python -m benchmarks.bench_quantized            # the table below, with GB/s
    python -m benchmarks.bench_quantized --quick
    python -m benchmarks -k quantized               # the same workloads in the suite's table

- ``dequant/<type>``: decode 1M weights (256 x 4096) to f32. "workbench" is
  ``workbench.backends.cpu.ggml``, "numpy" is gguf-py's ``gguf.quants.dequantize`` (pure numpy,
  the reference the tests compare with bit for bit). GB/s counts f32 output bytes.
- ``qmatmul/<type>/b<batch>``: ``x (batch, 4096) @ W.T`` with ``W`` 4096 x 4096, batch 1 and
  64 for every block type with a native kernel, 512 (a prompt's chunk) for four of them.
  "workbench" is ``QMatMul`` (native integer dot products, x quantized to Q8_0/Q8_1/Q8_K as
  ggml does), "numpy" is workbench's own f32 matmul with the f32 weight (Tensor ``@``, BLAS
  underneath), "torch" the same in PyTorch,
  and "numpy-path" is ``QMatMul`` on the numpy path (``WORKBENCH_NATIVE=0``: f32 tiles +
  BLAS, the levels at batch 1): the before/after of the native kernels in one run. Native
  threads are set to torch's (and BLAS's) count. Where AMX is on (bf16 tiles from 32 rows,
  kernels/cpu/quant/qgemm_amx.c), "integer" is the same product with AMX turned off (the VNNI
  kernel). Targets (issue 16, vs workbench's f32 matmul): batch 1, 4-bit types <= 0.35x,
  Q8_0 / Q6_K <= 0.6x; batch 64 (and 512) <= 1.2x.
- ``qmatvec/<type>/<n>x<k>``: one token's ``x (1, k) @ W.T`` at the shapes of a 125M-class
  Llama (768 wide, MLP 3072, vocab 32000) and 4096 x 4096, the per-token product of LLM
  decoding. "workbench" is ``QMatMul``, "native" the compiled kernel called directly (as the
  LLM's per-token path calls it: ``workbench.models.llm``), "numpy" workbench's f32 matmul,
  "torch" PyTorch's f32 matmul. ``python -m benchmarks.bench_quantized --threads 1 --clock
  cpu -k qmatvec``.
- ``qmatmul-int8/<type>/b<batch>``: the integer design done in numpy (einsum, no int8
  GEMM), as measured before the native kernels existed. Kept so the numbers can be re-checked.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ._harness import Result, Settings, Skip, Workload, environment, match_threads, run

K = N = 4096
DEQUANT_ROWS = 256
TYPES = ("F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
         "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS")  # fmt: skip
QMATMUL_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K",
                 "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS")  # fmt: skip
# QMatMul / workbench f32 matmul targets: (batch, types) -> ratio
TARGETS = {1: 0.35, 64: 1.2, 512: 1.2}
TARGETS_8BIT_B1 = {"Q8_0": 0.6, "Q6_K": 0.6, "Q8_1": 0.6, "Q8_K": 0.6, "Q5_0": 0.6,
                   "Q5_1": 0.6, "Q5_K": 0.6}  # fmt: skip


def target(name: str, batch: int) -> float:
    """The ratio to workbench's f32 matmul a type should reach (more bits: more bytes)."""
    return TARGETS_8BIT_B1.get(name, TARGETS[1]) if batch == 1 else TARGETS[batch]


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

        import workbench as wb
        from workbench.backends.cpu import native as cpu_native
        from workbench.backends.cpu import quantized as cpu_quantized
        from workbench.quantized import QMatMul, QTensor

        wb.set_num_threads(torch.get_num_threads())  # the threads BLAS and torch have
        w = _weights(N)
        mm = QMatMul(QTensor.quantize(w, name))
        x = np.random.default_rng(1).standard_normal((batch, K), dtype=np.float32)
        wx, ww = wb.from_numpy(x), wb.from_numpy(w).t()
        tw, tx = torch.from_numpy(w.copy()), torch.from_numpy(x.copy())

        def numpy_path():
            native, cpu_quantized.NATIVE = cpu_quantized.NATIVE, None
            try:
                return mm(wx)
            finally:
                cpu_quantized.NATIVE = native

        def integer():
            with cpu_native.integer_kernels():
                return mm(wx)

        peers = {
            "workbench": lambda: mm(wx),
            "numpy": lambda: wx @ ww,
            "torch": lambda: tx @ tw.T,
            "numpy-path": numpy_path,
        }
        if batch > 1 and cpu_native.info().get("amx") == "on":
            peers["integer"] = integer
        return peers

    return make


LLM_SHAPES = ((768, 768), (3072, 768), (768, 3072), (32000, 768), (4096, 4096))
QMATVEC_TYPES = ("Q4_0", "Q8_0", "Q4_K", "Q6_K", "Q5_0", "Q5_1", "IQ4_NL")


def _qmatvec(name: str, n: int, k: int):
    def make():
        import torch

        import workbench as wb
        from workbench.backends.cpu import ggml
        from workbench.backends.cpu.native import NATIVE
        from workbench.quantized import QMatMul, QTensor

        wb.set_num_threads(torch.get_num_threads())
        w = np.random.default_rng(0).standard_normal((n, k), dtype=np.float32)
        qt = QTensor.quantize(w, name)
        mm = QMatMul(qt)
        x = np.random.default_rng(1).standard_normal((1, k), dtype=np.float32)
        wx, ww = wb.from_numpy(x), wb.from_numpy(w).t()
        tw, tx = torch.from_numpy(w.copy()), torch.from_numpy(x.copy())
        fns = {
            "workbench": lambda: mm(wx),
            "numpy": lambda: wx @ ww,
            "torch": lambda: tx @ tw.T,
        }
        if NATIVE is not None:
            raw, type_id, out = qt.data.reshape(-1), ggml.BY_NAME[name].id, np.empty((1, n), "f4")

            def native():
                NATIVE.qmatmul(raw, type_id, n, k, x, out)
                return out

            fns["native"] = native
        return fns

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
        # results differ from torch's by the weight's quantization error
        Workload(f"quantized/qmatmul/{t}/b{b}", _qmatmul(t, b), tolerance=30.0)
        for t in QMATMUL_TYPES
        for b in (1, 64)
    ]
    + [
        Workload(f"quantized/qmatmul/{t}/b512", _qmatmul(t, 512), tolerance=30.0)
        for t in ("Q4_0", "Q8_0", "Q4_K", "Q6_K")
    ]
    + [
        Workload(f"quantized/qmatvec/{t}/{n}x{k}", _qmatvec(t, n, k), tolerance=30.0)
        for t in QMATVEC_TYPES
        for n, k in LLM_SHAPES
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


def _ms(seconds: float | None, digits: int = 2) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.{digits}f}"


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
        f"QMatMul, x (batch, {K}) @ W.T, W {N}x{K} (GB/s of weight bytes read); ratios are "
        "to workbench's f32 matmul",
        f"{'workload':22} {'QMatMul ms':>11} {'GB/s':>6} {'wb f32 ms':>10} {'torch ms':>9} "
        f"{'numpy path ms':>14} {'integer ms':>11} {'ratio':>6} {'before':>7} {'target':>7}",
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
        before, integer = r.median("numpy-path"), r.median("integer")
        batch = int(parts[3][1:])
        goal = f"{target(parts[2], batch):.2f}x" if parts[1] == "qmatmul" else "-"
        ok = (
            ""
            if goal == "-" or not ours or not f32
            else (" ok" if ours / f32 <= target(parts[2], batch) else " MISSED")
        )
        lines.append(
            f"{label:22} {_ms(ours):>11} {_gbps(N * gd.row_bytes(K), ours):>6} {_ms(f32):>10} "
            f"{_ms(torch_t):>9} {_ms(before):>14} {_ms(integer):>11} {_ratio(ours, f32):>6} "
            f"{_ratio(before, f32):>7} {goal:>7}{ok}"
        )
    vec = [r for r in results if r.name.startswith("quantized/qmatvec/")]
    if vec:
        lines += [
            "",
            "one token, x (1, k) @ W.T at LLM shapes; ratios to workbench's f32 matmul "
            "(native: the kernel alone, as the LLM calls it)",
            f"{'workload':26} {'QMatMul ms':>11} {'native ms':>10} {'GB/s':>6} {'wb f32 ms':>10} "
            f"{'torch ms':>9} {'QMatMul/f32':>12} {'native/f32':>11} {'native/torch':>13}",
        ]
    for r in vec:
        label = r.name.split("/", 2)[2]
        if r.skipped:
            lines.append(f"{label:26} skipped: {r.skipped}")
            continue
        t, shape = label.split("/")
        n, k = map(int, shape.split("x"))
        ours, native, f32, torch_t = (
            r.median(i) for i in ("workbench", "native", "numpy", "torch")
        )
        lines.append(
            f"{label:26} {_ms(ours, 3):>11} {_ms(native, 3):>10} "
            f"{_gbps(n * GgmlDType[t].row_bytes(k), native):>6} {_ms(f32, 3):>10} "
            f"{_ms(torch_t, 3):>9} "
            f"{_ratio(ours, f32):>12} {_ratio(native, f32):>11} {_ratio(native, torch_t):>13}"
        )
    lines.append("\nTimes are medians of interleaved repetitions; a ratio > 1 means slower.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_quantized")
    parser.add_argument("--quick", action="store_true", help="5 short repetitions")
    parser.add_argument("--filter", "-k", default="", help="substring of workload names")
    parser.add_argument("--threads", type=int, help="threads for BLAS, torch and workbench")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: process CPU time, steady on a busy machine (with --threads 1)",
    )
    args = parser.parse_args(argv)
    settings = Settings(repeats=5, min_time=0.01, warmup=1) if args.quick else Settings()
    settings.clock = args.clock
    env = environment(match_threads(args.threads))
    print(
        f"cpu: {env['processor']}; threads: BLAS {env['numpy_blas_threads']}, torch "
        f"{env['torch_threads']} (workbench's native kernels: the same); {args.clock} clock"
    )
    results = []
    for w in WORKLOADS:
        if args.filter in w.name:
            print(f"  {w.name} ...", file=sys.stderr, flush=True)
            results.append(run(w, settings))
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
