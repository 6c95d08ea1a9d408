// Pooling on CUDA: the portable bodies of kernels/gpu/pool.h (the ones kernels/metal/pool.metal
// holds) after the CUDA prelude.
#include "common.cuh"
#include "../gpu/pool.h"
