// Integer matmul on CUDA: the portable body of kernels/gpu/matmul.h (the one
// kernels/metal/matmul.metal holds) after the CUDA prelude.
#include "common.cuh"
#include "../gpu/matmul.h"
