"""What the GPU backends (CUDA, Metal) share: the storage with every op written once over a few
device hooks (``storage``, with the mixins ``nn``, ``padnorm``, ``indexing``, ``attention``),
the kernel-name tables per device (``kernels``), GEMM operands (``gemm``), packing layouts into
kernel parameters (``params``), launch plans (``plan``: grids, the permutations that put reduced
dims last, the bitonic sort network), the caching pool's policy (``pool``), the device timer
(``timer``), the one driver layer per process (``driver_holder``) and the generated Metal
sources (``metal_sources``). Each backend keeps only its API calls, libraries and module
loading."""
