"""A notebook chat widget: ``ChatWidget(model)`` (ipywidgets).

Replies stream in token by token from a background thread; Stop ends the reply at the next
token; the status line shows prompt and decode tokens/s and the process's resident memory.
"""

from __future__ import annotations

import html
import threading

from ...printing import human_bytes
from .llm import LLM


def resident_bytes() -> int:
    """The process's resident set size (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/statm") as f:
            import os

            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class ChatWidget:
    """Chat with ``model`` in a notebook; ``.box`` is the widget, ``.messages`` the history."""

    def __init__(
        self, model: LLM, max_new_tokens: int = 256, system: str | None = None, **sampling
    ):
        import ipywidgets as w

        self.model = model
        self.max_new_tokens = max_new_tokens
        self.sampling = sampling
        self.messages: list[dict] = [{"role": "system", "content": system}] if system else []
        self.log = w.HTML(
            layout=w.Layout(min_height="120px", border="1px solid #ccc", padding="6px")
        )
        self.input = w.Text(placeholder="Message", layout=w.Layout(width="70%"))
        self.send = w.Button(description="Send", button_style="primary")
        self.stop_button = w.Button(description="Stop", disabled=True)
        self.status = w.Label(value=str(model))
        self.box = w.VBox(
            [self.log, w.HBox([self.input, self.send, self.stop_button]), self.status]
        )
        self.send.on_click(lambda _: self.submit())
        self.stop_button.on_click(lambda _: self._stop.set())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._render()

    def _ipython_display_(self):
        from IPython.display import display

        display(self.box)

    def _render(self, partial: str | None = None) -> None:
        rows = [(m["role"], m["content"]) for m in self.messages if m["role"] != "system"]
        if partial is not None:
            rows.append(("assistant", partial + "▌"))
        self.log.value = "".join(
            f"<div><b>{html.escape(r)}:</b> <span style='white-space:pre-wrap'>"
            f"{html.escape(c)}</span></div>"
            for r, c in rows
        )

    def submit(self, text: str | None = None, wait: bool = False) -> None:
        """Send ``text`` (default: the input box) and stream the reply; ``wait`` blocks."""
        text = self.input.value if text is None else text
        if not text.strip() or (self._thread is not None and self._thread.is_alive()):
            return
        self.input.value = ""
        self.messages.append({"role": "user", "content": text})
        self._stop.clear()
        self.send.disabled, self.stop_button.disabled = True, False
        self._thread = threading.Thread(target=self._reply, name="wb-llm-chat", daemon=True)
        self._thread.start()
        if wait:
            self._thread.join()

    def _reply(self) -> None:
        reply = ""
        try:
            for piece in self.model.chat_stream(
                self.messages, self.max_new_tokens, **self.sampling
            ):
                reply += piece
                self._render(reply)
                if self._stop.is_set():
                    break
        except Exception as e:  # shown in the widget: a thread has nobody else to tell
            reply += f"\n[error: {e}]"
        self.messages.append({"role": "assistant", "content": reply})
        self._render()
        s = self.model.last_stats
        self.status.value = (
            f"prompt {s.prompt_tokens} tok ({s.cached_tokens} cached) "
            f"{s.prompt_tokens_per_second:.1f} tok/s · {s.new_tokens} new "
            f"{s.tokens_per_second:.1f} tok/s · memory {human_bytes(resident_bytes())}"
            + (" · stopped" if self._stop.is_set() else "")
        )
        self.send.disabled, self.stop_button.disabled = False, True
