"""The help screen (``?``): the keys and the marks legend in one scrolling modal."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from inspector.tui.actions import HELP_SCREEN, bindings, help_text

LEGEND = """\
[b]Marks[/b]  * edited  + new  D deleted  !! does not decode  ⚠ damage
         second column (v): + not in the other file  ~ changed from it
[b]Hex[/b]    blue header, grey lengths, dim padding, magenta
         unknown bytes, underlined = edited, gold = selected field"""

HELP = help_text() + "\n" + LEGEND
"""The help screen: every key from the actions table, then what the marks and colours mean."""


class HelpScreen(ModalScreen[None]):
    BINDINGS = bindings(HELP_SCREEN)

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box", id="help-box"):
            yield Static(HELP, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
