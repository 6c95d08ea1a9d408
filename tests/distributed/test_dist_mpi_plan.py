"""The MPI all_reduce plan (its cached direct MPI_Allreduce call, or MPI.buffer arguments for
mpi4py) on ``MPI.COMM_SELF``, in process.

With one rank the sum is the input itself, so numpy copies taken before each call are the
reference: a stale plan (an old buffer, another view's memory) would show as wrong values.
"""

import dataclasses
import gc
import re

import numpy as np
import pytest

import workbench as wb
from workbench.errors import DTypeError

MPI = pytest.importorskip("mpi4py.MPI")

from workbench.distributed import DistributedError, MPICommunicator  # noqa: E402


@pytest.fixture(scope="module", params=["direct", "mpi4py"])
def comm(request):
    communicator = MPICommunicator(MPI.COMM_SELF, timeout=None)
    if request.param == "mpi4py":
        communicator._direct_allreduce = None  # every plan calls mpi4py's Allreduce
    elif communicator._direct_allreduce is None:
        pytest.skip("no native module: no direct MPI_Allreduce")
    return communicator


def test_plan_follows_values_storages_and_views(comm):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(64).astype(np.float32)
    x, out = wb.from_numpy(a.copy()), wb.empty(64)
    for step in range(3):  # same x, values changed in place between calls
        x.numpy()[:] = a * step
        assert comm.all_reduce(x, out=out) is out
        np.testing.assert_array_equal(out.numpy(), a * step)
    b = rng.standard_normal(64).astype(np.float32)
    comm.all_reduce(wb.from_numpy(b.copy()), out=out)  # another storage into the same out
    np.testing.assert_array_equal(out.numpy(), b)
    whole = wb.from_numpy(rng.standard_normal(70).astype(np.float32))
    for start in (0, 3, 6):  # views of one storage: same storage, other layouts
        comm.all_reduce(whole.narrow(0, start, 64), out=out)
        np.testing.assert_array_equal(out.numpy(), whole.numpy()[start : start + 64])
    two = wb.from_numpy(b.reshape(8, 8).copy())
    out2 = wb.empty(8, 8)
    comm.all_reduce(two, out=out2)
    comm.all_reduce(two.reshape(8, 8), out=out2)  # a reshape: same storage, new layout
    np.testing.assert_array_equal(out2.numpy(), b.reshape(8, 8))
    big = wb.zeros(66)
    part = big.narrow(0, 1, 64)  # into a view: nothing written outside it
    comm.all_reduce(x, out=part)
    np.testing.assert_array_equal(big.numpy(), np.concatenate([[0], a * 2, [0]]))


def test_in_place_and_versions(comm):
    a = np.arange(32, dtype=np.float32)
    t = wb.from_numpy(a.copy())
    version = t._storage.version
    for _ in range(3):
        comm.all_reduce(t, out=t)
    np.testing.assert_array_equal(t.numpy(), a)
    assert t._storage.version == version + 3  # autograd sees every write
    t.numpy()[:] = -a
    assert comm.all_reduce(t, "max", out=t) is t
    np.testing.assert_array_equal(t.numpy(), -a)


def test_plans_go_with_their_out(comm):
    x = wb.ones(16)
    outs = [wb.empty(16) for _ in range(4)]
    for out in outs:
        comm.all_reduce(x, out=out)
    before = len(comm._plans)
    del outs, out
    gc.collect()
    assert len(comm._plans) <= before - 4


def test_errors_stay_clear_after_a_plan(comm):
    x, out = wb.ones(8), wb.empty(8)
    comm.all_reduce(x, out=out)  # a plan for out, then calls that must not use it
    with pytest.raises(DistributedError, match="all_reduce: out must match x"):
        comm.all_reduce(wb.ones(8, dtype=wb.f64), out=out)
    with pytest.raises(DistributedError, match="all_reduce: out must match x"):
        comm.all_reduce(wb.ones(9), out=out)
    with pytest.raises(DistributedError, match="x and out must be Tensors"):
        comm.all_reduce(np.ones(8, np.float32), out=out)
    with pytest.raises(DistributedError, match="out must be contiguous"):
        comm.all_reduce(wb.ones(2, 4), out=wb.empty(4, 2).transpose(0, 1))
    with pytest.raises(DTypeError, match="sum of a bool tensor"):
        comm.all_reduce(wb.ones(8, dtype=wb.bool_), out=wb.empty(8, dtype=wb.bool_))


def test_direct_call_is_mpis_allreduce_and_checks_its_arguments():
    from workbench.distributed.mpi_direct import resolve

    direct = resolve(MPI)
    if direct is None:
        pytest.skip("no native module: no direct MPI_Allreduce")
    a = np.arange(8, dtype=np.float32)
    b = np.full(8, -1, np.float32)
    args = direct.args(a, b, MPI.FLOAT, MPI.SUM, MPI.COMM_SELF)
    assert direct.call(*args) == 0
    np.testing.assert_array_equal(b, a)  # written by MPI, not by numpy
    with pytest.raises(TypeError, match="expected 8 arguments, found 3"):
        direct.call(*args[:3])
    with pytest.raises(ValueError, match="handle size of 4 or 8.*found handle size 2"):
        direct.call(args[0], 2, *args[2:])
    with pytest.raises(ValueError, match="count in"):
        direct.call(*args[:4], -1, *args[5:])


def test_an_mpi_error_code_is_a_distributed_error():
    # MPICH's PyPI build asserts on bad handles instead of returning a code, so the code comes
    # from a stand-in for MPI_Allreduce's caller.
    communicator = MPICommunicator(MPI.COMM_SELF, timeout=None)
    direct = communicator._direct_allreduce
    if direct is None:
        pytest.skip("no native module: no direct MPI_Allreduce")
    communicator._direct_allreduce = dataclasses.replace(direct, call=lambda *a: MPI.ERR_TYPE)
    message = re.escape(MPI.Get_error_string(MPI.ERR_TYPE))
    with pytest.raises(DistributedError, match=f"all_reduce on rank 0: {message}"):
        communicator.all_reduce(wb.ones(4), out=wb.empty(4))
