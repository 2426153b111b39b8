"""The footer: what the keys do in the focused pane, drawn from the actions table.

Textual's own Footer lists every shown binding of the focus chain, app bindings last, and cuts
what does not fit, so at 80 columns Save and Help fell off. This bar takes the table's entries
for the focused pane (:func:`inspector.tui.actions.footer`) in rank order and shows as many as
fit, so the first ones (Save, Undo, Help) always stay. A click on a key presses it.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.events import Click
from textual.widget import Widget

from inspector.tui.actions import Action, footer, key_display

KEY_STYLE = Style(bold=True, color="black", bgcolor="grey70")
LABEL_STYLE = Style(color="grey85")
DISABLED_STYLE = Style(color="grey42")


class KeyBar(Widget):
    """One line of ``key label`` pairs for the pane that has the focus."""

    DEFAULT_CSS = """
    KeyBar { height: 1; background: $panel-darken-2; }
    """

    def __init__(self, **kw: str) -> None:
        super().__init__(**kw)
        self.pane = "list"
        self.read_only = False
        self.spans: list[tuple[int, int, str]] = []  # (start, end, key) of each shown entry, for clicks

    def show_pane(self, pane: str, read_only: bool = False) -> None:
        if (pane, read_only) != (self.pane, self.read_only):
            self.pane, self.read_only = pane, read_only
            self.refresh()

    def entries(self) -> list[Action]:
        return footer(self.pane)

    def render(self) -> Text:
        width = self.size.width or 80
        out = Text(no_wrap=True, overflow="crop")
        self.spans = []
        for a in self.entries():
            key = a.keys.split(",")[0]
            cell = Text.assemble((f" {key_display(key)} ", KEY_STYLE),
                                 (f"{a.label} ", DISABLED_STYLE if a.writes and self.read_only else LABEL_STYLE))
            if out.cell_len + cell.cell_len > width:
                continue  # a shorter one further on may still fit
            self.spans.append((out.cell_len, out.cell_len + cell.cell_len, key))
            out.append_text(cell)
        return out

    def shown(self) -> list[str]:
        """The labels on the bar now (as a person reads them; tests use it)."""
        self.render()
        labels = {a.keys.split(",")[0]: a.label for a in self.entries()}
        return [labels[key] for _s, _e, key in self.spans]

    def on_click(self, event: Click) -> None:
        for start, end, key in self.spans:
            if start <= event.x < end and (key.isalnum() or key.startswith("ctrl+") or key in ("escape", "enter",
                                                                                               "tab", "slash",
                                                                                               "question_mark")):
                self.app.simulate_key(key)
                return


__all__ = ["KeyBar"]
