"""Every layer against torch.nn with the same weights: forward, input and weight gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from nn_check import check_layer

import workbench as wb
from workbench import nn

R = np.random.default_rng(0)


def randn(*shape) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


# (id, workbench layer, torch layer, input shapes)
LAYERS = [
    ("linear", lambda: nn.Linear(5, 3), lambda: torch.nn.Linear(5, 3), [(4, 5)]),
    ("linear_3d_nobias", lambda: nn.Linear(5, 3, bias=False),
     lambda: torch.nn.Linear(5, 3, bias=False), [(2, 4, 5)]),
    ("conv1d", lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1),
     lambda: torch.nn.Conv1d(3, 4, 3, stride=2, padding=1), [(2, 3, 9)]),
    ("conv1d_groups_dilation", lambda: nn.Conv1d(4, 6, 3, dilation=2, groups=2),
     lambda: torch.nn.Conv1d(4, 6, 3, dilation=2, groups=2), [(2, 4, 11)]),
    ("conv2d", lambda: nn.Conv2d(3, 4, 3, padding=1),
     lambda: torch.nn.Conv2d(3, 4, 3, padding=1), [(2, 3, 6, 5)]),
    ("conv2d_stride_groups", lambda: nn.Conv2d(4, 4, (3, 2), stride=(2, 1), groups=2,
                                               bias=False),
     lambda: torch.nn.Conv2d(4, 4, (3, 2), stride=(2, 1), groups=2, bias=False), [(1, 4, 7, 6)]),
    ("conv_transpose1d", lambda: nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1,
                                                    output_padding=1),
     lambda: torch.nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1, output_padding=1),
     [(2, 3, 5)]),
    ("conv_transpose2d", lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2),
     lambda: torch.nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2), [(2, 4, 3, 4)]),
    ("layer_norm", lambda: nn.LayerNorm(6), lambda: torch.nn.LayerNorm(6), [(3, 4, 6)]),
    ("layer_norm_2d_shape", lambda: nn.LayerNorm((4, 6), eps=1e-3),
     lambda: torch.nn.LayerNorm((4, 6), eps=1e-3), [(3, 4, 6)]),
    ("rms_norm", lambda: nn.RmsNorm(6, eps=1e-6), lambda: torch.nn.RMSNorm(6, eps=1e-6),
     [(3, 4, 6)]),
    ("rms_norm_2d_shape", lambda: nn.RmsNorm((4, 6), eps=1e-5),
     lambda: torch.nn.RMSNorm((4, 6), eps=1e-5), [(3, 4, 6)]),
    ("group_norm", lambda: nn.GroupNorm(2, 6), lambda: torch.nn.GroupNorm(2, 6), [(3, 6, 4, 2)]),
    ("batch_norm1d", lambda: nn.BatchNorm1d(5), lambda: torch.nn.BatchNorm1d(5), [(8, 5)]),
    ("batch_norm1d_3d", lambda: nn.BatchNorm1d(3), lambda: torch.nn.BatchNorm1d(3), [(4, 3, 6)]),
    ("batch_norm2d", lambda: nn.BatchNorm2d(3, momentum=0.3),
     lambda: torch.nn.BatchNorm2d(3, momentum=0.3), [(4, 3, 5, 2)]),
    ("batch_norm2d_no_stats", lambda: nn.BatchNorm2d(3, track_running_stats=False),
     lambda: torch.nn.BatchNorm2d(3, track_running_stats=False), [(4, 3, 2, 2)]),
    ("max_pool1d", lambda: nn.MaxPool1d(2), lambda: torch.nn.MaxPool1d(2), [(2, 3, 8)]),
    ("max_pool2d", lambda: nn.MaxPool2d(3, stride=2, padding=1),
     lambda: torch.nn.MaxPool2d(3, stride=2, padding=1), [(2, 3, 7, 6)]),
    ("avg_pool2d", lambda: nn.AvgPool2d(2), lambda: torch.nn.AvgPool2d(2), [(2, 3, 6, 4)]),
    ("adaptive_avg_pool2d", lambda: nn.AdaptiveAvgPool2d((2, 3)),
     lambda: torch.nn.AdaptiveAvgPool2d((2, 3)), [(2, 3, 7, 8)]),
    ("upsample", lambda: nn.Upsample(scale_factor=2),
     lambda: torch.nn.Upsample(scale_factor=2), [(1, 2, 3, 3)]),
    ("flatten", lambda: nn.Flatten(), lambda: torch.nn.Flatten(), [(2, 3, 4)]),
    ("sequential", lambda: nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2)),
     lambda: torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2)),
     [(3, 4)]),
]  # fmt: skip

ACTIVATIONS = [
    ("gelu", nn.GELU(), torch.nn.GELU()),
    ("gelu_tanh", nn.GELU("tanh"), torch.nn.GELU("tanh")),
    ("relu", nn.ReLU(), torch.nn.ReLU()),
    ("relu6", nn.ReLU6(), torch.nn.ReLU6()),
    ("silu", nn.SiLU(), torch.nn.SiLU()),
    ("sigmoid", nn.Sigmoid(), torch.nn.Sigmoid()),
    ("tanh", nn.Tanh(), torch.nn.Tanh()),
    ("hardsigmoid", nn.HardSigmoid(), torch.nn.Hardsigmoid()),
    ("hardswish", nn.HardSwish(), torch.nn.Hardswish()),
    ("mish", nn.Mish(), torch.nn.Mish()),
    ("elu", nn.ELU(0.7), torch.nn.ELU(0.7)),
    ("celu", nn.CELU(1.5), torch.nn.CELU(1.5)),
    ("selu", nn.SELU(), torch.nn.SELU()),
    ("leaky_relu", nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
    ("hardtanh", nn.Hardtanh(-0.5, 2.0), torch.nn.Hardtanh(-0.5, 2.0)),
    ("softplus", nn.Softplus(), torch.nn.Softplus()),
    ("softplus_beta", nn.Softplus(2.0, 3.0), torch.nn.Softplus(2.0, 3.0)),
    ("logsigmoid", nn.LogSigmoid(), torch.nn.LogSigmoid()),
    ("softsign", nn.Softsign(), torch.nn.Softsign()),
    ("glu", nn.GLU(), torch.nn.GLU()),
    ("softmax", nn.Softmax(-1), torch.nn.Softmax(-1)),
    ("log_softmax", nn.LogSoftmax(1), torch.nn.LogSoftmax(1)),
]


@pytest.mark.parametrize(
    "make_wb, make_torch, shapes", [c[1:] for c in LAYERS], ids=[c[0] for c in LAYERS]
)
def test_layer_matches_torch(make_wb, make_torch, shapes):
    torch.manual_seed(0)
    check_layer(make_wb(), make_torch(), [randn(*s) for s in shapes])


@pytest.mark.parametrize("name", ["linear", "conv2d", "layer_norm", "batch_norm2d", "group_norm"])
def test_layer_matches_torch_f64(name):
    _, make_wb, make_torch, shapes = next(c for c in LAYERS if c[0] == name)
    torch.manual_seed(1)
    check_layer(make_wb(), make_torch(), [randn(*s) for s in shapes], dtype=wb.f64)


@pytest.mark.parametrize(
    "name, make_torch",
    [("linear", lambda: torch.nn.Linear(8, 4)), ("layer_norm", lambda: torch.nn.LayerNorm(8))],
)
@pytest.mark.parametrize("dtype", [wb.bf16, wb.f16])
def test_layer_half_precision(name, make_torch, dtype):
    make_wb = {"linear": lambda: nn.Linear(8, 4), "layer_norm": lambda: nn.LayerNorm(8)}[name]
    torch.manual_seed(0)
    check_layer(
        make_wb(), make_torch(), [randn(3, 8)], dtype=dtype, grad=False, atol=3e-2, rtol=3e-2
    )


@pytest.mark.parametrize(
    "wb_act, torch_act", [c[1:] for c in ACTIVATIONS], ids=[c[0] for c in ACTIVATIONS]
)
def test_activation_matches_torch(wb_act, torch_act):
    x = randn(3, 8) * 3
    check_layer(wb_act, torch_act, [x])


def test_prelu_per_channel():
    torch.manual_seed(0)
    t = torch.nn.PReLU(4, init=0.1)
    with torch.no_grad():
        t.weight.copy_(torch.linspace(-0.5, 0.5, 4))
    check_layer(nn.PReLU(4), t, [randn(2, 4, 3)])


def test_prelu_shared():
    check_layer(nn.PReLU(), torch.nn.PReLU(), [randn(2, 4, 3)])


def test_swiglu_relu2_quick_gelu():
    x = randn(3, 8)
    tx = torch.tensor(x)
    a, b = tx.chunk(2, -1)
    cases = [
        (nn.SwiGLU(), torch.nn.functional.silu(a) * b),
        (nn.ReLU2(), torch.relu(tx) ** 2),
        (nn.QuickGELU(), tx * torch.sigmoid(1.702 * tx)),
    ]
    for layer, expected in cases:
        np.testing.assert_allclose(
            layer(wb.tensor(x)).numpy(), expected.numpy(), rtol=1e-5, atol=1e-6
        )


def test_activation_by_name():
    x = wb.tensor(randn(4, 6))
    np.testing.assert_allclose(nn.Activation("silu")(x).numpy(), nn.SiLU()(x).numpy())
    np.testing.assert_allclose(
        nn.Activation("gelu_pytorch_tanh")(x).numpy(), nn.GELU("tanh")(x).numpy()
    )
    assert nn.Activation("leaky_relu", 0.3).negative_slope == 0.3
    with pytest.raises(wb.WorkbenchError, match="unknown activation 'nope'"):
        nn.Activation("nope")


def test_embedding_matches_torch():
    torch.manual_seed(0)
    ids = np.array([[1, 4, 0], [4, 4, 2]])
    check_layer(nn.Embedding(5, 3), torch.nn.Embedding(5, 3), [ids])


def test_embedding_padding_idx_matches_torch():
    torch.manual_seed(0)
    ids = np.array([[1, 0, 3], [0, 2, 2]])
    t = torch.nn.Embedding(4, 3, padding_idx=0)
    with torch.no_grad():
        t.weight[0] = 0.5  # a non-zero padding row still comes out as is
    m = nn.Embedding(4, 3, padding_idx=0)
    np.testing.assert_array_equal(m.weight.numpy()[0], np.zeros(3))
    check_layer(m, t, [ids])


def test_batch_norm_running_stats_and_eval():
    torch.manual_seed(0)
    t = torch.nn.BatchNorm2d(3, momentum=0.2)
    m = nn.BatchNorm2d(3, momentum=0.2)
    for _ in range(3):
        x = randn(4, 3, 5, 5) * 2 + 1
        m(wb.tensor(x))
        t(torch.tensor(x))
    np.testing.assert_allclose(m.running_mean.numpy(), t.running_mean.numpy(), rtol=1e-5)
    np.testing.assert_allclose(m.running_var.numpy(), t.running_var.numpy(), rtol=1e-5)
    assert m.num_batches_tracked.item() == 3
    m.eval()
    t.eval()
    check_layer(m, t, [randn(2, 3, 4, 4)])


def test_batch_norm_cumulative_average():
    t = torch.nn.BatchNorm1d(2, momentum=None)
    m = nn.BatchNorm1d(2, momentum=None)
    for _ in range(3):
        x = randn(6, 2)
        m(wb.tensor(x))
        t(torch.tensor(x))
    np.testing.assert_allclose(m.running_var.numpy(), t.running_var.numpy(), rtol=1e-5)


def test_batch_norm_errors():
    with pytest.raises(wb.ShapeError, match=r"BatchNorm2d\(3\).*found shape \(2, 4, 5, 5\)"):
        nn.BatchNorm2d(3)(wb.randn(2, 4, 5, 5))
    with pytest.raises(wb.ShapeError, match="more than one value per channel"):
        nn.BatchNorm1d(3)(wb.randn(1, 3))


def test_dropout_train_and_eval():
    wb.manual_seed(0)
    d = nn.Dropout(0.25)
    x = wb.ones(200, 100)
    y = d(x).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02
    d.eval()
    assert d(x) is x
    xg = wb.Var(wb.ones(10, 10))
    d.train()
    out = d(xg)
    g = out.sum().backward()[xg].numpy()
    np.testing.assert_array_equal(g, out.numpy())  # gradient = mask / (1 - p)
    assert nn.Dropout(1.0)(x).numpy().sum() == 0
    with pytest.raises(ValueError, match="p must be in"):
        nn.Dropout(1.5)


def test_conv_errors():
    with pytest.raises(wb.ShapeError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(wb.ShapeError, match="kernel_size needs 2 values"):
        nn.Conv2d(3, 4, (3, 3, 3))


def test_default_init_is_pytorchs():
    """Weights and biases are U(-1/√fan_in, 1/√fan_in), like PyTorch's defaults."""
    wb.manual_seed(0)
    for layer, fan_in in (
        (nn.Linear(400, 300), 400),
        (nn.Conv2d(16, 300, 5), 16 * 25),
        (nn.ConvTranspose2d(300, 16, 5), 16 * 25),
    ):
        bound = 1 / np.sqrt(fan_in)
        w = layer.weight.numpy()
        assert np.abs(w).max() <= bound
        assert abs(w.std() - bound / np.sqrt(3)) < 0.01 * bound
        assert np.abs(layer.bias.numpy()).max() <= bound
    e = nn.Embedding(1000, 100).weight.numpy()
    assert abs(e.std() - 1) < 0.02
    ln = nn.LayerNorm(5)
    np.testing.assert_array_equal(ln.weight.numpy(), np.ones(5))
    np.testing.assert_array_equal(ln.bias.numpy(), np.zeros(5))
