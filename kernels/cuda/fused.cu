// Fused row kernels on CUDA: the portable bodies of kernels/gpu/fused.h (the ones
// kernels/metal/fused.metal holds) after the CUDA prelude.
#include "common.cuh"
#include "../gpu/optable.h"
#include "../gpu/block.h"
#include "../gpu/fused.h"
