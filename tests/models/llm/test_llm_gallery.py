"""The ``llm-chat`` gallery entry is described once, in the catalogue the gallery lists."""

from __future__ import annotations

from workbench import registry
from workbench.models.catalog import SPECS


def test_the_entry_is_the_catalogue_spec_with_its_code():
    from workbench.models.llm import gallery

    spec = SPECS["llm-chat"]
    assert gallery.SPEC is spec and gallery.LOCAL == spec.local_path
    assert spec.code == gallery.__name__ and spec.has_panel
    entry = registry.get("llm-chat")
    described = (entry.display_name, entry.description, entry.weights, entry.local_path)
    assert described == (spec.display_name, spec.description, spec.weights, spec.local_path)
    assert entry.load is gallery.load_model and entry.panel is not None
