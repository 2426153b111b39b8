"""A one-line prompt: goto target, search text, a field value, a path."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from codec.values import printable
from inspector.tui.actions import PROMPT, bindings


class PromptScreen(ModalScreen[str | None]):
    """Ask for one line of text (goto target, search text, a field value, a path).

    ``check(text)`` says why a text is refused (None: accepted): a refused text stays in the
    prompt, with the reason under it, so what is typed next corrects it instead of running as
    commands in the pane below. Only Enter on an accepted text or Esc closes the prompt.
    """

    BINDINGS = bindings(PROMPT)

    def __init__(self, title: str, value: str = "", placeholder: str = "", hint: str = "",
                 check: Callable[[str], str | None] | None = None) -> None:
        super().__init__()
        self.title_text, self.value, self.placeholder, self.hint = title, value, placeholder, hint
        self.check = check

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box", classes="modal-box"):
            yield Label(self.title_text, id="prompt-title")
            yield Input(self.value, placeholder=self.placeholder, id="prompt-input")
            if self.hint:
                yield Static(self.hint, id="prompt-hint")
            error = Static("", id="prompt-error")
            error.display = False
            yield error

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        why = self.check(event.value) if self.check is not None and event.value.strip() else None
        if why is not None:
            error = self.query_one("#prompt-error", Static)
            error.update(Text(printable(why)))
            error.display = True
            say = getattr(self.app, "say", None)
            if say is not None:  # the status line says it too
                say(why, "warning")
            event.input.focus()
            return
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
