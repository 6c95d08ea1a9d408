// GGUF dequantization and matvec on CUDA: the portable bodies of kernels/gpu/quantized.h (the
// ones kernels/metal/quantized.metal holds) after the CUDA prelude.
#include "common.cuh"
#include "../gpu/optable.h"
#include "../gpu/block.h"
#include "../gpu/quantized.h"
