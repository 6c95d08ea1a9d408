// Reductions, cumsum and sorts on CUDA: the portable bodies of kernels/gpu/reduce.h (the ones
// kernels/metal/reduce.metal holds) after the CUDA prelude; the ops come from the op table.
#include "common.cuh"
#include "../gpu/optable.h"
#include "../gpu/block.h"
#include "../gpu/reduce.h"
