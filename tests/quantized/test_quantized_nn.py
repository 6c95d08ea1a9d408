"""QLinear / QEmbedding against float layers built on the dequantized weights, QVarBuilder over
files written by gguf-py (the independent reference, shapes in ggml order), quantize_model."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import quants
from quantized_helpers import assert_qmatmul_close

import workbench as wb
from workbench import nn
from workbench.errors import DTypeError, ShapeError
from workbench.nn import VarBuilderError
from workbench.nn import functional as F
from workbench.quantized import (
    GgmlDType,
    QEmbedding,
    QLinear,
    QTensor,
    QVarBuilder,
    quantize_model,
)
from workbench.quantized import nn as qnn

TYPES = ["Q8_0", "Q4_0", "Q5_1", "Q4_K", "Q6_K", "Q2_K", "IQ4_NL", "IQ4_XS", "F16"]
GQ = gguf.GGMLQuantizationType


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ============================================================================ QLinear
@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("lead", [(), (1,), (3,), (2, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_qlinear_matches_float_linear_on_dequantized_weight(t, lead, bias):
    w = QTensor.quantize(rand(24, 256), t)
    b = wb.from_numpy(rand(24, seed=1)) if bias else None
    layer = QLinear(w, b)
    x = wb.from_numpy(rand(*lead, 256, seed=2))
    ref = F.linear(x, w.dequantize(), b)
    y = layer(x)
    assert isinstance(y, wb.Tensor) and y.shape == (*lead, 24) and y.dtype is wb.f32
    assert_qmatmul_close(y.numpy(), ref.numpy(), x.numpy(), w.dequantize_numpy(), t)


def test_qlinear_half_input_and_from_linear():
    wb.manual_seed(0)
    linear = nn.Linear(64, 16)
    layer = QLinear.from_linear(linear, "Q8_0")
    assert layer.ggml_dtype is GgmlDType.Q8_0 and layer.in_features == 64
    assert layer.out_features == 16 and "Q8_0" in repr(layer)
    x = wb.from_numpy(rand(4, 64))
    np.testing.assert_allclose(layer(x).numpy(), linear(x).detach().numpy(), atol=0.02)
    y16 = layer(x.to_dtype(wb.f16))
    assert y16.dtype is wb.f16
    np.testing.assert_allclose(y16.numpy().astype(np.float32), layer(x).numpy(), atol=0.05)
    # Inference only: no graph, the bias is a frozen copy of the Linear's.
    assert not layer(x).requires_grad and not layer.bias.requires_grad


def test_qlinear_errors():
    w = QTensor.quantize(rand(8, 32), "Q8_0")
    with pytest.raises(ShapeError, match=r"bias of shape \[7\].*expected \[8\]"):
        QLinear(w, wb.zeros(7))
    with pytest.raises(TypeError, match="QTensor"):
        QLinear(wb.zeros((8, 32)))
    with pytest.raises(ShapeError, match="2-D"):
        QLinear(QTensor.quantize(rand(2, 4, 32), "Q8_0"))
    with pytest.raises(ShapeError, match="expected last dimension 32"):
        QLinear(w)(wb.zeros((2, 64)))


# ========================================================================== QEmbedding
@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("ids", [[3], [0, 5, 5, 2], [[1, 9], [9, 4]], [-1, 0]])
def test_qembedding_matches_dequantized_rows(t, ids):
    w = QTensor.quantize(rand(10, 256), t)
    emb = QEmbedding(w)
    idx = np.array(ids, np.int64)
    out = emb(wb.from_numpy(idx))
    assert out.shape == (*idx.shape, 256) and out.dtype is wb.f32
    np.testing.assert_array_equal(out.numpy(), w.dequantize_numpy()[idx])


def test_qembedding_decodes_only_the_picked_rows(monkeypatch):
    w = QTensor.quantize(rand(1000, 64), "Q4_0")
    decoded = []
    real = qnn.ggml.dequantize

    def spy(raw, name, *args, **kwargs):
        decoded.append(raw.shape[0])
        return real(raw, name, *args, **kwargs)

    monkeypatch.setattr(qnn.ggml, "dequantize", spy)
    out = QEmbedding(w)(np.array([[7, 900, 7], [900, 7, 3]]))
    assert decoded == [3]  # three distinct rows of 1000
    np.testing.assert_array_equal(out.numpy()[0, 0], out.numpy()[1, 1])


def test_qembedding_from_embedding_dtype_and_errors():
    wb.manual_seed(0)
    emb = nn.Embedding(12, 32)
    q = QEmbedding.from_embedding(emb, "Q8_0")
    ids = wb.tensor([[0, 11], [4, 4]])
    np.testing.assert_allclose(q(ids).numpy(), emb(ids).detach().numpy(), atol=0.03)
    assert QEmbedding(q.weight, dtype=wb.f16)(ids).dtype is wb.f16
    assert q(np.zeros((0,), np.int64)).shape == (0, 32)
    with pytest.raises(IndexError, match="id 12 is out of range for 12 embeddings"):
        q(wb.tensor([1, 12]))
    with pytest.raises(DTypeError, match="integers"):
        q(wb.tensor([1.0]))
    with pytest.raises(DTypeError, match="float output"):
        QEmbedding(q.weight, dtype=wb.i32)


# ========================================================================= QVarBuilder
@pytest.fixture
def gguf_py_file(tmp_path):
    """A GGUF written by gguf-py; gguf-py takes numpy (row-major) shapes and stores them
    reversed (ggml order), as llama.cpp's converters do."""
    path = str(tmp_path / "model.gguf")
    fc1, emb, cube = rand(16, 64), rand(10, 32, seed=1), rand(2, 3, 32, seed=2)
    w = gguf.GGUFWriter(path, arch="tiny")
    w.add_uint32("tiny.hidden", 64)
    w.add_tensor("fc1.weight", quants.quantize(fc1, GQ.Q8_0), raw_dtype=GQ.Q8_0)
    w.add_tensor("fc1.bias", rand(16, seed=3))
    w.add_tensor("emb.weight", quants.quantize(emb, GQ.Q4_0), raw_dtype=GQ.Q4_0)
    w.add_tensor("blk.0.cube", cube)
    w.add_tensor("blk.0.half", rand(4, 32, seed=4).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, {"fc1": fc1, "emb": emb, "cube": cube}


def test_qvarbuilder_shapes_are_ggml_dims_reversed(gguf_py_file):
    path, _ = gguf_py_file
    reader = gguf.GGUFReader(path)
    ggml_dims = {t.name: [int(d) for d in t.shape] for t in reader.tensors}
    assert ggml_dims["fc1.weight"] == [64, 16] and ggml_dims["blk.0.cube"] == [32, 3, 2]
    vb = QVarBuilder.from_gguf(path)
    for name, dims in ggml_dims.items():
        assert vb.get_qtensor_unchecked(name).shape == tuple(reversed(dims)), name
    q = vb.pp("fc1").get_qtensor((16, 64), "weight")
    assert q.ggml_dtype is GgmlDType.Q8_0
    assert vb.pp("blk").pp(0).get_qtensor((2, 3, 32), "cube").ggml_dtype is GgmlDType.F32
    with pytest.raises(ShapeError, match=r"has shape \(16, 64\).*ggml dims \[64, 16\].*"):
        vb.pp("fc1").get_qtensor((64, 16), "weight")
    with pytest.raises(ShapeError, match="expected"):
        vb.get((3, 2, 32), "blk.0.cube")


def test_qvarbuilder_get_dequantizes_like_gguf_py(gguf_py_file):
    path, src = gguf_py_file
    vb = QVarBuilder.from_gguf(path)
    reader = {t.name: t for t in gguf.GGUFReader(path).tensors}
    for name, shape in [("fc1.weight", (16, 64)), ("emb.weight", (10, 32))]:
        rt = reader[name]
        ref = quants.dequantize(rt.data, rt.tensor_type).reshape(shape)
        got = vb.get(shape, name)
        assert got.dtype is wb.f32 and got.shape == shape
        np.testing.assert_array_equal(got.numpy(), ref)
    np.testing.assert_array_equal(vb.get((2, 3, 32), "blk.0.cube").numpy(), src["cube"])
    half = vb.get((4, 32), "blk.0.half")
    assert half.dtype is wb.f16  # stored dtype kept when the builder has none
    assert vb.to_dtype(wb.f32).get((4, 32), "blk.0.half").dtype is wb.f32
    assert vb.metadata["tiny.hidden"] == 64 and vb.metadata["general.architecture"] == "tiny"
    assert isinstance(vb.pp("x").root().to_device("cpu"), QVarBuilder)
    assert vb.pp("fc1").contains("bias") and not vb.contains("bias")
    assert sorted(vb.pp("blk").names()) == ["blk.0.cube", "blk.0.half"]


def test_qvarbuilder_builds_layers(gguf_py_file):
    path, src = gguf_py_file
    vb = QVarBuilder.from_gguf(path)
    x = wb.from_numpy(rand(3, 64, seed=5))
    qfc = QLinear.load(vb.pp("fc1"), 64, 16)
    ffc = nn.Linear(64, 16, vb=vb.pp("fc1"))  # a float layer from the same builder
    wd = vb.get((16, 64), "fc1.weight").numpy()
    assert_qmatmul_close(qfc(x).numpy(), ffc(x).numpy(), x.numpy(), wd, qfc.ggml_dtype.name)
    # against the unquantized weight: Q8_0 weight error plus (native) Q8_0 activation error
    np.testing.assert_allclose(
        qfc(x).numpy(), x.numpy() @ src["fc1"].T + vb.get(16, "fc1.bias").numpy(), atol=0.2
    )
    emb = QEmbedding.load(vb.pp("emb"), 10, 32)
    assert emb.ggml_dtype is GgmlDType.Q4_0 and emb(wb.tensor([9])).shape == (1, 32)


def test_qvarbuilder_missing_names_list_close_ones(gguf_py_file):
    path, _ = gguf_py_file
    vb = QVarBuilder.from_gguf(path)
    with pytest.raises(VarBuilderError, match="'fc1.weights'.*closest names: fc1.weight"):
        vb.pp("fc1").get_qtensor((16, 64), "weights")
    with pytest.raises(VarBuilderError, match="closest names: fc1.bias"):
        vb.get((16,), "fc2.bias")
    with pytest.raises(VarBuilderError, match="model.gguf"):
        QLinear.load(vb.pp("decoder"), 64, 16)


def test_qvarbuilder_from_qtensors():
    w = QTensor.quantize(rand(4, 32), "Q8_0")
    vb = QVarBuilder.from_qtensors({"a.weight": w})
    assert vb.pp("a").get_qtensor((4, 32), "weight") is w
    assert vb.metadata == {} and "QTensor dict" in repr(vb)


# ====================================================================== quantize_model
def mlp():
    wb.manual_seed(0)
    return nn.Sequential(
        nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)
    )


def test_quantize_model_replaces_linears_in_place():
    model = mlp()
    x = wb.from_numpy(rand(5, 256))
    ref = model(x).detach().numpy()
    first = model[0]
    out = quantize_model(model, "Q8_0")
    assert out is model
    kinds = [type(m).__name__ for m in model]
    assert kinds == ["QLinear", "ReLU", "QLinear", "ReLU", "QLinear"]
    assert model[0].ggml_dtype is GgmlDType.Q8_0
    np.testing.assert_array_equal(model[0].bias.numpy(), first.bias.detach().numpy())
    np.testing.assert_allclose(model(x).numpy(), ref, atol=0.02)
    assert list(model.state_dict()) == ["0.bias", "2.bias", "4.bias"]


def test_quantize_model_skips_narrow_layers_with_a_warning(capsys):
    model = mlp()
    with pytest.warns(
        UserWarning, match=r"2 Linear layer\(s\).*Q4_K.*256: '2' \(in_features=64\), '4'"
    ):
        quantize_model(model, "Q4_K", verbose=True)
    assert [type(m).__name__ for m in model][::2] == ["QLinear", "Linear", "Linear"]
    printed = capsys.readouterr().out
    assert "0: [64, 256] -> Q4_K" in printed and "4: [10, 32] kept in float" in printed


def test_quantize_model_skip_patterns_nesting_sharing_and_root():
    shared = nn.Linear(32, 32)
    model = nn.Sequential(nn.Sequential(shared, nn.ReLU(), shared), nn.Linear(32, 10))
    quantize_model(model, "Q4_0", skip=r"^1$")
    inner = model[0]
    assert isinstance(inner[0], QLinear) and inner[0] is inner[2]
    assert isinstance(model[1], nn.Linear)
    assert isinstance(quantize_model(nn.Linear(32, 4), "Q8_0"), QLinear)
    with pytest.raises(Exception, match="unknown ggml type"):
        quantize_model(mlp(), "Q9_9")
