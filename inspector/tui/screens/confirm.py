"""The two questions before leaving or saving: unsaved changes on quit, new errors before a save."""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from codec.values import printable
from inspector.tui.actions import CONFIRM_QUIT, CONFIRM_SAVE, bindings


class ConfirmQuit(ModalScreen[str | None]):
    """Unsaved edits: save, discard or go back."""

    BINDINGS = bindings(CONFIRM_QUIT)

    def __init__(self, edits: int) -> None:
        super().__init__()
        self.edits = edits

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal-box", id="quit-box"):
            yield Label(f"{self.edits} unsaved edit(s). Save before quitting?")
            with Horizontal(id="quit-buttons"):
                yield Button(escape("Save [s]"), id="save", variant="primary")  # not markup: the keys show
                yield Button(escape("Discard [d]"), id="discard", variant="error")
                yield Button(escape("Cancel [esc]"), id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)

    def action_choose(self, what: str | None) -> None:
        self.dismiss(what)


class ConfirmSave(ModalScreen[bool]):
    """The saved file would hold errors it has not now: list them, then save anyway or go back."""

    BINDINGS = bindings(CONFIRM_SAVE)
    SHOWN = 12

    def __init__(self, errors: list[Any], where: list[str], target: str) -> None:
        super().__init__()
        self.errors = errors
        self.where = where  # each error's chunk as the list numbers it (retain[new] for an added one)
        self.target = target

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal-box", id="confirm-save-box"):
            yield Static(f"Saving {printable(os.path.basename(self.target))} would write {len(self.errors):,} new error(s) that "
                         "`mosqdb check` reports (the broker drops or refuses what they name):",
                         id="confirm-save-title")
            lines = [Text.assemble(("error ", "bold red"), (f"{f.rule} ", "bold"), printable(f"{w}: {f.message}"))
                     for f, w in zip(self.errors[: self.SHOWN], self.where, strict=False)]
            if len(self.errors) > self.SHOWN:
                lines.append(Text(f"… and {len(self.errors) - self.SHOWN:,} more"))
            yield Static(Text("\n").join(lines), id="confirm-save-list")
            with Horizontal(id="quit-buttons"):
                yield Button(escape("Save anyway [s]"), id="save", variant="warning")
                yield Button(escape("Go back [esc]"), id="cancel", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "save")

    def action_choose(self, save: bool) -> None:
        self.dismiss(save)
