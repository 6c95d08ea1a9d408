"""Sharded loading (safetensors and GGUF) and the tensor-parallel layers' weight slices.

References: numpy slices of the full arrays; for GGUF, gguf-py's own dequantization of the
full tensor, sliced.
"""

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as GQ
from gguf import quants

import workbench as wb
from workbench import distributed as dist
from workbench.errors import ShapeError


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture
def safetensors_file(tmp_path):
    arrays = {"fc.weight": rand(8, 6), "fc.bias": rand(8, seed=1), "emb": rand(4, 3, 10, seed=2)}
    path = tmp_path / "model.safetensors"
    wb.save_safetensors({k: wb.from_numpy(v) for k, v in arrays.items()}, path)
    return path, arrays


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_safetensors_shards_are_numpy_slices(safetensors_file, dim):
    path, arrays = safetensors_file
    vb = wb.nn.VarBuilder.from_safetensors(path)
    for rank in range(2):
        svb = dist.ShardedVarBuilder(vb, rank=rank, world_size=2).pp("fc")
        got = svb.get_sharded((8, 6), "weight", dim).numpy()
        want = np.split(arrays["fc.weight"], 2, axis=dim)[rank]
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(
        dist.ShardedVarBuilder(vb, rank=1, world_size=2).get_sharded((4, 3, 10), "emb", 2).numpy(),
        arrays["emb"][..., 5:],
    )


def test_safetensors_shard_converts_only_its_slice(safetensors_file):
    path, arrays = safetensors_file
    vb = wb.nn.VarBuilder.from_safetensors(path, dtype=wb.f16)
    got = dist.ShardedVarBuilder(vb, rank=3, world_size=4).get_sharded((8,), "fc.bias", 0)
    assert got.dtype is wb.f16
    np.testing.assert_array_equal(got.numpy(), arrays["fc.bias"][6:].astype(np.float16))


def test_shard_errors_name_the_tensor(safetensors_file):
    path, _ = safetensors_file
    svb = dist.ShardedVarBuilder(wb.nn.VarBuilder.from_safetensors(path), rank=0, world_size=4)
    with pytest.raises(ShapeError, match=r"fc.weight has shape \(8, 6\); dim 1 \(6\) does not"):
        svb.get_sharded((8, 6), "fc.weight", 1)
    with pytest.raises(ShapeError, match="expected"):
        svb.get_sharded((8, 5), "fc.weight", 0)
    with pytest.raises(dist.DistributedError, match="rank 4 outside world size 4"):
        dist.Shard(0, 4, 4)


@pytest.fixture
def gguf_file(tmp_path):
    path = str(tmp_path / "model.gguf")
    w8, w4 = rand(8, 128, seed=3), rand(6, 64, seed=4)
    writer = gguf.GGUFWriter(path, arch="tiny")
    writer.add_tensor("w8", quants.quantize(w8, GQ.Q8_0), raw_dtype=GQ.Q8_0)
    writer.add_tensor("w4", quants.quantize(w4, GQ.Q4_0), raw_dtype=GQ.Q4_0)
    writer.add_tensor("bias", rand(8, seed=5))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    full = {
        "w8": quants.dequantize(quants.quantize(w8, GQ.Q8_0), GQ.Q8_0),
        "w4": quants.dequantize(quants.quantize(w4, GQ.Q4_0), GQ.Q4_0),
    }
    return path, full


@pytest.mark.parametrize("dim", [0, 1])
def test_gguf_shards_stay_quantized_and_match_gguf_py(gguf_file, dim):
    path, full = gguf_file
    vb = wb.QVarBuilder.from_gguf(path)
    for rank in range(2):
        svb = dist.ShardedVarBuilder(vb, rank=rank, world_size=2)
        q = svb.get_qtensor_sharded((8, 128), "w8", dim)
        assert q.ggml_dtype.name == "Q8_0"
        assert q.shape == ((4, 128) if dim == 0 else (8, 64))
        want = np.split(full["w8"], 2, axis=dim)[rank]
        np.testing.assert_array_equal(q.dequantize().numpy(), want)
        np.testing.assert_array_equal(svb.get_sharded((8, 128), "w8", dim).numpy(), want)
    got = dist.ShardedVarBuilder(vb, rank=1, world_size=3).get_sharded((6, 64), "w4", 0)
    np.testing.assert_array_equal(got.numpy(), full["w4"][2:4])


def test_gguf_shard_must_cut_whole_blocks(gguf_file):
    path, _ = gguf_file
    svb = dist.ShardedVarBuilder(wb.QVarBuilder.from_gguf(path), rank=0, world_size=4)
    with pytest.raises(ShapeError, match="not a multiple of the Q4_0 block size 32"):
        svb.get_qtensor_sharded((6, 64), "w4", 1)  # 16 columns: half a Q4_0 block
    svb = dist.ShardedVarBuilder(wb.QVarBuilder.from_gguf(path), rank=1, world_size=2)
    with pytest.raises(ShapeError, match=r"rank 1 would hold its columns 80..96 \(of 128\)"):
        svb.get_qtensor_sharded((8, 128), "w8", 1, parts=(64, 32, 32))  # 16 columns each


@pytest.mark.parametrize("ggml_type", ["Q4_K", "Q6_K"])
def test_kquant_shards_match_gguf_py(tmp_path, ggml_type):
    """K-quants (256-element blocks, quantized by workbench, decoded by gguf-py): rows split
    over any number of ranks; columns over ranks that each get whole blocks, else an error
    naming the tensor, the block size and the world size."""
    path = str(tmp_path / "k.gguf")
    q = wb.QTensor.quantize(rand(8, 1024, seed=6), ggml_type)
    writer = gguf.GGUFWriter(path, arch="tiny")
    writer.add_tensor("w", np.ascontiguousarray(q.data), raw_dtype=GQ[ggml_type])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    (stored,) = gguf.GGUFReader(path).tensors
    full = quants.dequantize(stored.data, stored.tensor_type).reshape(8, 1024)
    vb = wb.QVarBuilder.from_gguf(path)
    for world, dims in ((2, (0, 1)), (4, (0, 1)), (8, (0,))):
        for rank in range(world):
            for dim in dims:
                shard = dist.ShardedVarBuilder(vb, rank=rank, world_size=world)
                got = shard.get_qtensor_sharded((8, 1024), "w", dim)
                assert got.ggml_dtype.name == ggml_type
                want = np.split(full, world, axis=dim)[rank]
                np.testing.assert_array_equal(got.dequantize().numpy(), want)
    svb = dist.ShardedVarBuilder(vb, rank=0, world_size=8)
    message = (
        rf"w \({ggml_type}, shape \(8, 1024\)\) does not split over 8 ranks along its last "
        rf"dim: rank 0 would hold 128 of its 1024 columns, not a multiple of the {ggml_type} "
        "block size 256"
    )
    with pytest.raises(ShapeError, match=message):
        svb.get_qtensor_sharded((8, 1024), "w", 1)


@pytest.mark.parametrize("dim", [0, 1])
def test_fused_parts_split_one_by_one(gguf_file, safetensors_file, dim):
    """A fused tensor (q|k|v stacked) gives rank r the r-th block of every part, in order."""
    path, full = gguf_file
    parts = (2, 6) if dim == 0 else (64, 64)
    bounds = np.cumsum((0, *parts))
    for rank in range(2):
        svb = dist.ShardedVarBuilder(wb.QVarBuilder.from_gguf(path), rank=rank, world_size=2)
        pieces = [np.split(p, 2, axis=dim)[rank]
                  for p in np.split(full["w8"], bounds[1:-1], axis=dim)]  # fmt: skip
        q = svb.get_qtensor_sharded((8, 128), "w8", dim, parts)
        assert q.ggml_dtype.name == "Q8_0"
        np.testing.assert_array_equal(q.dequantize().numpy(), np.concatenate(pieces, axis=dim))
    st_path, arrays = safetensors_file
    svb = dist.ShardedVarBuilder(wb.nn.VarBuilder.from_safetensors(st_path), rank=1, world_size=2)
    np.testing.assert_array_equal(
        svb.get_sharded((8, 6), "fc.weight", 0, parts=(2, 4, 2)).numpy(),
        arrays["fc.weight"][[1, 4, 5, 7]],
    )
    with pytest.raises(ShapeError, match=r"its parts \[2, 4\] along dim 0 add up to 6, not 8"):
        svb.get_sharded((8, 6), "fc.weight", 0, parts=(2, 4))
    with pytest.raises(ShapeError, match="a part of 3 of dim 0 does not split into 2 equal parts"):
        svb.get_sharded((8, 6), "fc.weight", 0, parts=(3, 5))


def test_parallel_linears_hold_their_slices():
    full = wb.nn.Linear(6, 4)
    weight, bias = full.weight.numpy(), full.bias.numpy()

    def body(comm):
        col = dist.shard_linear(full, comm, "column", gather_output=True)
        row = dist.shard_linear(full, comm, "row", input_is_parallel=False)
        r = comm.rank
        np.testing.assert_array_equal(col.weight.numpy(), weight[2 * r : 2 * r + 2])
        np.testing.assert_array_equal(col.bias.numpy(), bias[2 * r : 2 * r + 2])
        np.testing.assert_array_equal(row.weight.numpy(), weight[:, 3 * r : 3 * r + 3])
        x = wb.from_numpy(rand(5, 6, seed=9))
        return col(x).numpy(), row(x).numpy()

    want = rand(5, 6, seed=9).astype(np.float64) @ weight.T.astype(np.float64) + bias
    for col_out, row_out in dist.run_threads(2, body):
        np.testing.assert_allclose(col_out, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(row_out, want, rtol=1e-5, atol=1e-6)


def test_parallel_linears_keep_gguf_weights_quantized(tmp_path):
    """Column- then row-parallel Q8_0 layers equal the single-process QLinears."""
    path = str(tmp_path / "mlp.gguf")
    up, down = rand(64, 128, seed=6), rand(128, 64, seed=7)
    writer = gguf.GGUFWriter(path, arch="tiny")
    writer.add_tensor("up.weight", quants.quantize(up, GQ.Q8_0), raw_dtype=GQ.Q8_0)
    writer.add_tensor("up.bias", rand(64, seed=8))
    writer.add_tensor("down.weight", quants.quantize(down, GQ.Q8_0), raw_dtype=GQ.Q8_0)
    writer.add_tensor("down.bias", rand(128, seed=9))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    vb = wb.QVarBuilder.from_gguf(path)
    x = wb.from_numpy(rand(3, 128, seed=10))
    single = wb.QLinear.load(vb.pp("down"), 64, 128)(wb.QLinear.load(vb.pp("up"), 128, 64)(x))

    def body(comm):
        col = dist.ColumnParallelLinear(128, 64, comm, vb.pp("up"))
        row = dist.RowParallelLinear(64, 128, comm, vb.pp("down"))
        assert col.weight is None and col.local.weight.shape == (32, 128)
        assert row.local.weight.ggml_dtype.name == "Q8_0" and row.local.weight.shape == (128, 32)
        return row(col(x)).numpy()

    for got in dist.run_threads(2, body):
        scale = np.abs(single.numpy()).max()  # f32 sums of different order: relative to it
        np.testing.assert_allclose(got, single.numpy(), rtol=1e-5, atol=1e-6 * scale)
    # and both are near the float product of gguf-py's dequantized weights
    w_up = quants.dequantize(quants.quantize(up, GQ.Q8_0), GQ.Q8_0).astype(np.float64)
    w_down = quants.dequantize(quants.quantize(down, GQ.Q8_0), GQ.Q8_0).astype(np.float64)
    h = x.numpy() @ w_up.T + rand(64, seed=8)
    want = h @ w_down.T + rand(128, seed=9)
    np.testing.assert_allclose(single.numpy(), want, rtol=0.05, atol=0.05 * np.abs(want).max())


def test_parallel_linears_keep_kquant_weights_quantized(tmp_path):
    """Over 4 ranks: a Q4_K column-parallel up (rows split) and a Q6_K row-parallel down
    (1024 inputs: 256 per rank, one K-quant block each) equal the single-process QLinears;
    each rank quantizes its slice of the activations in the same blocks as one process."""
    path = str(tmp_path / "kmlp.gguf")
    up = wb.QTensor.quantize(rand(1024, 256, seed=11), "Q4_K")
    down = wb.QTensor.quantize(rand(256, 1024, seed=12), "Q6_K")
    writer = gguf.GGUFWriter(path, arch="tiny")
    writer.add_tensor("up.weight", np.ascontiguousarray(up.data), raw_dtype=GQ.Q4_K)
    writer.add_tensor("down.weight", np.ascontiguousarray(down.data), raw_dtype=GQ.Q6_K)
    writer.add_tensor("down.bias", rand(256, seed=13))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    vb = wb.QVarBuilder.from_gguf(path)
    x = wb.from_numpy(rand(3, 256, seed=14))
    up1 = wb.QLinear.load(vb.pp("up"), 256, 1024, bias=False)
    single = wb.QLinear.load(vb.pp("down"), 1024, 256)(up1(x).relu()).numpy()

    def body(comm):
        col = dist.ColumnParallelLinear(256, 1024, comm, vb.pp("up"), bias=False)
        row = dist.RowParallelLinear(1024, 256, comm, vb.pp("down"))
        assert col.local.weight.ggml_dtype.name == "Q4_K" and col.local.weight.shape == (256, 256)
        assert row.local.weight.ggml_dtype.name == "Q6_K" and row.local.weight.shape == (256, 256)
        return row(col(x).relu()).numpy()

    for got in dist.run_threads(4, body):  # f32 sums of different order: relative to the scale
        np.testing.assert_allclose(got, single, rtol=1e-5, atol=1e-6 * np.abs(single).max())
