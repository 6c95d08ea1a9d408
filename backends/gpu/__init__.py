"""What the GPU backends (CUDA, Metal) share and that does not depend on their API: packing
layouts into kernel parameters (``params``), launch plans (``plan``: grids, the permutations
that put reduced dims last, the bitonic sort network), the caching pool's policy (``pool``) and
the device timer (``timer``). Each backend keeps only its API calls, libraries and module
loading."""
