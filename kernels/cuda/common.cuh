// Shared by every workbench CUDA kernel: the CUDA prelude of the portable dialect, then its
// common part (dtypes, the strided Layout parameter, conversions), both in kernels/gpu/.
#pragma once
#include "../gpu/prelude_cuda.h"
#include "../gpu/common.h"
