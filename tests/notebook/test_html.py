"""HTML reprs: tensors (stats, flags, sampling, preview), modules, QTensors; all escaped."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.notebook import html


def test_small_tensor_shows_stats_and_values():
    out = html.tensor_html(wb.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert "Tensor[2, 2]" in out and "f32" in out and "cpu" in out
    assert "n=4" in out and "(16 B)" in out
    assert "x∈[1, 4]" in out and "μ=2.5" in out and "σ=1.118" in out
    assert "<pre" in out and "[[1., 2.]," in out
    assert "NaN" not in out and "Inf" not in out


def test_nan_and_inf_are_flagged():
    out = html.tensor_html(wb.tensor([1.0, float("nan"), float("inf"), float("-inf")]))
    assert "1 NaN, 2 Infs</b>" in out
    assert "x∈[1, 1]" in out  # stats over the finite values only


@pytest.mark.parametrize(
    "x, expect",
    [
        (wb.tensor([1, 5, 3], dtype=wb.i64), "x∈[1, 5]"),
        (wb.tensor([True, False, True]), "true=2"),
        (wb.zeros(0, 3), "n=0"),
        (wb.tensor([1.5, -2.0]).to(wb.bf16), "bf16"),
        (wb.tensor([1.5, -2.0]).to(wb.f16), "f16"),
    ],
)
def test_dtypes_and_empty(x, expect):
    assert expect in html.tensor_html(x)


def test_big_tensor_is_sampled_without_a_full_copy():
    x = wb.zeros(2_000_000)
    out = html.tensor_html(x)
    assert "n=2000000" in out and f"stats on {html.SAMPLE} sampled values" in out
    assert "<pre" not in out  # no value preview for big tensors
    flat, sampled = html.host_sample(x.reshape(1000, 2000).transpose(0, 1))
    assert sampled and flat.size == html.SAMPLE


def test_sparkline_shape():
    values = np.concatenate([np.zeros(100), np.ones(10)])
    line = html.sparkline(values, bins=4)
    assert len(line) == 4 and line[0] == "█" and line[1] == "▁"
    assert html.sparkline(np.ones(5)) == ""  # constant: no histogram


def test_grad_markers():
    v = wb.Var(wb.ones(2))
    assert "requires_grad" in html.tensor_html(v)
    assert "grad_fn=" in html.tensor_html(v * 2)


class _FakeParam:
    def __init__(self, shape):
        self.shape, self.numel, self.nbytes = shape, int(np.prod(shape)), 4 * int(np.prod(shape))
        self.dtype = wb.f32


class _FakeModule:
    """Duck-typed: just named_parameters(recurse=) and named_children()."""

    def __init__(self, params, children=()):
        self._params, self._children = params, children

    def named_parameters(self, recurse=True):
        return iter(self._params)

    def named_children(self):
        return iter(self._children)


def test_module_html_tree_and_escaping():
    child = _FakeModule([("<w>", _FakeParam((3, 4)))])
    root = _FakeModule([("bias", _FakeParam((4,)))], [("<script>alert(1)</script>", child)])
    out = html.module_html(root)
    assert "<script>" not in out and "&lt;script&gt;" in out and "&lt;w&gt;" in out
    assert "16 parameters (64 B)" in out
    assert "[3, 4] f32" in out


def test_module_html_on_a_real_module():
    nn = pytest.importorskip("workbench.nn")
    out = html.module_html(nn.Sequential(nn.Linear(4, 3), nn.ReLU()))
    assert "15 parameters" in out and "Linear" in out and "ReLU" in out


def test_qtensor_html():
    qtensor = pytest.importorskip("workbench.quantized.qtensor")
    q = qtensor.QTensor.quantize(np.ones((4, 32), dtype=np.float32), "q8_0")
    out = html.qtensor_html(q)
    assert "QTensor[4, 32]" in out and "q8_0" in out and "bits/weight" in out


def test_device_sampling_path_matches_a_strided_slice(monkeypatch):
    """The non-CPU path (strided slice, then one small copy) on a CPU tensor."""
    x = wb.arange(3 * html.SAMPLE, dtype=wb.f32).reshape(3, html.SAMPLE).transpose(0, 1)
    monkeypatch.setattr(type(x.device), "is_cpu", property(lambda self: False))
    flat, sampled = html.host_sample(x)
    assert sampled and flat.size == html.SAMPLE
    np.testing.assert_array_equal(flat, x.numpy().reshape(-1)[::3])
