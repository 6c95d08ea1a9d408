"""VarBuilder (safetensors files, shards, dicts, VarMap) and VarMap save/load."""

from __future__ import annotations

import json

import numpy as np
import pytest

import workbench as wb
from workbench import io as wbio
from workbench import nn
from workbench.io.safetensors import save_safetensors


def _weights():
    rng = np.random.default_rng(0)
    return {
        "encoder.fc1.weight": rng.standard_normal((8, 4)).astype(np.float32),
        "encoder.fc1.bias": rng.standard_normal(8).astype(np.float32),
        "encoder.fc2.weight": rng.standard_normal((2, 8)).astype(np.float32),
        "encoder.fc2.bias": rng.standard_normal(2).astype(np.float32),
    }


class Encoder(nn.Module):
    def __init__(self, vb=None):
        super().__init__()
        self.fc1 = nn.Linear(4, 8, vb=None if vb is None else vb.pp("fc1"))
        self.fc2 = nn.Linear(8, 2, vb=None if vb is None else vb.pp("fc2"))

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def test_from_safetensors_is_memory_mapped_and_checked(tmp_path):
    weights = _weights()
    path = tmp_path / "model.safetensors"
    save_safetensors(weights, path)
    vb = nn.VarBuilder.from_safetensors(path)
    enc = Encoder(vb.pp("encoder"))
    w = enc.fc1.weight
    np.testing.assert_array_equal(w.numpy(), weights["encoder.fc1.weight"])
    assert not w.numpy().flags.writeable  # a view of the mapped file
    assert not isinstance(w, wb.Var) and not w.requires_grad  # frozen, as in candle
    x = np.ones((3, 4), np.float32)
    expected = np.maximum(x @ weights["encoder.fc1.weight"].T + weights["encoder.fc1.bias"], 0)
    expected = expected @ weights["encoder.fc2.weight"].T + weights["encoder.fc2.bias"]
    np.testing.assert_allclose(enc(wb.tensor(x)).numpy(), expected, rtol=1e-5)
    with pytest.raises(
        wb.ShapeError,
        match=r"'encoder.fc1.weight' has shape \(8, 4\) in .*"
        r"expected \(4, 8\)",
    ):
        vb.pp("encoder").pp("fc1").get((4, 8), "weight")


def test_missing_name_lists_close_names(tmp_path):
    path = tmp_path / "model.safetensors"
    save_safetensors(_weights(), path)
    vb = nn.VarBuilder.from_safetensors(path)
    with pytest.raises(nn.VarBuilderError) as e:
        vb.pp("encoder").pp("fc1").get((8, 4), "weights")
    message = str(e.value)
    assert "no tensor named 'encoder.fc1.weights'" in message
    assert "closest names: encoder.fc1.weight" in message
    assert str(path) in message
    with pytest.raises(nn.VarBuilderError, match="closest names: encoder.fc1.bias"):
        vb.pp("decoder").pp("fc1").get(8, "bias")


def test_dtype_device_and_prefix():
    vb = nn.VarBuilder.from_dict(_weights(), dtype=wb.bf16)
    sub = vb.pp("encoder").pp("fc2")
    assert sub.prefix == "encoder.fc2"
    t = sub.get((2,), "bias")
    assert t.dtype is wb.bf16
    assert sub.get((2,), "bias", dtype=wb.f64).dtype is wb.f64
    assert sub.contains("weight") and not sub.contains("nope")
    assert sub.get_unchecked("weight").shape == (2, 8)
    assert vb.pp("encoder").names()[0].startswith("encoder.")
    assert vb.to_dtype(wb.f32).pp("encoder").pp("fc1").get((8,), "bias").dtype is wb.f32


def test_sharded_index(tmp_path):
    weights = _weights()
    names = list(weights)
    save_safetensors(
        {n: weights[n] for n in names[:2]}, tmp_path / "model-00001-of-00002.safetensors"
    )
    save_safetensors(
        {n: weights[n] for n in names[2:]}, tmp_path / "model-00002-of-00002.safetensors"
    )
    index = {
        "metadata": {"total_size": 0},
        "weight_map": {
            n: f"model-0000{1 + (i >= 2)}-of-00002.safetensors" for i, n in enumerate(names)
        },
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    for source in (tmp_path / "model.safetensors.index.json", tmp_path):
        vb = nn.VarBuilder.from_safetensors(source)
        enc = Encoder(vb.pp("encoder"))
        np.testing.assert_array_equal(enc.fc2.weight.numpy(), weights["encoder.fc2.weight"])
    loaded = wbio.load_safetensors(tmp_path)
    assert sorted(loaded) == sorted(names)


def test_varmap_trains_saves_and_loads(tmp_path):
    varmap = nn.VarMap()
    vb = nn.VarBuilder.from_varmap(varmap)
    enc = Encoder(vb.pp("encoder"))
    assert sorted(varmap.keys()) == sorted(_weights())
    assert all(isinstance(v, wb.Var) for v in varmap.all_vars())
    # asking again gives the same Var; a different shape is an error
    assert vb.pp("encoder").pp("fc1").get((8, 4), "weight") is enc.fc1.weight
    with pytest.raises(wb.ShapeError, match="VarMap: 'encoder.fc1.weight' has shape"):
        vb.pp("encoder").pp("fc1").get((4, 4), "weight")
    # default init is PyTorch's: bias within 1/sqrt(fan_in)
    assert np.abs(enc.fc1.bias.numpy()).max() <= 0.5
    path = tmp_path / "vars.safetensors"
    varmap.save(path, metadata={"step": "1"})
    before = {k: v.numpy().copy() for k, v in varmap.items()}
    for v in varmap.all_vars():
        wb.nn.init.zeros_(v)
    extra = varmap.load(path)
    assert extra == []
    for k, v in varmap.items():
        np.testing.assert_array_equal(v.numpy(), before[k])
        assert v.numpy().flags.writeable  # copied into the Var, not a read-only view
    other = nn.VarMap()
    other.get((3,), "missing")
    with pytest.raises(nn.VarBuilderError, match="no tensor named 'missing'"):
        other.load(path)


def test_zeros_builder():
    enc = Encoder(nn.VarBuilder.zeros().pp("encoder"))
    assert enc.fc1.weight.numpy().sum() == 0


def test_module_state_dict_to_safetensors_round_trip(tmp_path):
    a, b = Encoder(), Encoder()
    path = tmp_path / "enc.safetensors"
    wbio.save_safetensors(a.state_dict(), path)
    b.load_state_dict(wbio.load_safetensors(path))
    x = wb.randn(2, 4)
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    assert b.fc1.weight.numpy().flags.writeable
