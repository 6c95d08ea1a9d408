"""workbench.distributed: communicators, data-parallel training, tensor-parallel inference.

    import workbench as wb
    from workbench import distributed as dist

    comm = dist.init()                 # under mpiexec / srun: MPI on the CPU, NCCL on CUDA
    model = dist.DistributedDataParallel(model, comm)
    for xb, yb in dist.DistributedBatcher(x, y, batch_size=32, shuffle=True, comm=comm): ...

Launch with ``python -m workbench.distributed.run -n 2 train.py`` (mpiexec underneath), or
from a notebook through ipyparallel's MPI engines. ``run_threads(n, fn)`` runs ``fn(comm)`` on
``n`` in-process thread ranks (tests, quick experiments).

The MPI and NCCL backends are imported only when used: mpi4py and libnccl are optional.
"""

from .communicator import Communicator, ReduceOp, Work
from .ddp import DistributedDataParallel
from .env import LaunchInfo, launch_info
from .errors import CommunicatorTimeout, DistributedError
from .fake import FakeCommunicator, FakeWorld, run_threads
from .sampler import DistributedBatcher
from .shard import Shard, ShardedVarBuilder, shard_qtensor, shard_tensor
from .tensor_parallel import ColumnParallelLinear, RowParallelLinear, TensorParallel, shard_linear
from .world import get_communicator, init, is_initialized, set_communicator


def __getattr__(name: str):
    # The backends load their libraries on import: only when asked for.
    if name == "MPICommunicator":
        from .mpi import MPICommunicator

        return MPICommunicator
    if name == "NCCLCommunicator":
        from .nccl import NCCLCommunicator

        return NCCLCommunicator
    raise AttributeError(f"module 'workbench.distributed' has no attribute {name!r}")


__all__ = [
    "ColumnParallelLinear", "Communicator", "CommunicatorTimeout", "DistributedBatcher",
    "DistributedDataParallel", "DistributedError", "FakeCommunicator", "FakeWorld", "LaunchInfo",
    "MPICommunicator", "NCCLCommunicator", "ReduceOp", "RowParallelLinear", "Shard",
    "ShardedVarBuilder", "TensorParallel", "Work", "get_communicator", "init", "is_initialized",
    "launch_info", "run_threads", "set_communicator", "shard_linear", "shard_qtensor",
    "shard_tensor",
]  # fmt: skip
