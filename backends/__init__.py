"""Hardware layer: one storage class per device kind (cpu, cuda, metal).

Backends are found by name: ``workbench.backends.<kind>`` must expose ``Storage`` and
``device_count()``. They never import the layers above them.
"""
