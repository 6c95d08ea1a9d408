// Index ops on CUDA: the portable bodies of kernels/gpu/indexing.h (the ones
// kernels/metal/indexing.metal holds) after the CUDA prelude.
#include "common.cuh"
#include "../gpu/indexing.h"
