"""``init()``: the communicator for this job, chosen from the launcher and the device.

    comm = wb.distributed.init()                  # MPI on the CPU under mpiexec / srun
    comm = wb.distributed.init(device="cuda")     # NCCL, one GPU per local rank

The communicator also becomes the default one (``get_communicator()``) that
``DistributedDataParallel``, the samplers and the tensor-parallel layers use when none is given.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..device import Device
from .communicator import Communicator
from .env import LaunchInfo, launch_info
from .errors import DistributedError

_CURRENT: list[Communicator] = []
BACKENDS = ("mpi", "nccl")


def _mpi_available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def init(
    backend: str | None = None,
    device: Device | str | None = None,
    timeout: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> Communicator:
    """Join the job the launcher started and return its communicator.

    ``backend`` None picks NCCL when ``device`` is a CUDA device and MPI otherwise. ``timeout``
    (seconds) bounds each collective (default ``WORKBENCH_DIST_TIMEOUT`` or 1800). Raises
    ``DistributedError`` naming what is missing when neither backend can run.
    """
    info = launch_info(environ)
    kind = Device(device).kind if device is not None else "cpu"
    if backend is None:
        backend = "nccl" if kind == "cuda" else "mpi"
    if backend not in BACKENDS:
        raise DistributedError(f"init: unknown backend {backend!r}; expected one of {BACKENDS}")
    comm = _nccl(info, timeout) if backend == "nccl" else _mpi(info, kind, timeout)
    _CURRENT[:] = [comm]
    return comm


def _mpi(info: LaunchInfo, kind: str, timeout: float | None) -> Communicator:
    if not _mpi_available():
        raise DistributedError(
            "init: the MPI backend needs mpi4py and an MPI library (pip install mpi4py mpich); "
            "CUDA tensors can use NCCL instead: init(device='cuda')"
            + (f" (the job was started by {info.launcher})" if info.launcher else "")
        )
    if info.launcher == "torchrun":
        raise DistributedError(
            "init: started by a torchrun-style launcher (RANK/WORLD_SIZE), which does not start "
            "MPI; launch with `python -m workbench.distributed.run -n N script.py` (mpiexec), "
            "srun, or use NCCL for CUDA tensors: init(device='cuda')"
        )
    from .mpi import DEFAULT_TIMEOUT, MPICommunicator

    comm = MPICommunicator(timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
                           device_kind=kind)  # fmt: skip
    if info.launcher is not None and comm.world_size != info.world_size:
        raise DistributedError(
            f"init: {info.launcher} says the world has {info.world_size} ranks but MPI sees "
            f"{comm.world_size}: is mpi4py using the MPI library of the launcher?"
        )
    return comm


def _nccl(info: LaunchInfo, timeout: float | None) -> Communicator:
    from ._nccl_lib import NcclLibrary
    from .mpi import DEFAULT_TIMEOUT
    from .nccl import NCCLCommunicator
    from .store import broadcast_bytes

    lib = NcclLibrary()
    uid = lib.unique_id() if info.rank == 0 else None
    if info.world_size == 1:
        pass
    elif info.under_mpi and _mpi_available():
        from mpi4py import MPI

        buf = bytearray(uid or bytes(128))
        MPI.COMM_WORLD.Bcast([buf, MPI.BYTE], root=0)
        uid = bytes(buf)
    elif info.master_addr and info.master_port:
        wait = DEFAULT_TIMEOUT if timeout is None else timeout
        uid = broadcast_bytes(
            uid, info.rank, info.world_size, info.master_addr, info.master_port, wait
        )
    else:
        raise DistributedError(
            f"init: NCCL needs the unique id from rank 0: launch under MPI (with mpi4py "
            f"installed) or set MASTER_ADDR and MASTER_PORT (launcher: {info.launcher})"
        )
    return NCCLCommunicator(info.rank, info.world_size, uid, info.local_rank, lib)


def get_communicator() -> Communicator:
    """The communicator of the last ``init()``."""
    if not _CURRENT:
        raise DistributedError("no communicator yet: call wb.distributed.init() first")
    return _CURRENT[0]


def is_initialized() -> bool:
    return bool(_CURRENT)


def set_communicator(comm: Communicator | None) -> None:
    """Make ``comm`` the default (None forgets it and closes nothing)."""
    _CURRENT[:] = [] if comm is None else [comm]
