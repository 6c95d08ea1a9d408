"""Distributed benchmarks on 2 MPI ranks (this machine's CPU), one command, one table:

    python -m benchmarks.bench_distributed              # launches itself under mpiexec -n 2
    python -m benchmarks.bench_distributed --quick      # fewer repeats (a smoke run)
    python -m benchmarks.bench_distributed --repeats 31 --json out.json

1. ``all_reduce`` bus bandwidth, f32 sum, 1 KiB to 256 MiB. Five calls, in one run,
   interleaved (their order rotates every repeat): workbench's MPI communicator into a
   preallocated ``out`` and in place (``out=x``), raw mpi4py ``Allreduce`` on numpy arrays
   (bare arrays, as users call it) into a second array and with ``MPI.IN_PLACE``, and
   ``torch.distributed`` (gloo, in place). Bus bandwidth is NCCL's measure,
   2·(W-1)/W · bytes / time. Target: workbench >= 0.95x raw mpi4py at every size.
   A sample is one batch of calls after a barrier, timed with ``MPI.Wtime`` on every rank;
   its time is the slowest rank's. Ratios are paired per repeat (the two calls compared ran
   back to back, under the same load) and reported as median [quartiles] over the repeats.
2. The per-call cost of the workbench call and of mpi4py's alone on ``MPI.COMM_SELF`` (a local
   copy, no other rank to wait for; CPU time of this process, interleaved; best batch and
   median): the part of the small-message gap that is ours rather than the other rank's.
3. DDP training step (forward, backward with the bucketed all-reduce, AdamW) of an MLP at
   world size 2 (half of the global batch per rank) against the single-process step on the
   whole batch, alternated in the same run.

On a loaded machine the small sizes measure the scheduler (a rank waits for the other to
get a core), not the call: read the quartiles, and part 2, before the medians.
The benchmark runner (``python -m benchmarks``) has no workload here: this needs two
processes.
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
PEERS = ("workbench", "mpi4py", "workbench_inplace", "mpi4py_inplace", "torch_gloo")
PAIRS = (("workbench", "mpi4py"), ("workbench_inplace", "mpi4py_inplace"),
         ("workbench", "torch_gloo"))  # fmt: skip


def _number(nbytes: int, quick: bool) -> int:
    """Calls per timed batch: about 4 MB moved (at least one call, at most 200)."""
    return max(1, min(int(4e6 / max(nbytes, 1024)), 50 if quick else 200))


def _time(fn, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def _bus_gbps(nbytes: int, seconds: float, world: int) -> float:
    return 2 * (world - 1) / world * nbytes / seconds / 1e9


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return q[0], statistics.median(values), q[-1]


def _calls(comm, mpi_comm, dist_torch, n: int) -> dict:
    """The all-reduce calls on ``n`` f32 values, each on its own buffers, reused from call
    to call as a training loop would."""
    import torch
    from mpi4py import MPI

    import workbench as wb

    x, out, inplace = wb.ones(n), wb.empty(n), wb.ones(n)
    src, dst, own = np.ones(n, np.float32), np.empty(n, np.float32), np.ones(n, np.float32)
    fns = {
        "workbench": lambda: comm.all_reduce(x, out=out),
        "mpi4py": lambda: mpi_comm.Allreduce(src, dst, MPI.SUM),
        "workbench_inplace": lambda: comm.all_reduce(inplace, out=inplace),
        "mpi4py_inplace": lambda: mpi_comm.Allreduce(MPI.IN_PLACE, own, MPI.SUM),
    }
    if dist_torch is not None:
        t = torch.ones(n)
        fns["torch_gloo"] = lambda: dist_torch.all_reduce(t)
    return fns


def _sample(fn, number: int, mpi_comm) -> float:
    """Seconds per call of one batch: every rank starts after a barrier, the slowest counts."""
    from mpi4py import MPI

    mpi_comm.Barrier()
    start = MPI.Wtime()
    for _ in range(number):
        fn()
    mine = (MPI.Wtime() - start) / number
    return mpi_comm.allreduce(mine, op=MPI.MAX)


def bench_all_reduce(comm, mpi_comm, dist_torch, repeats: int, quick: bool) -> list[dict]:
    rows = []
    world = mpi_comm.Get_size()
    for nbytes in SIZES:
        fns = _calls(comm, mpi_comm, dist_torch, nbytes // 4)
        number = _number(nbytes, quick)
        times: dict[str, list[float]] = {k: [] for k in fns}
        for fn in fns.values():  # warm up: first-touch pages, the plan, gloo's buffers
            _sample(fn, 1, mpi_comm)
        names = list(fns)
        for rep in range(repeats):
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                times[name].append(_sample(fns[name], number, mpi_comm))
        row: dict = {"bytes": nbytes, "repeats": repeats, "calls_per_sample": number}
        for name, ts in times.items():
            row[f"{name}_s"] = statistics.median(ts)
            row[f"{name}_busbw_GBps"] = _bus_gbps(nbytes, row[f"{name}_s"], world)
        for ours, peer in PAIRS:
            if peer in times:  # bandwidth ratio = time ratio, per repeat
                ratios = [p / w for p, w in zip(times[peer], times[ours], strict=True)]
                row[f"{ours}_vs_{peer}_q"] = _quartiles(ratios)
        rows.append(row)
        del fns
    return rows


def bench_call_overhead(quick: bool) -> list[dict]:
    """The calls of ``_calls`` on ``MPI.COMM_SELF`` (a local copy, no other rank to wait
    for), CPU time of this process, interleaved: per call, the best batch and the median."""
    from mpi4py import MPI

    from workbench.distributed import MPICommunicator

    comm = MPICommunicator(MPI.COMM_SELF)
    repeats, number = (5, 2000) if quick else (15, 20000)
    rows = []
    for nbytes in (1 << 10, 1 << 16):
        fns = _calls(comm, MPI.COMM_SELF, None, nbytes // 4)
        times: dict[str, list[float]] = {k: [] for k in fns}
        names = list(fns)
        for rep in range(repeats):
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                fn = fns[name]
                start = time.process_time()
                for _ in range(number):
                    fn()
                times[name].append((time.process_time() - start) / number)
        rows.append({"bytes": nbytes, **{f"{k}_us": (min(v) * 1e6, statistics.median(v) * 1e6)
                                         for k, v in times.items()}})  # fmt: skip
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


def _label(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def report(rows: list[dict], overhead: list[dict], ddp: dict, world: int) -> list[str]:
    """The printed table (rows from bench_all_reduce, overhead, ddp)."""
    lines = [
        f"all_reduce f32 sum, {world} ranks: bus bandwidth GB/s, median of {rows[0]['repeats']} "
        "interleaved samples (MPI.Wtime, slowest rank); ratio = workbench bandwidth / peer's, "
        "median [quartiles] of per-repeat pairs",
        f"{'size':>8} {'wb out=':>9} {'mpi4py':>9} {'wb/mpi4py':>20}   {'wb in pl.':>9} "
        f"{'IN_PLACE':>9} {'wb/mpi4py in pl.':>20}   {'gloo':>8} {'wb/gloo':>8}",
    ]

    def ratio(row, ours, peer):
        lo, mid, hi = row[f"{ours}_vs_{peer}_q"]
        return f"{mid:5.2f}x [{lo:.2f}-{hi:.2f}]"

    for r in rows:
        bw = {k[: -len("_busbw_GBps")]: v for k, v in r.items() if k.endswith("_busbw_GBps")}
        gloo = "torch_gloo" in bw
        lines.append(
            f"{_label(r['bytes']):>8} {bw['workbench']:9.3g} {bw['mpi4py']:9.3g} "
            f"{ratio(r, 'workbench', 'mpi4py'):>20}   {bw['workbench_inplace']:9.3g} "
            f"{bw['mpi4py_inplace']:9.3g} {ratio(r, 'workbench_inplace', 'mpi4py_inplace'):>20}"
            + (f"   {bw['torch_gloo']:8.3g} {r['workbench_vs_torch_gloo_q'][1]:7.2f}x"
               if gloo else "")
        )  # fmt: skip
    for ours, peer in PAIRS[:2]:
        worst = min(rows, key=lambda r: r[f"{ours}_vs_{peer}_q"][1])
        mid = worst[f"{ours}_vs_{peer}_q"][1]
        lines.append(
            f"target {ours} >= 0.95x {peer}: lowest median {mid:.2f}x at "
            f"{_label(worst['bytes'])} ({'ok' if mid >= 0.95 else 'MISSED'}; "
            f"{sum(r[f'{ours}_vs_{peer}_q'][1] >= 0.95 for r in rows)} of {len(rows)} sizes)"
        )
    lines.append(
        "per-call cost on MPI.COMM_SELF, one process, CPU time in us (best batch / median):"
    )
    names = [k[:-3] for k in overhead[0] if k.endswith("_us")]
    lines.append(f"{'size':>8} " + " ".join(f"{n:>19}" for n in names))
    for r in overhead:
        cells = " ".join(f"{r[n + '_us'][0]:9.2f}/{r[n + '_us'][1]:<9.2f}" for n in names)
        lines.append(f"{_label(r['bytes']):>8} {cells}")
    if ddp:
        lines.append(
            f"DDP step ({ddp['model']}): one process {ddp['single_process_step_s'] * 1e3:.1f} "
            f"ms, 2 ranks {ddp['ddp_world2_step_s'] * 1e3:.1f} ms ({ddp['speedup']:.2f}x, "
            f"{ddp['buckets']} buckets)"
        )
    return lines


def worker(quick: bool, repeats: int | None, json_path: str | None) -> None:
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
    repeats = repeats or (5 if quick else 15)
    rows = bench_all_reduce(comm, mpi_comm, dist_torch, repeats, quick)
    ddp = bench_ddp(comm, mpi_comm, quick)
    dist_torch.destroy_process_group()
    if rank:
        return
    overhead = bench_call_overhead(quick)
    from benchmarks import machine

    lines = [*machine.describe(), *report(rows, overhead, ddp, world)]
    print("\n".join(lines), flush=True)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"all_reduce": rows, "call_overhead": overhead, "ddp": ddp}, f, indent=2)
        print(f"wrote {json_path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_distributed")
    parser.add_argument("--quick", action="store_true", help="fewer repeats and calls")
    parser.add_argument("--repeats", type=int, help="samples per call and size (default 15)")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.quick, args.repeats, args.json)
        return 0
    from workbench.distributed.run import command

    extra = ["--quick"] * args.quick + (["--json", args.json] if args.json else [])
    extra += ["--repeats", str(args.repeats)] if args.repeats else []
    cmd = command(2, ["-m", "benchmarks.bench_distributed", "--worker", *extra])
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # One thread per rank (the ranks share the cores), unless told otherwise.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(name, "1")
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
