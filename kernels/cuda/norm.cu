// Group normalisation on CUDA: the portable body of kernels/gpu/norm.h (the one
// kernels/metal/norm.metal holds) after the CUDA prelude.
#include "common.cuh"
#include "../gpu/optable.h"
#include "../gpu/block.h"
#include "../gpu/norm.h"
