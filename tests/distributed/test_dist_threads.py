"""In-process thread ranks: collectives, DDP, the sampler and tensor parallelism.

The same checks run across processes under MPI in test_dist_mpi.py; these are the fast ones
and cover world sizes other than 2.
"""

import numpy as np
import pytest
from dist_models import (
    BATCH,
    D,
    T,
    TPBlock,
    block_reference,
    block_weights,
    dataset,
    mlp,
    train,
    train_reference,
)

import workbench as wb
from workbench import distributed as dist
from workbench.errors import DTypeError, ShapeError


@pytest.mark.parametrize("world", [1, 3])
def test_collectives_match_numpy(world):
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((6, 5)).astype(np.float32) for _ in range(world)]

    def body(comm):
        x = wb.from_numpy(inputs[comm.rank].copy())  # the in-place check writes x
        return {
            "sum": comm.all_reduce(x).numpy(),
            "mean": comm.all_reduce(x, "mean").numpy(),
            "max": comm.all_reduce(x, dist.ReduceOp.MAX).numpy(),
            "min": comm.all_reduce(x, "min", async_op=True).wait().numpy(),
            "gather": comm.all_gather(x, dim=1).numpy(),
            "scatter": comm.reduce_scatter(
                wb.from_numpy(np.tile(inputs[comm.rank], (world, 1)))
            ).numpy(),
            "bcast": comm.broadcast(x, root=world - 1).numpy(),
            "in_place": comm.all_reduce(x.clone(), "mean", out=x).numpy(),
        }

    stacked = np.stack(inputs).astype(np.float64)
    for rank, out in enumerate(dist.run_threads(world, body)):
        np.testing.assert_allclose(out["sum"], stacked.sum(0), rtol=1e-6)
        np.testing.assert_allclose(out["mean"], stacked.mean(0), rtol=1e-6)
        np.testing.assert_array_equal(out["max"], stacked.max(0))
        np.testing.assert_array_equal(out["min"], stacked.min(0))
        np.testing.assert_array_equal(out["gather"], np.concatenate(inputs, axis=1))
        np.testing.assert_allclose(out["scatter"], world * stacked.sum(0)[:6] if False else
                                   np.tile(stacked.sum(0), (world, 1))[rank * 6 : rank * 6 + 6],
                                   rtol=1e-6)  # fmt: skip
        np.testing.assert_array_equal(out["bcast"], inputs[-1])
        np.testing.assert_allclose(out["in_place"], stacked.mean(0), rtol=1e-6)


def test_send_recv_ring():
    def body(comm):
        nxt, prev = (comm.rank + 1) % 3, (comm.rank - 1) % 3
        comm.send(wb.full((4,), fill_value=comm.rank, dtype=wb.i32), nxt)
        return comm.recv(4, wb.i32, prev).numpy()

    for rank, got in enumerate(dist.run_threads(3, body)):
        np.testing.assert_array_equal(got, np.full(4, (rank - 1) % 3, np.int32))


def test_bad_arguments_are_named():
    def body(comm):
        with pytest.raises(DTypeError, match="mean needs a floating point"):
            comm.all_reduce(wb.ones(3, dtype=wb.i32), "mean")
        with pytest.raises(DTypeError, match="sum of a bool tensor"):
            comm.all_reduce(wb.ones(3, dtype=wb.bool_))
        with pytest.raises(dist.DistributedError, match="unknown reduce op 'prod'"):
            comm.all_reduce(wb.ones(3), "prod")
        with pytest.raises(ShapeError, match="not a multiple of the world size 2"):
            comm.reduce_scatter(wb.ones(3))
        with pytest.raises(ShapeError, match="dim 2 is out of range"):
            comm.all_gather(wb.ones(3, 2), dim=2)
        with pytest.raises(dist.DistributedError, match="send destination 5 is not a rank"):
            comm.send(wb.ones(1), 5)
        return True

    assert dist.run_threads(2, body) == [True, True]


def test_a_failing_rank_fails_the_others_fast():
    def body(comm):
        if comm.rank == 1:
            raise ValueError("boom")
        comm.all_reduce(wb.ones(2))  # rank 1 never comes: the barrier is aborted

    with pytest.raises(dist.DistributedError, match=r"rank 1 of 2 failed: ValueError\('boom'\)"):
        dist.run_threads(2, body, timeout=30)


def test_a_rank_that_returns_early_times_out():
    def body(comm):
        if comm.rank == 0:
            comm.all_reduce(wb.ones(2))

    with pytest.raises(dist.DistributedError, match="did not join within 0.5 s"):
        dist.run_threads(2, body, timeout=0.5)


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_equals_one_process_on_the_concatenated_batch(world):
    models = [mlp(seed=100 + r) for r in range(world)]
    results = dist.run_threads(world, lambda comm: train(comm, models[comm.rank]))
    ref_state, ref_losses = train_reference(world)
    for state, losses in results:
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
        for name, value in ref_state.items():
            # Adam divides by sqrt(v): where a gradient is near zero, a last-bit difference (the
            # ranks sum their shares in another order than one process) moves that weight by up
            # to ~1e-4 over 20 steps at lr 0.05, while the losses above agree to 1e-5
            np.testing.assert_allclose(state[name], value, rtol=1e-4, atol=3e-4, err_msg=name)
    assert ref_losses[-1] < 0.8 * ref_losses[0]  # it trained


def test_ddp_without_sync_differs():
    """The check above can fail: without averaging, the ranks drift apart."""

    def body(comm):
        model = dist.DistributedDataParallel(wb.nn.Linear(3, 1), comm)
        x = wb.from_numpy(np.full((2, 3), comm.rank + 1.0, np.float32))
        with model.no_sync():
            model(x).sum().backward()
        local = model.module.weight.grad.numpy().copy()
        model.zero_grad()
        model(x).sum().backward()
        synced = model.module.weight.grad.numpy().copy()
        model.close()
        return local, synced

    (l0, s0), (l1, s1) = dist.run_threads(2, body)
    np.testing.assert_array_equal(l0, np.full((1, 3), 2.0))
    np.testing.assert_array_equal(l1, np.full((1, 3), 4.0))
    np.testing.assert_array_equal(s0, np.full((1, 3), 3.0))
    np.testing.assert_array_equal(s1, s0)


def test_sampler_concatenation_is_the_global_batch():
    x, y = dataset()
    parts = [
        list(
            dist.DistributedBatcher(x, batch_size=BATCH, shuffle=True, seed=5, rank=r, world_size=3)
        )  # fmt: skip
        for r in range(3)
    ]
    order = np.random.default_rng((5, 0)).permutation(len(x))
    for b in range(len(parts[0])):
        got = np.concatenate([p[b].numpy() for p in parts])
        np.testing.assert_array_equal(got, x[order[b * 3 * BATCH : (b + 1) * 3 * BATCH]])
    uneven = dist.DistributedBatcher(np.arange(7), batch_size=2, rank=1, world_size=2)
    assert [b.numpy().tolist() for b in uneven] == [[2, 3], [6, 0]]  # padded to 8 with sample 0
    with pytest.raises(wb.WorkbenchError, match="rank 2 outside world size 2"):
        dist.DistributedBatcher(x, rank=2, world_size=2)


@pytest.mark.parametrize("world", [1, 2, 4])
def test_tensor_parallel_block_equals_the_full_block(world):
    weights = block_weights()
    x = np.random.default_rng(1).standard_normal((T, D)).astype(np.float32)
    vb = wb.nn.VarBuilder.from_dict(weights)

    def body(comm):
        block = TPBlock(dist.ShardedVarBuilder(vb, comm), comm)
        assert block.up.weight.shape == (32 // world, D)
        assert block.down.weight.shape == (D, 32 // world)
        return block(wb.from_numpy(x)).numpy()

    want = block_reference(weights, x)
    for got in dist.run_threads(world, body):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_ddp_buckets_start_during_backward():
    """With one bucket per parameter, all-reduces interleave with the leaves' gradients."""
    from workbench.autograd import BACKWARD_HOOKS

    events = []

    class Spy:
        def leaf(self, tensor, grad, store):
            events.append("grad")

        def finish(self, store):
            events.append("end")

    def body(comm):
        original = comm.all_reduce

        def all_reduce(*args, **kwargs):
            events.append("all_reduce")
            return original(*args, **kwargs)

        comm.all_reduce = all_reduce
        model = dist.DistributedDataParallel(mlp(seed=1), comm, bucket_cap_mb=1e-6)
        spy = Spy()
        BACKWARD_HOOKS.append(spy)
        try:
            events.clear()
            model(wb.randn(4, 10)).sum().backward()
        finally:
            BACKWARD_HOOKS.remove(spy)
            model.close()
        return len(model.buckets)

    (n_buckets,) = dist.run_threads(1, body)
    assert n_buckets == 6  # 3 Linear layers, weight and bias each
    assert events.count("all_reduce") == 6 and events[-1] == "end"
    assert events.index("all_reduce") < len(events) - 1 - events[::-1].index("grad")
