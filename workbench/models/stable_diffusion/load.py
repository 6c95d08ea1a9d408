"""Finding SDXL weights: a diffusers-layout folder (``model_index.json`` with ``text_encoder/``,
``text_encoder_2/``, ``tokenizer/``, ``tokenizer_2/``, ``unet/``, ``vae/``, ``scheduler/``)
on disk or in the Hugging Face cache, fetched through ``workbench.io.hub`` with only the files
the pipeline reads (configs, tokenizer files and the safetensors of one variant; never
``.bin`` / ``.ckpt``).

    folder = resolve(SDXL_TURBO_REPO, variant="fp16")        # hub snapshot (or the cache offline)
    path = weights_path(folder / "unet", "fp16")        # unet/diffusion_pytorch_model.fp16...

Offline without the files, ``resolve`` raises ``registry.WeightsNotFound`` naming the repo,
the missing files and the command that fetches them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ... import registry
from ...io import hub
from ...io.errors import HubError, HubOfflineError

SDXL_BASE_REPO = "stabilityai/stable-diffusion-xl-base-1.0"
SDXL_TURBO_REPO = "stabilityai/sdxl-turbo"
VAE_FP16_FIX_REPO = "madebyollin/sdxl-vae-fp16-fix"
KNOWN_REPOS = {
    SDXL_BASE_REPO: "SDXL 1.0 base: 1024x1024, 25-50 steps, guidance 5-7",
    SDXL_TURBO_REPO: "SDXL-Turbo (adversarial distillation): 512x512, 1-4 steps, guidance 0",
    VAE_FP16_FIX_REPO: "the SDXL VAE fine-tuned to run in f16 without overflowing",
}

# component folder -> file stem of its weights
WEIGHT_STEMS = {
    "text_encoder": "model",
    "text_encoder_2": "model",
    "unet": "diffusion_pytorch_model",
    "vae": "diffusion_pytorch_model",
}
TOKENIZER_FILES = ("vocab.json", "merges.txt")
COMPONENTS = ("text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2", "unet", "vae",
              "scheduler")  # fmt: skip
CONFIG_NAMES = {
    "text_encoder": "config.json",
    "text_encoder_2": "config.json",
    "unet": "config.json",
    "vae": "config.json",
    "scheduler": "scheduler_config.json",
}


def _looks_local(source: str) -> bool:
    return source.startswith(("/", ".", "~")) or os.path.isdir(os.path.expanduser(source))


def weights_candidates(component: str, variant: str | None) -> list[str]:
    """File names (relative to the pipeline folder) that hold ``component``'s weights, best
    first: the variant's single file or shard index, then the plain ones."""
    stem = f"{component}/{WEIGHT_STEMS[component]}"
    names = []
    if variant:
        names += [f"{stem}.{variant}.safetensors", f"{stem}.safetensors.index.{variant}.json"]
    return names + [f"{stem}.safetensors", f"{stem}.safetensors.index.json"]


def weights_path(folder: Path, component: str, variant: str | None = None) -> Path:
    """The safetensors file (or shard index) of ``component`` under the pipeline ``folder``;
    the plain file when the variant has none. Raises ``WeightsNotFound`` listing what it
    looked for."""
    for name in weights_candidates(component, variant):
        if (folder / name).is_file():
            return folder / name
    looked = ", ".join(weights_candidates(component, variant))
    raise registry.WeightsNotFound(
        f"no {component} weights in {folder}: looked for {looked} (only safetensors are read; "
        "convert .bin/.ckpt checkpoints first)"
    )


def _required(folder: Path, components: tuple[str, ...], variant: str | None = None) -> list[str]:
    """The files of ``components`` that ``folder`` lacks (weights: any variant will do)."""
    missing = [] if (folder / "model_index.json").is_file() else ["model_index.json"]
    for component in components:
        if component.startswith("tokenizer"):
            files = (f"{component}/{n}" for n in TOKENIZER_FILES)
            missing += [f for f in files if not (folder / f).is_file()]
            continue
        config = f"{component}/{CONFIG_NAMES[component]}"
        if not (folder / config).is_file():
            missing.append(config)
        if component in WEIGHT_STEMS:
            plain = any((folder / n).is_file() for n in weights_candidates(component, None))
            if not plain and not _variant_names(folder, component):
                missing.append(weights_candidates(component, variant)[0])
    return missing


def _variant_names(folder: Path, component: str) -> list[str]:
    directory = folder / component
    if not directory.is_dir():
        return []
    stem = WEIGHT_STEMS[component]
    return [f"{component}/{p.name}" for p in directory.glob(f"{stem}.*.safetensors")]


def allow_patterns(variant: str | None, components: tuple[str, ...]) -> list[str]:
    """The hub files a pipeline needs: configs and tokenizer files (``*.json``, ``*.txt``) and
    one variant's safetensors per model (never ``.bin`` / ``.ckpt``)."""
    patterns = ["*.json", "*.txt"]
    for component in components:
        if component in WEIGHT_STEMS:
            patterns.append(weights_candidates(component, variant)[0])
    return patterns


def _not_found(repo: str, missing: list[str], patterns: list[str], why: str) -> Exception:
    known = f" ({KNOWN_REPOS[repo]})" if repo in KNOWN_REPOS else ""
    include = " ".join(f"'{p}'" for p in patterns)
    return registry.WeightsNotFound(
        f"Stable Diffusion XL weights {repo!r}{known} are not available: {why}; missing "
        f"{', '.join(missing)}. Fetch them once while online with "
        f"`hf download {repo} --include {include}` (into the Hugging Face cache), or pass the "
        "path of a local folder in the diffusers layout"
    )


def resolve(
    repo_or_dir: str | os.PathLike,
    variant: str | None = None,
    components: tuple[str, ...] = COMPONENTS,
    revision: str | None = None,
) -> Path:
    """The local pipeline folder of ``repo_or_dir`` holding ``components``: the folder itself,
    or a hub snapshot with only the files needed (``allow_patterns``)."""
    source = str(repo_or_dir)
    if _looks_local(source):
        folder = Path(os.path.expanduser(source))
        if not folder.is_dir():
            raise registry.WeightsNotFound(f"no Stable Diffusion XL folder at {folder}")
        missing = _required(folder, components)
        if missing:
            raise registry.WeightsNotFound(
                f"{folder} is not a complete SDXL folder (diffusers layout): missing "
                f"{', '.join(missing)}"
            )
        return folder
    patterns = allow_patterns(variant, components)
    try:
        folder = hub.snapshot(source, revision, allow_patterns=patterns)
    except HubError as e:
        where = f"the Hugging Face cache {e.cache_dir}"
        why = (
            f"offline (HF_HUB_OFFLINE=1) and not in {where}"
            if isinstance(e, HubOfflineError)
            else f"{e.__class__.__name__}: {e}"
        )
        raise _not_found(source, ["all of its files"], patterns, why) from e
    for component in (c for c in components if c in WEIGHT_STEMS):
        names = weights_candidates(component, variant)  # the variant's, then the plain ones
        if variant and not any((folder / n).is_file() for n in names):
            try:  # the repo has no such variant for this component: its plain file
                hub.file(source, weights_candidates(component, None)[0], revision)
            except HubError:
                pass  # reported as missing below
    missing = _required(folder, components, variant)
    if missing:
        why = "offline and not in the cache" if hub.is_offline() else "the snapshot lacks them"
        raise _not_found(source, missing, patterns, why)
    return folder


def resolve_vae(repo_or_dir: str | os.PathLike, revision: str | None = None) -> Path:
    """The folder of a standalone VAE (``config.json`` + ``diffusion_pytorch_model
    .safetensors``, e.g. ``madebyollin/sdxl-vae-fp16-fix``), or a pipeline's ``vae/``."""
    source = str(repo_or_dir)
    names = ["config.json", "diffusion_pytorch_model.safetensors"]
    if _looks_local(source):
        folder = Path(os.path.expanduser(source))
        if (folder / "vae").is_dir():
            folder = folder / "vae"
    else:
        try:
            folder = hub.snapshot(source, revision, allow_patterns=names)
        except HubError as e:
            raise _not_found(source, names, names, str(e)) from e
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise _not_found(source, missing, names, f"{folder} lacks them")
    return folder


def config_dict(source: str | os.PathLike | dict, name: str = "config.json") -> dict:
    """A parsed config: ``source`` itself when it is a dict, else the JSON file at ``source``
    (a folder means its ``name``)."""
    if isinstance(source, dict):
        return source
    path = Path(os.path.expanduser(str(source)))
    if path.is_dir():
        path = path / name
    return json.loads(path.read_text(encoding="utf-8"))


def read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise registry.WeightsNotFound(f"cannot read {path}: {e}") from e


def is_turbo(repo_or_dir: str | os.PathLike) -> bool:
    """SDXL-Turbo by name (the repo id or a folder named like it)."""
    return "turbo" in str(repo_or_dir).lower()
