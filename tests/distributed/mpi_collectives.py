"""Run under MPI by test_dist_mpi.py: every collective against numpy, all dtypes, odd sizes.

Each rank builds every rank's inputs from the rank's seed, so it can compute the expected
result with numpy (float64 or int64 arithmetic, cast once) and compare its own output.
"""

import gc
import sys

import ml_dtypes
import numpy as np

import workbench as wb
from workbench import distributed as dist

comm = dist.init(timeout=120)
R, W = comm.rank, comm.world_size
failures: list[str] = []
checks = 0

DTYPES = [wb.bool_, wb.i8, wb.u8, wb.u32, wb.i16, wb.i32, wb.i64, wb.f16, wb.bf16, wb.f32, wb.f64]
SHAPES = [(), (1,), (7,), (3, 5), (1001,), (33, 101)]


def data(rank: int, shape, dtype) -> np.ndarray:
    rng = np.random.default_rng(1000 * rank + len(shape) * 31 + int(np.prod(shape)))
    if dtype.is_bool:
        return rng.random(shape) < 0.5
    if dtype.is_integer:
        hi = 200 if dtype is wb.u8 else 10_000
        lo = 0 if not dtype.is_signed else -hi
        return rng.integers(lo, hi, size=shape).astype(dtype.numpy)
    return (rng.standard_normal(shape) * 10).astype(dtype.numpy)


def check(name: str, got: wb.Tensor, want: np.ndarray, dtype, tol: float = 0.0) -> None:
    global checks
    checks += 1
    g = got.numpy()
    if got.dtype is not dtype or g.shape != want.shape:
        failures.append(f"{name}: got {got.dtype} {g.shape}, want {dtype} {want.shape}")
        return
    g64, w64 = g.astype(np.float64), want.astype(dtype.numpy).astype(np.float64)
    ok = np.allclose(g64, w64, rtol=tol, atol=0) if tol else np.array_equal(g64, w64)
    if not ok:
        failures.append(f"{name}: max diff {np.max(np.abs(g64 - w64)) if g64.size else 0}")


def exact(arrays, op):
    """Reduce in float64 / int64, then cast to the dtype once (integer sums wrap as MPI's)."""
    wide = [a.astype(np.float64 if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16
                     else np.int64) for a in arrays]  # fmt: skip
    return {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}[op](wide, axis=0)


for dtype in DTYPES:
    for shape in SHAPES:
        inputs = [data(r, shape, dtype) for r in range(W)]
        mine = wb.from_numpy(inputs[R])
        tag = f"{dtype.name}{list(shape)}"
        ops = ["max", "min"] if dtype.is_bool else ["sum", "max", "min"]
        if dtype.is_floating_point:
            ops.append("mean")
        for op in ops:
            want = exact(inputs, op)
            if dtype.is_bool:
                want = want.astype(bool)
            elif dtype.is_integer:
                want = want.astype(dtype.numpy)  # wraps like the MPI sum
            tol = 1e-6 if op == "mean" and dtype in (wb.f32, wb.f64) else 0.0
            tol = 4e-3 if op == "mean" and dtype in (wb.f16, wb.bf16) else tol
            check(f"all_reduce {op} {tag}", comm.all_reduce(mine, op), want, dtype, tol)
        work = comm.all_reduce(mine, ops[0], async_op=True)
        want_async = exact(inputs, ops[0]).astype(dtype.numpy)
        check(f"all_reduce async {tag}", work.wait(), want_async, dtype)
        if not dtype.is_bool:
            buf = wb.from_numpy(inputs[R].copy())
            comm.all_reduce(buf, "sum", out=buf)
            want = exact(inputs, "sum").astype(dtype.numpy)
            check(f"all_reduce in place {tag}", buf, want, dtype)
        check(f"broadcast root 1 {tag}", comm.broadcast(mine, root=W - 1), inputs[W - 1], dtype)
        if shape:
            want = np.concatenate(inputs, axis=0)
            check(f"all_gather {tag}", comm.all_gather(mine), want, dtype)
            want = np.concatenate(inputs, axis=-1)
            check(f"all_gather dim -1 {tag}", comm.all_gather(mine, dim=-1), want, dtype)
        if not dtype.is_bool and shape:
            big = [np.concatenate([a] * W, axis=-1) for a in inputs]  # last dim splits in W
            total = exact(big, "sum").astype(dtype.numpy)
            n = total.shape[-1] // W
            got = comm.reduce_scatter(wb.from_numpy(big[R]), "sum", dim=-1)
            check(f"reduce_scatter dim -1 {tag}", got, total[..., R * n : (R + 1) * n], dtype)
            big0 = [np.concatenate([a] * W, axis=0) for a in inputs]
            total = exact(big0, "max").astype(dtype.numpy)
            n = total.shape[0] // W
            got = comm.reduce_scatter(wb.from_numpy(big0[R]), "max", dim=0)
            check(f"reduce_scatter max dim 0 {tag}", got, total[R * n : (R + 1) * n], dtype)
        # send / recv around the ring
        if W > 1:
            if R % 2 == 0:
                comm.send(mine, (R + 1) % W)
                got = comm.recv(shape, dtype, (R - 1) % W)
            else:
                got = comm.recv(shape, dtype, (R - 1) % W)
                comm.send(mine, (R + 1) % W)
            check(f"send/recv {tag}", got, inputs[(R - 1) % W], dtype)

# A strided (non-contiguous) input is reduced by value.
x = wb.from_numpy(data(R, (6, 7), wb.f32)).transpose(0, 1)
want = exact([data(r, (6, 7), wb.f32).T for r in range(W)], "sum")
check("all_reduce transposed", comm.all_reduce(x), want, wb.f32)

# The input is left alone (functional ops).
before = x.numpy().copy()
comm.all_reduce(x)
checks += 1
if not np.array_equal(before, x.numpy()):
    failures.append("all_reduce modified its input")


# Repeated all_reduce into the same out reuses its arguments (a plan): each call must still
# see the values, arrays and views of that call, whatever changed in between.
def expect(name: str, got, arrays, op="sum", dtype=wb.f32) -> None:
    check(name, got, exact(arrays, op).astype(dtype.numpy), dtype)


inputs = [data(r, (257,), wb.f32) for r in range(W)]
x, out = wb.from_numpy(inputs[R].copy()), wb.empty(257)
for step in range(3):  # the same x, its values changed in place between calls
    x.numpy()[:] = inputs[R] * (step + 1)
    version = out._storage.version
    y = comm.all_reduce(x, out=out)
    checks += 1
    if y is not out or out._storage.version != version + 1:
        failures.append(f"plan step {step}: out not returned or its version not bumped")
    expect(f"plan step {step}", out, [a * (step + 1) for a in inputs])
# Results of ops share one cached layout object per shape: the arrays tell them apart.
x.numpy()[:] = inputs[R]
for k in (2.0, 3.0):
    expect(f"plan: x * {k} into the same out", comm.all_reduce(x * k, out=out),
           [a * np.float32(k) for a in inputs])  # fmt: skip
other = [data(r, (257,), wb.f32) + 5 for r in range(W)]
expect("plan: another x into the same out", comm.all_reduce(wb.from_numpy(other[R]), out=out),
       other)  # fmt: skip
expect("plan: max into the same out", comm.all_reduce(x, "max", out=out), inputs, "max")
out.numpy()[:] = other[R]
expect("plan: out in place", comm.all_reduce(out, out=out), other)
x.numpy()[:] = inputs[R]
expect("plan: back to x", comm.all_reduce(x, out=out), inputs)
ints = [data(r, (257,), wb.i32) for r in range(W)]
iout = wb.empty(257, dtype=wb.i32)
for step in range(2):
    expect(f"plan i32 {step}", comm.all_reduce(wb.from_numpy(ints[R]), out=iout), ints,
           dtype=wb.i32)  # fmt: skip
whole = wb.zeros(260)
part = whole.narrow(0, 3, 257)  # a contiguous view with an offset
for step in range(2):
    comm.all_reduce(x, out=part)
    expect(f"plan: into a view {step}", part, inputs)
    checks += 1
    if whole.numpy()[:3].any():
        failures.append("plan: an all_reduce into a view wrote outside it")
plans = len(comm._plans)
del out, part, iout
gc.collect()
checks += 1
if len(comm._plans) >= plans:  # a plan must not keep its out (and x) alive
    failures.append(f"plans not dropped with their out tensors: {plans} -> {len(comm._plans)}")

# A message of the wrong size is an error naming the call (MPI's truncation error included).
for sent, expected in ((8, 4), (3, 4)):
    if R == 0:
        comm.send(wb.ones(sent), 1)
    elif R == 1:
        checks += 1
        try:
            comm.recv(expected, wb.f32, 0)
            failures.append(f"recv of {sent} values into {expected} did not raise")
        except dist.DistributedError as e:
            if "recv on rank 1" not in str(e):
                failures.append(f"recv error does not name the call: {e}")

comm.barrier()
if failures:
    print(f"rank {R}: {len(failures)} of {checks} checks FAILED:\n  " + "\n  ".join(failures[:30]))
    sys.exit(1)
print(f"rank {R}: OK {checks} checks")
