"""Fixtures of the native quantized tests: ``native`` is each compiled ISA variant with its
integer kernels (qdot_raw.c, qdot.c, qgemm.c), so AMX's bf16 tiles (qgemm_amx.c, tested in
test_qmatmul_amx.py) are turned off while it runs."""

from __future__ import annotations

import pytest
from quantized_helpers import native_variants

VARIANTS = native_variants()


@pytest.fixture(params=VARIANTS, ids=lambda mod: mod.variant())
def native(request):
    module = request.param
    allowed = module.set_amx(False)
    yield module
    module.set_amx(allowed)
