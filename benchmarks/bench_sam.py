"""SAM image encoders at 1024×1024 on the CPU: workbench against PyTorch references with the
same (seeded random) weights: segment-anything's ``ImageEncoderViT`` (ViT-B), and MobileSAM's
TinyViT-5M assembled from timm's TinyViT blocks (``tiny_vit_reference`` in
tests/fixtures/make_sam_goldens.py, the goldens' reference; MobileSAM itself is not on PyPI).

Needs ``segment-anything`` / ``timm`` (benchmark/test references only; workbench never imports
them): ``pip install -c constraints.txt --no-deps segment-anything timm``. Both import
torchvision (which cannot load beside torch 2.13): the ViT encoder module is imported directly
here, bypassing it; the TinyViT reference stubs torchvision for timm's imports. The TinyViT
reference runs MobileSAM's modules as they are (BatchNorm after each conv, in eval mode);
workbench folds the BatchNorms at load.

Peak memory (``python -m benchmarks.bench_sam``): each side runs in its own process and
reports its peak resident set size over the weights' baseline.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

from ._harness import Skip, Workload


def _reference_encoder_class():
    spec = importlib.util.find_spec("segment_anything")
    if spec is None or not spec.submodule_search_locations:
        raise Skip("segment-anything is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "modeling" / "image_encoder.py"
    # image_encoder.py only imports torch and its sibling ``common``: load both by path
    common = importlib.util.spec_from_file_location(
        "segment_anything.modeling.common", path.with_name("common.py")
    )
    mod_common = importlib.util.module_from_spec(common)
    sys.modules.setdefault("segment_anything.modeling.common", mod_common)
    common.loader.exec_module(mod_common)
    pkg = type(sys)("segment_anything.modeling")
    pkg.__path__ = [str(path.parent)]
    sys.modules.setdefault("segment_anything", type(sys)("segment_anything"))
    sys.modules.setdefault("segment_anything.modeling", pkg)
    enc = importlib.util.spec_from_file_location("segment_anything.modeling.image_encoder", path)
    module = importlib.util.module_from_spec(enc)
    enc.loader.exec_module(module)
    return module.ImageEncoderViT


def build(which: str = "vit_b", size: int = 1024):
    """(workbench encoder, torch encoder, input (1, 3, size, size) numpy)."""
    import torch

    from workbench import nn
    from workbench.models.sam import ImageEncoderViT, SamConfig

    cfg = replace(SamConfig.variant(which), img_size=size)
    torch.manual_seed(0)
    ref = _reference_encoder_class()(
        img_size=size,
        embed_dim=cfg.embed_dim,
        depth=cfg.depth,
        num_heads=cfg.num_heads,
        mlp_ratio=4,
        out_chans=256,
        qkv_bias=True,
        norm_layer=partial(torch.nn.LayerNorm, eps=1e-6),
        use_rel_pos=True,
        window_size=14,
        global_attn_indexes=cfg.global_attn_indexes,
    ).eval()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if "rel_pos" in name or "pos_embed" in name:
                p.normal_(0.0, 0.02)
    state = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    ours = ImageEncoderViT(nn.VarBuilder.from_dict(state), cfg)
    x = np.random.default_rng(0).standard_normal((1, 3, size, size)).astype(np.float32)
    return ours, ref, x


def _golden_script():
    """tests/fixtures/make_sam_goldens.py as a module (its imports of torch, timm and
    segment-anything happen inside its functions)."""
    path = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "make_sam_goldens.py"
    name = "_make_sam_goldens"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


def build_tiny_vit(size: int = 1024):
    """(workbench TinyViT-5M, torch reference, input (1, 3, size, size) numpy)."""
    if importlib.util.find_spec("timm") is None:
        raise Skip("timm is not installed")
    from workbench import nn
    from workbench.models.sam import TinyViT, TinyViTConfig

    script = _golden_script()
    ref = script.tiny_vit_reference(img_size=size)
    state = script.mobile_sam_names({k: v.detach() for k, v in ref.state_dict().items()})
    ours = TinyViT(
        nn.VarBuilder.from_dict({k: v.numpy() for k, v in state.items()}), TinyViTConfig()
    )
    x = np.random.default_rng(0).standard_normal((1, 3, size, size)).astype(np.float32)
    return ours, ref, x


def _encoder(which: str, size: int):
    import torch

    import workbench as wb
    from workbench.autograd import no_grad

    ours, ref, x = build_tiny_vit(size) if which == "tiny_vit" else build(which, size)
    xa, tx = wb.tensor(x), torch.from_numpy(x.copy())

    def ours_run():
        with no_grad():
            return ours(xa).numpy()

    def torch_run():
        with torch.inference_mode():
            return ref(tx).numpy()

    return {"workbench": ours_run, "torch": torch_run}


WORKLOADS = [
    Workload(
        "sam/vit_b-encoder/1024",
        partial(_encoder, "vit_b", 1024),
        target=0.9,
        tolerance=1e-2,
        note="1x3x1024x1024 -> 1x256x64x64, 12 blocks (4 global), random weights",
    ),
    Workload(
        "sam/tiny_vit-encoder/1024",
        partial(_encoder, "tiny_vit", 1024),
        target=0.9,
        tolerance=1e-2,
        note="MobileSAM's TinyViT-5M: 1x3x1024x1024 -> 1x256x64x64, random weights",
    ),
]


def _peak(impl: str, which: str, size: int, repeats: int) -> None:
    import resource
    import time

    fns = _encoder(which, size)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fns[impl]()
        times.append(time.perf_counter() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"{impl}: median {np.median(times):.3f} s, peak RSS {peak / 1024:.0f} MiB "
        f"(+{(peak - base) / 1024:.0f} MiB over the built model)"
    )


if __name__ == "__main__":
    import argparse
    import subprocess

    p = argparse.ArgumentParser(description="SAM encoder time and peak memory, one process each")
    p.add_argument("--which", default="vit_b", help="vit_b, vit_l, vit_h or tiny_vit")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--impl", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.impl:
        _peak(a.impl, a.which, a.size, a.repeats)
    else:
        for impl in ("workbench", "torch"):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.bench_sam",
                    "--impl",
                    impl,
                    "--which",
                    a.which,
                    "--size",
                    str(a.size),
                    "--repeats",
                    str(a.repeats),
                ],
                check=True,
            )
