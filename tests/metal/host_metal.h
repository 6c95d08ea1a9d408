// Host prelude for the generated Metal kernels, for tests only: the block runtime of
// tests/cuda/host_blocks.h with Metal's types (no f64, wb_wide is float; see host_prelude.h).
#pragma once
#define WB_HOST_METAL 1
#include "../cuda/host_blocks.h"
