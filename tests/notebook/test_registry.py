"""The lazy registry: the shipped models are listed without importing their code, code loads on
first use, and other packages add entries through the ``workbench.gallery`` entry points."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench import registry
from workbench.models.catalog import SPECS

SHIPPED = ["yolov8n", "yolov8n-pose", "sam-vit-b", "sam-vit-b-point", "mobile-sam-point",
           "sdxl-turbo", "sdxl-base", "llm-chat"]  # fmt: skip

# Runs in a fresh interpreter: what a new kernel sees. A fake distribution on sys.path declares
# two entry points, a good one and one whose module does not import.
_SCRIPT = """
import json, sys, warnings
sys.path.insert(0, {plugins!r})
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import workbench as wb
    from workbench import registry
    from workbench.notebook.gallery import Gallery
    names = list(registry.entries())
    gallery = Gallery()
loaded = sorted(m for m in sys.modules
                if m.startswith("workbench.models.") and m != "workbench.models.catalog")
options = [value for _, value in gallery.model.options]
entry = registry.get("yolov8n")
after = sorted(m for m in sys.modules if m.startswith("workbench.models.yolov8"))
plugin = registry.get("plugin-model")
print(json.dumps(dict(
    names=names, loaded=loaded, options=options, first=gallery.model.value,
    description=gallery.description.value, samples=list(gallery.sample.options),
    entry=type(entry).__name__, callable=callable(entry.load), after=after,
    plugin=[plugin.display_name, plugin.run(None, None).text],
    warnings=[str(w.message) for w in caught if "workbench gallery" in str(w.message)],
)))
"""


def _plugins(tmp_path: Path) -> Path:
    root = tmp_path / "plugins"
    (root / "wb_plugin_demo").mkdir(parents=True)
    (root / "wb_plugin_demo" / "__init__.py").write_text("")
    (root / "wb_plugin_demo" / "spec.py").write_text(textwrap.dedent("""
        from workbench.registry import Spec
        SPEC = Spec("Plugin model", "from another package", "org/plugin",
                    code="wb_plugin_demo.code")
    """))  # fmt: skip
    (root / "wb_plugin_demo" / "code.py").write_text(textwrap.dedent("""
        from workbench import registry
        registry.register("plugin-model", registry.spec("plugin-model").entry(
            load=str, run=lambda runner, image: registry.Result([], text="ran")))
    """))  # fmt: skip
    info = root / "wb_plugin_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wb-plugin-demo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[workbench.gallery]\nplugin-model = wb_plugin_demo.spec:SPEC\n"
        "broken-model = wb_plugin_demo.missing:SPEC\n"
    )
    return root


def test_fresh_kernel_lists_every_model_without_importing_model_code(tmp_path):
    script = _SCRIPT.format(plugins=str(_plugins(tmp_path)))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, check=True)  # fmt: skip
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["names"][: len(SHIPPED)] == SHIPPED and "plugin-model" in seen["names"]
    assert seen["loaded"] == []  # listing imported no model package
    assert seen["options"] == seen["names"] and seen["first"] == "yolov8n"
    assert "Object detection" in seen["description"] and seen["samples"] == ["synthetic"]
    # Code loads on first use.
    assert seen["entry"] == "Entry" and seen["callable"]
    assert "workbench.models.yolov8.gallery" in seen["after"]
    assert seen["plugin"] == ["Plugin model", "ran"]
    # The broken plug-in is skipped with a warning naming it; the others still show.
    assert "broken-model" not in seen["names"]
    assert len(seen["warnings"]) == 1 and "broken-model" in seen["warnings"][0]


def test_catalog_matches_the_model_code():
    """The catalogue repeats a few facts of the model packages: check them against the code."""
    from workbench.models import sam, stable_diffusion, yolov8

    assert SPECS["yolov8n"].weights == yolov8.HUB_REPO
    assert SPECS["yolov8n"].local_path.endswith("/" + yolov8.hub_filename("n"))
    assert SPECS["yolov8n-pose"].local_path.endswith("/" + yolov8.hub_filename("n", pose=True))
    for name in ("sam-vit-b", "sam-vit-b-point"):
        assert SPECS[name].weights == sam.HUB_REPO
        assert SPECS[name].local_path.endswith("/" + sam.HUB_FILES["vit_b"])
    assert SPECS["mobile-sam-point"].local_path.endswith("/" + sam.HUB_FILES["mobile_sam"])
    assert SPECS["sdxl-turbo"].weights == stable_diffusion.SDXL_TURBO_REPO
    assert SPECS["sdxl-base"].weights == stable_diffusion.SDXL_BASE_REPO
    for name, spec in SPECS.items():
        entry = registry.get(name)
        assert isinstance(entry, registry.Entry)
        assert (entry.display_name, entry.weights, entry.local_path) == (
            spec.display_name, spec.weights, spec.local_path)  # fmt: skip
        assert sorted(entry.samples) == sorted(spec.samples)
        assert entry.has_panel == spec.has_panel


def test_spec_without_registered_code_is_an_error(monkeypatch):
    monkeypatch.setattr(registry, "_ENTRIES", {})
    monkeypatch.setattr(registry, "_discovered", True)
    registry.register("ghost", registry.Spec("Ghost", "nothing", "org/ghost", code="json"))
    assert list(registry.entries()) == ["ghost"]
    with pytest.raises(registry.RegistryError, match="importing json did not register.*'ghost'"):
        registry.get("ghost")
    with pytest.raises(registry.RegistryError, match="no model 'nope' in the registry \\(ghost\\)"):
        registry.get("nope")
    # A spec never hides code that is already loaded.
    full = registry.spec("ghost").entry(load=str, run=registry.Result)
    registry.register("ghost", full)
    registry.register("ghost", registry.Spec("Ghost", "again", "org/ghost", code="json"))
    assert registry.get("ghost") is full
    with pytest.raises(TypeError, match="Entry or Spec"):
        registry.register("bad", {"load": None})
