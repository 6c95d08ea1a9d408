"""The Metal driver layer, command stream and runtime, run against a fake PyObjC ``Metal``.

What a fake cannot check (that Apple's compiler accepts the sources, that the real selectors
behave as the fake's do, real GPU times) runs only in ``.github/workflows/metal.yml``.
"""

from __future__ import annotations

import numpy as np
import pytest
from fake_metal import FakeDevice, FakeObjc, fake_metal, kernel_names

from workbench.backends.errors import OutOfMemory
from workbench.backends.gpu.timer import DeviceTimer
from workbench.backends.metal import driver as metal_driver
from workbench.backends.metal import runtime as metal_runtime
from workbench.backends.metal.stream import MAX_DISPATCHES


def test_the_default_device_comes_first_and_headless_runners_list_theirs(devices):
    d = metal_driver.MetalDriver(fake_metal(devices[::-1]), FakeObjc())
    assert [d.device_name(i) for i in range(2)] == ["AMD Radeon (fake)", "Apple M3 (fake)"]
    headless = metal_driver.MetalDriver(fake_metal(devices, default=False), FakeObjc())
    assert headless.device_count() == 2
    assert metal_driver.MetalDriver(fake_metal([]), FakeObjc()).device_count() == 0
    with pytest.raises(IndexError, match=r"metal:2 does not exist: this Mac has 2"):
        headless.device(2)


def test_without_pyobjc_the_reason_names_the_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "Metal", None)  # import Metal fails
    previous = metal_driver.set_driver(None)
    try:
        with pytest.raises(RuntimeError, match=r"install workbench\[metal\] on macOS"):
            metal_driver.get_driver()
    finally:
        metal_driver.set_driver(previous)


def test_pool_reuses_buffers_and_reports_out_of_memory(driver, devices):
    pool = metal_runtime.runtime().pool(1)  # 1 MiB device
    a = pool.allocate(1000)
    handle = a.handle
    del a
    b = pool.allocate(900)  # the same 1024-byte size class comes back from the cache
    assert b.handle is handle and pool.stats()["driver_allocations"] == 1
    with pytest.raises(OutOfMemory, match=r"metal:1 is out of memory allocating 2097152"):
        pool.allocate(2 << 20)
    with pytest.raises(IndexError, match="metal:7"):
        metal_runtime.runtime().pool(7)


def _dispatch(rt, n=1):
    pipeline = rt.pipeline(0, "elementwise", _a_kernel())
    buffer = rt.pool(0).allocate(64)
    for _ in range(n):
        rt.stream(0).dispatch(pipeline, [(0, buffer.handle, 0)], [(1, b"\x01\x00")],
                              (2, 1, 1), (256, 1, 1))  # fmt: skip
    return buffer


def _a_kernel() -> str:
    names = kernel_names(metal_runtime.kernel_source("elementwise"))
    assert "unary_exp_f32" in names and len(names) > 100
    return "unary_exp_f32"


def test_dispatches_are_batched_and_committed_only_at_sync_points(driver, devices, objc):
    rt = metal_runtime.runtime()
    keep = _dispatch(rt, 3)
    device = devices[0]
    assert device.commits == []  # nothing submitted yet: one open command buffer
    rt.synchronize(0)
    assert len(device.commits) == 1 and len(device.dispatched) == 3
    _, state, groups, threads = device.dispatched[0]
    assert state["buffers"][0][0] is keep.handle.buffer and state["bytes"][1] == b"\x01\x00"
    assert (groups, threads) == ((2, 1, 1), (256, 1, 1))
    _dispatch(rt, MAX_DISPATCHES + 1)
    assert len(device.commits) == 2 and not device.commits[1].completed  # full: committed
    rt.synchronize(0)
    assert len(device.commits) == 3 and all(c.completed for c in device.commits)
    assert objc.depth == 0 and objc.entered >= 3 + MAX_DISPATCHES + 1  # a pool per encode


def test_uploads_stay_in_order_with_queued_work(driver):
    rt = metal_runtime.runtime()
    pool = rt.pool(0)
    a, b = pool.allocate(16), pool.allocate(16)
    first = np.arange(16, dtype=np.uint8)
    rt.upload(a.handle, 0, first)
    rt.stream(0).copy(a.handle, 0, b.handle, 0, 16)  # queued, not yet run
    rt.upload(a.handle, 0, first[::-1].copy())  # a write after it must not overtake it
    out = np.empty(16, np.uint8)
    rt.download(b.handle, 0, out)
    np.testing.assert_array_equal(out, first)
    rt.download(a.handle, 0, out)
    np.testing.assert_array_equal(out, first[::-1])


def test_libraries_compile_once_and_errors_carry_the_log(driver, devices, monkeypatch):
    rt = metal_runtime.runtime()
    name = _a_kernel()
    assert rt.pipeline(0, "elementwise", name) is rt.pipeline(0, "elementwise", name)
    assert len(devices[0].compiled) == 1
    with pytest.raises(metal_driver.MetalCompileError, match="no kernel named 'nope'"):
        rt.pipeline(0, "elementwise", "nope")
    with pytest.raises(FileNotFoundError, match="'fft' kernels .* not written in the portable"):
        metal_runtime.kernel_source("fft")
    monkeypatch.setattr(metal_runtime, "kernel_source", lambda family: "#error broken\n")
    with pytest.raises(metal_driver.MetalCompileError, match="matmul.metal does not compile: "
                       "program_source:1:2: error: a deliberate error"):  # fmt: skip
        rt.pipeline(0, "matmul", "x")


def test_failed_command_buffers_raise_at_the_wait(driver, devices):
    rt = metal_runtime.runtime()
    _dispatch(rt)
    rt.stream(0).flush()
    devices[0].commits[-1].fail = "Caused GPU Timeout Error"
    with pytest.raises(RuntimeError, match="command buffer failed: Caused GPU Timeout"):
        rt.synchronize(0)
    rt.synchronize(0)  # the stream goes on after a failure


def test_device_timer_sums_gpu_time_between_its_marks(driver):
    rt = metal_runtime.runtime()
    _dispatch(rt, 5)  # before the timer: not counted
    timer = DeviceTimer(rt, 0)
    timer.start()
    _dispatch(rt, 2)
    assert timer.stop_ns() == pytest.approx(2e6)  # the fake GPU takes 1 ms a command


def test_mem_get_info_reports_the_working_set(driver, devices):
    keep = metal_runtime.runtime().pool(1).allocate(4096)
    assert driver.mem_get_info(1) == ((1 << 20) - 4096, 1 << 20)
    assert keep.size == 4096 and devices[1].allocated == 4096


def test_a_fake_device_without_memory_refuses_allocation():
    d = metal_driver.MetalDriver(fake_metal([FakeDevice("tiny", capacity=100)]), FakeObjc())
    with pytest.raises(metal_driver.OutOfMemoryError, match=r"newBufferWithLength\(512\)"):
        d.mem_alloc(0, 512)
