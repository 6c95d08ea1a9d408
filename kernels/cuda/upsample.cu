// Upsampling on CUDA: the portable bodies of kernels/gpu/upsample.h (the ones
// kernels/metal/upsample.metal holds) after the CUDA prelude.
#include "common.cuh"
#include "../gpu/upsample.h"
