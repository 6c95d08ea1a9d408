""".npy / .npz files."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.io import NpzError, load_npy, load_npz, save_npy, save_npz


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_round_trip(tmp_path, compressed):
    tensors = {
        "a": wb.randn(3, 4),
        "b": wb.arange(5),
        "c": wb.ones(2, dtype=wb.bf16),
        "d": np.array([True, False]),
    }
    path = tmp_path / "x.npz"
    save_npz(path, tensors, compressed=compressed)
    back = load_npz(path)
    assert back["c"].dtype is wb.f32  # bf16 is stored as f32
    np.testing.assert_array_equal(back["a"].numpy(), tensors["a"].numpy())
    np.testing.assert_array_equal(back["b"].numpy(), np.arange(5))
    np.testing.assert_array_equal(np.load(path)["d"], [True, False])


def test_npy_memory_mapped(tmp_path):
    path = tmp_path / "x.npy"
    save_npy(path, wb.randn(4, 4))
    t = load_npy(path)
    assert not t.numpy().flags.writeable and t.shape == (4, 4)
    np.save(tmp_path / "f.npy", np.asfortranarray(np.arange(6.0).reshape(2, 3)))
    np.testing.assert_array_equal(
        load_npy(tmp_path / "f.npy").numpy(), np.arange(6.0).reshape(2, 3)
    )


def test_npz_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(NpzError, match="bad.npz: cannot read"):
        load_npz(bad)
    np.savez(tmp_path / "obj.npz", o=np.array([{"a": 1}], dtype=object))
    with pytest.raises(NpzError, match="obj.npz"):
        load_npz(tmp_path / "obj.npz")
    np.savez(tmp_path / "c.npz", c=np.zeros(2, complex))
    with pytest.raises(NpzError, match="'c' has dtype complex128"):
        load_npz(tmp_path / "c.npz")
