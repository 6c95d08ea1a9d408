"""Distributed benchmarks on 2 MPI ranks (this machine's CPU):

1. ``all_reduce`` bus bandwidth, f32 sum, 1 KB to 256 MB: workbench's MPI communicator (into a
   preallocated ``out``, as the peers write in place), raw mpi4py ``Allreduce`` on numpy
   arrays, and ``torch.distributed`` (gloo) — all three in one run, interleaved. Bus bandwidth
   is NCCL's measure: 2·(W-1)/W · bytes / time. Target: workbench >= 0.95× raw mpi4py.
   The ratio is paired per repeat (median and quartiles printed): the load on a shared
   machine changes between repeats more than between neighbouring calls.
2. What the workbench call adds to mpi4py's per call, on ``MPI.COMM_SELF`` (CPU time): the
   part of the small-message gap that is ours rather than the other rank's.
3. DDP training step (forward, backward with the bucketed all-reduce, AdamW) of an MLP at
   world size 2 (half of the global batch per rank) against the single-process step on the
   whole batch, alternated in the same run.

    python -m benchmarks.bench_distributed            # launches itself under mpiexec -n 2
    python -m benchmarks.bench_distributed --quick

The benchmark runner (``python -m benchmarks``) has no workload here: this needs two
processes. Collectives wait for each other, so times are wall clock on rank 0 (after a barrier).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

WORKLOADS: list = []  # nothing for the single-process runner
SIZES = [1 << k for k in range(10, 29, 2)]  # 1 KiB .. 256 MiB


def _time(fn, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def _number(nbytes: int, quick: bool) -> int:
    """Calls per timed batch: many for small messages, few for large ones."""
    n = max(1, int(4e6 / max(nbytes, 1024)))  # about 4 MB moved per batch
    return min(n, 50 if quick else 200)


def _bus_gbps(nbytes: int, seconds: float, world: int) -> float:
    return 2 * (world - 1) / world * nbytes / seconds / 1e9


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return q[0], statistics.median(values), q[-1]


def _peers(comm, mpi_comm, dist_torch, n: int) -> dict:
    """The three all-reduce calls on ``n`` f32 values: each writes a separate output (or, for
    gloo, its tensor in place), as a training loop reusing its buffers would."""
    import torch
    from mpi4py import MPI

    import workbench as wb

    x, out = wb.ones(n), wb.empty(n)
    src, dst = np.ones(n, np.float32), np.empty(n, np.float32)
    t = torch.ones(n)
    fns = {
        "workbench": lambda: comm.all_reduce(x, out=out),
        "mpi4py": lambda: mpi_comm.Allreduce(src, dst, MPI.SUM),
    }
    if dist_torch is not None:
        fns["torch_gloo"] = lambda: dist_torch.all_reduce(t)
    return fns


def bench_all_reduce(comm, mpi_comm, dist_torch, quick: bool) -> list[dict]:
    """Wall clock per call on rank 0, interleaved; the ratio is taken per repeat (the peers
    ran back to back, under the same load), then its median and quartiles over the repeats."""
    repeats = 5 if quick else 15
    rows = []
    for nbytes in SIZES:
        fns = _peers(comm, mpi_comm, dist_torch, nbytes // 4)
        number = _number(nbytes, quick)
        times = {k: [] for k in fns}
        for fn in fns.values():
            fn()
        for rep in range(repeats):
            order = list(fns)
            order = order[rep % 3 :] + order[: rep % 3]
            for name in order:
                mpi_comm.Barrier()
                times[name].append(_time(fns[name], number))
        w = mpi_comm.Get_size()
        row = {"bytes": nbytes, "repeats": repeats}
        for name, ts in times.items():
            row[f"{name}_s"] = statistics.median(ts)
            row[f"{name}_busbw_GBps"] = _bus_gbps(nbytes, row[f"{name}_s"], w)
        for peer in ("mpi4py", "torch_gloo"):
            ratios = [p / m for p, m in zip(times[peer], times["workbench"], strict=True)]
            row[f"workbench_vs_{peer}_q"] = _quartiles(ratios)  # bandwidth ratio
            row[f"workbench_vs_{peer}"] = row[f"workbench_vs_{peer}_q"][1]
        rows.append(row)
        del fns
    return rows


def bench_call_overhead(quick: bool) -> list[dict]:
    """What the workbench call adds to mpi4py's: the same two calls on ``MPI.COMM_SELF`` (a
    local copy, no other rank to wait for), CPU time of this process, interleaved."""
    from mpi4py import MPI

    from workbench.distributed import MPICommunicator

    comm = MPICommunicator(MPI.COMM_SELF)
    repeats, number = (5, 2000) if quick else (15, 20000)
    rows = []
    for nbytes in (1 << 10,):  # larger copies vary with where the buffers lie, not with us
        fns = _peers(comm, MPI.COMM_SELF, None, nbytes // 4)
        times = {k: [] for k in fns}
        for rep in range(repeats):
            for name in list(fns)[rep % 2 :] + list(fns)[: rep % 2]:
                start = time.process_time()
                for _ in range(number):
                    fns[name]()
                times[name].append((time.process_time() - start) / number)
        diffs = [w - m for w, m in zip(times["workbench"], times["mpi4py"], strict=True)]
        rows.append({"bytes": nbytes, **{f"{k}_us": statistics.median(v) * 1e6
                                         for k, v in times.items()},
                     "overhead_us_q": tuple(d * 1e6 for d in _quartiles(diffs))})  # fmt: skip
    return rows


def bench_ddp(comm, mpi_comm, quick: bool) -> dict:
    import workbench as wb
    from workbench import distributed as dist
    from workbench import nn, optim

    sizes, batch = (256, 1024, 1024, 10), 256
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)

    def mlp():
        wb.manual_seed(0)
        return nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.ReLU(),
                             nn.Linear(sizes[1], sizes[2]), nn.ReLU(),
                             nn.Linear(sizes[2], sizes[3]))  # fmt: skip

    single = mlp()
    single_opt = optim.AdamW(single.parameters(), lr=1e-3)
    ddp = dist.DistributedDataParallel(mlp(), comm)
    ddp_opt = optim.AdamW(ddp.parameters(), lr=1e-3)
    half = batch // comm.world_size
    xl = wb.from_numpy(x[comm.rank * half : (comm.rank + 1) * half])
    yl = wb.from_numpy(y[comm.rank * half : (comm.rank + 1) * half])
    xa, ya = wb.from_numpy(x), wb.from_numpy(y)

    def step(model, opt, xb, yb):
        opt.backward_step(nn.functional.cross_entropy(model(xb), yb))

    repeats, number = (3, 3) if quick else (7, 5)
    single_t, ddp_t = [], []
    step(ddp, ddp_opt, xl, yl)
    if comm.rank == 0:
        step(single, single_opt, xa, ya)
    for _ in range(repeats):
        mpi_comm.Barrier()
        if comm.rank == 0:  # the other rank waits: one process, whole batch
            single_t.append(_time(lambda: step(single, single_opt, xa, ya), number))
        mpi_comm.Barrier()
        ddp_t.append(_time(lambda: step(ddp, ddp_opt, xl, yl), number))
    ddp.close()
    if comm.rank:
        return {}
    s, d = statistics.median(single_t), statistics.median(ddp_t)
    return {
        "model": f"MLP {sizes}, global batch {batch}, AdamW",
        "single_process_step_s": s,
        "ddp_world2_step_s": d,
        "speedup": s / d,
        "buckets": len(ddp.buckets),
    }


def worker(quick: bool, json_path: str | None) -> None:
    import torch
    import torch.distributed as dist_torch
    from mpi4py import MPI

    from workbench import distributed as dist

    torch.set_num_threads(1)
    mpi_comm = MPI.COMM_WORLD
    rank, world = mpi_comm.Get_rank(), mpi_comm.Get_size()
    port = None
    if rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = mpi_comm.bcast(port, root=0)
    dist_torch.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    comm = dist.init()
    rows = bench_all_reduce(comm, mpi_comm, dist_torch, quick)
    ddp = bench_ddp(comm, mpi_comm, quick)
    dist_torch.destroy_process_group()
    if rank:
        return
    overhead = bench_call_overhead(quick)
    from benchmarks import machine

    print("\n".join(machine.describe()))
    print(f"all_reduce f32 sum, {world} ranks, bus bandwidth GB/s (median of "
          f"{rows[0]['repeats']} interleaved repeats), wall clock on rank 0")  # fmt: skip
    print(f"{'size':>9} {'workbench':>10} {'mpi4py':>10} {'gloo':>10} "
          f"{'wb/mpi4py [quartiles]':>24} {'wb/gloo':>8}")  # fmt: skip
    for r in rows:
        size = r["bytes"]
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        lo, mid, hi = r["workbench_vs_mpi4py_q"]
        print(
            f"{label:>9} {r['workbench_busbw_GBps']:10.3f} {r['mpi4py_busbw_GBps']:10.3f} "
            f"{r['torch_gloo_busbw_GBps']:10.3f} {mid:9.2f}x [{lo:.2f}-{hi:.2f}]   "
            f"{r['workbench_vs_torch_gloo']:7.2f}x"
        )
    worst = min(r["workbench_vs_mpi4py"] for r in rows)
    print(f"target workbench >= 0.95x raw mpi4py: worst size {worst:.2f}x "
          f"({'ok' if worst >= 0.95 else 'MISSED'})")  # fmt: skip
    print(
        "per-call cost on MPI.COMM_SELF (CPU time, median): workbench all_reduce(x, out=out) "
        "vs mpi4py Allreduce"
    )
    for r in overhead:
        lo, mid, hi = r["overhead_us_q"]
        print(f"{r['bytes'] >> 10:>5} KiB  workbench {r['workbench_us']:.2f} us, mpi4py "
              f"{r['mpi4py_us']:.2f} us: +{mid:.2f} us [{lo:.2f}-{hi:.2f}]")  # fmt: skip
    print(
        f"\nDDP step ({ddp['model']}): one process {ddp['single_process_step_s'] * 1e3:.1f} ms, "
        f"2 ranks {ddp['ddp_world2_step_s'] * 1e3:.1f} ms ({ddp['speedup']:.2f}x, "
        f"{ddp['buckets']} buckets)"
    )
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"all_reduce": rows, "call_overhead": overhead, "ddp": ddp}, f, indent=2)
        print(f"wrote {json_path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_distributed")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.quick, args.json)
        return 0
    from workbench.distributed.run import command

    extra = ["--quick"] * args.quick + (["--json", args.json] if args.json else [])
    cmd = command(2, ["-m", "benchmarks.bench_distributed", "--worker", *extra])
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # One thread per rank (the ranks share the cores), unless told otherwise.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(name, "1")
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
