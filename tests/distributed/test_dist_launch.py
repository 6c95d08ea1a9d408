"""Launcher environments, ``init``'s choices and errors, the TCP rendezvous, the run command."""

import socket
import sys
import threading

import pytest

from workbench import distributed as dist
from workbench.distributed import run
from workbench.distributed import world as init_module
from workbench.distributed.store import broadcast_bytes


@pytest.mark.parametrize(
    "env, want",
    [
        ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
          "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, ("openmpi", 3, 8, 1)),
        ({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"}, ("mpich", 1, 2, 1)),
        ({"SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_LOCALID": "2"}, ("slurm", 5, 6, 2)),
        ({"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0"}, ("torchrun", 0, 4, 0)),
        # srun starting MPI ranks sets both: the MPI launcher's names win.
        ({"PMI_RANK": "2", "PMI_SIZE": "4", "SLURM_PROCID": "2", "SLURM_NTASKS": "4"},
         ("mpich", 2, 4, 0)),
        ({}, (None, 0, 1, 0)),
    ],
)  # fmt: skip
def test_launch_info(env, want):
    info = dist.launch_info(env)
    assert (info.launcher, info.rank, info.world_size, info.local_rank) == want


def test_launch_info_errors():
    with pytest.raises(dist.DistributedError, match="RANK='x' is not an integer"):
        dist.launch_info({"RANK": "x", "WORLD_SIZE": "2"})
    with pytest.raises(dist.DistributedError, match="rank 4 is outside world size 2"):
        dist.launch_info({"RANK": "4", "WORLD_SIZE": "2"})


def test_init_errors_say_what_is_missing(monkeypatch):
    monkeypatch.setattr(init_module, "_mpi_available", lambda: False)
    with pytest.raises(dist.DistributedError, match="pip install mpi4py mpich.*NCCL"):
        dist.init(environ={})
    monkeypatch.setattr(init_module, "_mpi_available", lambda: True)
    with pytest.raises(dist.DistributedError, match="torchrun-style launcher"):
        dist.init(environ={"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(dist.DistributedError, match="unknown backend 'gloo'"):
        dist.init("gloo", environ={})
    monkeypatch.setenv("WORKBENCH_NCCL_LIBRARY", "/nonexistent/libnccl.so.2")
    with pytest.raises(dist.DistributedError, match="NCCL library not found"):
        dist.init(device="cuda", environ={})


def test_get_communicator_before_init():
    dist.set_communicator(None)
    with pytest.raises(dist.DistributedError, match="call wb.distributed.init"):
        dist.get_communicator()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tcp_rendezvous_hands_rank_0s_bytes_to_all():
    port, payload = _free_port(), bytes(range(256)) * 2 + b"\x00tail"
    got = [None] * 3

    def rank(r):
        got[r] = broadcast_bytes(payload if r == 0 else None, r, 3, "127.0.0.1", port, 30)

    threads = [threading.Thread(target=rank, args=(r,)) for r in (1, 2, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got == [payload] * 3


def test_tcp_rendezvous_times_out():
    with pytest.raises(dist.CommunicatorTimeout, match="could not reach rank 0"):
        broadcast_bytes(None, 1, 2, "127.0.0.1", _free_port(), timeout=0.3)


def test_run_command_line(tmp_path):
    fake = tmp_path / "mpiexec"
    fake.write_text("#!/bin/sh\necho 'HYDRA build details:'\n")
    fake.chmod(0o755)
    cmd = run.command(3, ["train.py", "--lr", "1"], hostfile="hosts", mpiexec=str(fake))
    assert cmd == [str(fake), "-n", "3", "-f", "hosts", sys.executable, "-m", "mpi4py",
                   "train.py", "--lr", "1"]  # fmt: skip
    fake.write_text("#!/bin/sh\necho 'mpiexec (Open MPI) 5.0.11'\n")
    cmd = run.command(2, ["-m", "pkg.train"], hostfile="hosts", mpiexec=str(fake))
    assert cmd[3:5] == ["--hostfile", "hosts"] and cmd[-2:] == ["-m", "pkg.train"]
    assert run.find_mpiexec({"WORKBENCH_MPIEXEC": "/opt/mpi/bin/mpiexec"}) == "/opt/mpi/bin/mpiexec"
    with pytest.raises(dist.DistributedError, match="-n must be >= 1"):
        run.command(0, ["x.py"], mpiexec=str(fake))
