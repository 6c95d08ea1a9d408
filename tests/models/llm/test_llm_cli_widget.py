"""The command line, the chat widget and the gallery entry."""

from __future__ import annotations

import pytest

from workbench.models import llm
from workbench.models.llm.__main__ import main


@pytest.fixture(scope="module")
def path(tiny):
    return tiny("gemma3", "Q8_0")[1]


def test_cli_prompt_and_chat(path, capsys, monkeypatch):
    expected = llm.load(path).generate("Hello", 6)
    assert main(["--gguf", str(path), "--prompt", "Hello", "-n", "6"]) == 0
    out = capsys.readouterr()
    assert out.out.rstrip("\n") == expected and "tok/s" in out.err
    lines = iter(["Hi", "Again", ""])
    monkeypatch.setattr("builtins.input", lambda _: next(lines))
    assert main(["--gguf", str(path), "-n", "4"]) == 0
    assert capsys.readouterr().err.count("stop:") == 2
    assert main(["--gguf", str(path.parent / "missing.gguf")]) == 1


def test_chat_widget_streams_and_stops(path):
    pytest.importorskip("ipywidgets")
    from workbench.models.llm.widget import ChatWidget

    model = llm.load(path)
    w = ChatWidget(model, max_new_tokens=5)
    w.submit("Hello", wait=True)
    assert [m["role"] for m in w.messages] == ["user", "assistant"]
    assert w.messages[1]["content"] == model.chat([{"role": "user", "content": "Hello"}], 5)
    assert "tok/s" in w.status.value and "memory" in w.status.value
    w._stop.set()  # a stop before the first token ends the reply after one piece at most
    w.max_new_tokens = 50
    w._reply()
    assert model.last_stats.new_tokens < 50 or model.last_stats.stop_reason != "length"


def test_gallery_entry(path, tmp_path):
    pytest.importorskip("ipywidgets")
    from workbench import registry
    from workbench.models.llm import gallery

    entry = registry.get("llm-chat")
    assert entry.panel is not None
    model = entry.load(str(path))
    assert entry.run(model, prompt="Hi", max_new_tokens=3).text.startswith("Hi")
    with pytest.raises(registry.WeightsNotFound):
        entry.load(str(tmp_path / "none.gguf"))
    panel = gallery.LlmPanel(str(path))
    panel.load()
    assert panel.chat is not None and panel.chat.box in panel.box.children
