"""Notebook tooling behind ``%load_ext workbench``: HTML reprs, profiling magics, the timings comm,
device/memory widgets, live training curves (``LiveMetrics``) and the model gallery. See
``extension.load``."""

from .metrics import LiveMetrics

__all__ = ["LiveMetrics"]
