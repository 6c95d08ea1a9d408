"""The gallery entry ``llm-chat`` (``wb.gallery()``): chat with any local GGUF model.

Its panel asks for a ``.gguf`` path (default ``~/.cache/workbench/llm.gguf``), loads it and
shows a :class:`ChatWidget`. No weights ship with workbench and none download from here; the
panel says so when the file is not there. Described (name, weights path, ...) in
``workbench.models.catalog``, so the gallery lists it without importing this module; registered
when this module is imported.
"""

from __future__ import annotations

import html
import os

from ... import registry

SPEC = registry.spec("llm-chat")
LOCAL = SPEC.local_path


def load_model(weights: str):
    from .llm import load

    path = os.path.expanduser(weights or LOCAL)
    if not os.path.isfile(path):
        raise registry.WeightsNotFound(
            f"no GGUF file at {path}: put a model there (e.g. converted with "
            "`python -m workbench.quantized convert HF_FOLDER OUT.gguf --type Q8_0`)"
        )
    return load(path)


def run(model, image=None, prompt: str = "The capital of France is", **options) -> registry.Result:
    """One completion for the generic gallery (``image`` is ignored)."""
    return registry.Result([], text=prompt + model.generate(prompt, **options))


class LlmPanel:
    """A path box and Load button; the chat widget appears once a model is loaded."""

    def __init__(self, weights: str = LOCAL):
        import ipywidgets as w

        self.path = w.Text(value=weights, description="GGUF", layout=w.Layout(width="520px"))
        self.load_button = w.Button(description="Load", button_style="primary")
        self.status = w.HTML()
        self.chat = None
        self.box = w.VBox([w.HBox([self.path, self.load_button]), self.status])
        self.load_button.on_click(lambda _: self.load())

    def load(self) -> None:
        from .widget import ChatWidget

        try:
            model = load_model(self.path.value)
        except Exception as e:  # shown in the panel
            self.status.value = f"<b>Cannot load</b>: {html.escape(str(e))}"
            return
        self.status.value = html.escape(repr(model))
        self.chat = ChatWidget(model)
        self.box.children = (*self.box.children[:2], self.chat.box)

    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)


def _panel(entry: registry.Entry) -> LlmPanel:
    return LlmPanel(entry.local_path or LOCAL)


registry.register(
    "llm-chat", SPEC.entry(load=load_model, run=run, options={"max_new_tokens": 32}, panel=_panel)
)
