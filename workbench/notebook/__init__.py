"""Notebook tooling behind ``%load_ext workbench``: HTML reprs, profiling magics, the timings comm,
device/memory widgets and the model gallery. See ``extension.load``."""
