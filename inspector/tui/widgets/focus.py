"""A mixin for the inspector's panes whose cursor row is drawn differently with focus."""

from __future__ import annotations

from typing import Any


class RepaintOnFocus:
    """Repaint when focus comes and goes (Textual finds these handlers through the MRO)."""

    refresh: Any

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
