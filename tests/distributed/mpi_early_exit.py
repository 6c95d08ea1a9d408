"""Run under MPI by test_dist_mpi.py: rank 1 leaves at once; rank 0's collective must fail
within the timeout instead of waiting forever."""

import sys

import workbench as wb
from workbench import distributed as dist

comm = dist.init()  # the timeout comes from `run --timeout`
comm.barrier()
if comm.rank == 1:
    sys.exit(0)
comm.all_reduce(wb.ones(3))
print("rank 0: all_reduce returned without rank 1", flush=True)
