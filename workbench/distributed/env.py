"""Where this process sits in the job, read from the launcher's environment.

Each launcher names the rank, the world size and the rank on the node its own way:

| launcher | rank | world size | local rank |
| --- | --- | --- | --- |
| Open MPI | OMPI_COMM_WORLD_RANK | OMPI_COMM_WORLD_SIZE | OMPI_COMM_WORLD_LOCAL_RANK |
| MPICH, Intel MPI (hydra) | PMI_RANK | PMI_SIZE | MPI_LOCALRANKID |
| Slurm srun | SLURM_PROCID | SLURM_NTASKS | SLURM_LOCALID |
| torchrun-style | RANK | WORLD_SIZE | LOCAL_RANK |

The first launcher whose variables are set wins, in that order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import DistributedError

_LAUNCHERS = (
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
)
MPI_LAUNCHERS = ("openmpi", "mpich")


@dataclass(frozen=True)
class LaunchInfo:
    """This process's place in the job: ``launcher`` is None when started on its own."""

    launcher: str | None
    rank: int
    world_size: int
    local_rank: int
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def under_mpi(self) -> bool:
        """Started by an MPI launcher (or by Slurm, whose srun can wire up MPI through PMI)."""
        return self.launcher in (*MPI_LAUNCHERS, "slurm")


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise DistributedError(
            f"launcher variable {name}={env[name]!r} is not an integer"
        ) from None


def launch_info(environ: Mapping[str, str] | None = None) -> LaunchInfo:
    """Rank, world size and local rank from the launcher's variables (1 process if none)."""
    env = os.environ if environ is None else environ
    port = env.get("MASTER_PORT")
    master = {"master_addr": env.get("MASTER_ADDR"), "master_port": int(port) if port else None}
    for launcher, rank, size, local in _LAUNCHERS:
        if rank in env and size in env:
            info = LaunchInfo(
                launcher,
                _int(env, rank),
                _int(env, size),
                _int(env, local) if local in env else 0,
                **master,
            )
            if not 0 <= info.rank < info.world_size:
                raise DistributedError(
                    f"launcher {launcher}: rank {info.rank} is outside world size "
                    f"{info.world_size} ({rank}, {size})"
                )
            return info
    return LaunchInfo(None, 0, 1, 0, **master)
