// Elementwise kernels on CUDA: the portable bodies of kernels/gpu/elementwise.h (the ones
// kernels/metal/elementwise.metal holds) after the CUDA prelude.
#include "common.cuh"
#include "../gpu/optable.h"
#include "../gpu/elementwise.h"
