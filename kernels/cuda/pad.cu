// Padding on CUDA: the portable bodies of kernels/gpu/pad.h (the ones kernels/metal/pad.metal
// holds) after the CUDA prelude.
#include "common.cuh"
#include "../gpu/pad.h"
