"""Layouts (shape, strides in elements, offset): the hardware layer's ``Layout``, shared by the
core and every backend, re-exported here for the core."""

from workbench.backends.layout import Layout, contiguous_strides, reduced_shape

__all__ = ["Layout", "contiguous_strides", "reduced_shape"]
