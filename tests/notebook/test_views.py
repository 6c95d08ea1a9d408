"""``.plt``, ``.rgb``, ``.chans``: PNG views, added by the extension and removed on unload."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.notebook import views

PNG = b"\x89PNG"


def test_views_render_png():
    x = wb.rand(2, 3, 8, 8)
    assert views.plt(x)._repr_png_().startswith(PNG)
    assert views.rgb(x).png().startswith(PNG)
    assert views.chans(x[0]).png().startswith(PNG)
    assert views.rgb(wb.randn(1, 6, 6)).png().startswith(PNG)  # grayscale, min-max scaled
    assert views.plt(wb.tensor([float("nan"), 1.0])).png().startswith(PNG)


def test_view_errors_name_the_shape():
    with pytest.raises(ValueError, match=r"\[..., C, H, W\].*\[2, 5, 8, 8\]"):
        views.rgb(wb.rand(2, 5, 8, 8)).png()
    with pytest.raises(ValueError, match=r"\[..., H, W\].*\[7\]"):
        views.chans(wb.rand(7)).png()


def test_extension_adds_and_removes_properties(shell, ext):
    x = wb.rand(3, 4, 4)
    assert isinstance(x.plt, views.PlotView) and isinstance(x.rgb, views.RgbView)
    assert isinstance(x.chans, views.ChansView)
    data, _ = shell.display_formatter.format(x.chans)
    assert data["image/png"]
    from workbench.notebook import extension

    extension.unload(shell)
    assert not hasattr(wb.Tensor, "plt")
    extension.load(shell, comm_manager=ext.comm_manager_for_tests)
