"""The driver layer on a real Metal device (macOS, ``.github/workflows/metal.yml``): Apple's
compiler builds every generated kernel source, and a kernel from the portable bodies computes
what numpy does. Skipped where PyObjC's Metal or a device is missing (every Linux machine)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from workbench.backends.gpu.metal_sources import PORTABLE
from workbench.backends.gpu.params import pack_args
from workbench.backends.layout import Layout
from workbench.backends.metal import driver as metal_driver
from workbench.backends.metal import runtime as metal_runtime


@pytest.fixture(scope="module")
def rt():
    pytest.importorskip("Metal")
    metal_driver.set_driver(None)
    metal_runtime.reset()
    try:
        if metal_driver.get_driver().device_count() == 0:
            pytest.skip("no Metal device")
    except RuntimeError as err:
        pytest.skip(str(err))
    return metal_runtime.runtime()


@pytest.mark.gpu
@pytest.mark.parametrize("family", PORTABLE)
def test_apple_compiles_every_generated_source(rt, family):
    rt.driver.compile_library(0, metal_runtime.kernel_source(family), family)


@pytest.mark.gpu
def test_a_portable_kernel_runs_on_the_device(rt):
    x = np.linspace(-4, 4, 1000, dtype=np.float32)
    src, out = rt.pool(0).allocate(x.nbytes), rt.pool(0).allocate(x.nbytes)
    rt.upload(src.handle, 0, x.view(np.uint8))
    pipeline = rt.pipeline(0, "elementwise", "unary_exp_f32")
    n = struct.pack("<q", x.size)
    rt.stream(0).dispatch(
        pipeline,
        [(0, out.handle, 0), (1, src.handle, 0)],
        [(2, n), (3, pack_args(Layout.contiguous(x.shape)))],
        (-(-x.size // 256), 1, 1),
        (256, 1, 1),
    )
    result = np.empty(x.nbytes, np.uint8)
    rt.download(out.handle, 0, result)
    np.testing.assert_allclose(result.view(np.float32), np.exp(x), rtol=2e-6)
