// im2col / col2im on CUDA: the portable bodies of kernels/gpu/conv.h (the ones
// kernels/metal/conv.metal holds) after the CUDA prelude.
#include "common.cuh"
#include "../gpu/conv.h"
