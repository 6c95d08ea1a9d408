"""The index ops are the GPU base's (``gpu/indexing.py``); this name stays for old imports."""

from ..gpu.indexing import IndexingOps  # noqa: F401
