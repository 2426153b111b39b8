"""The check results panel: findings of codec.ops.check as they arrive; Enter jumps to one."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from codec.values import printable
from inspector.tui.actions import CHECK, bindings
from inspector.tui.widgets.jobbar import JobBar


class CheckScreen(ModalScreen[Any]):
    """Findings of codec.ops.check; Enter jumps to the chunk or offset of one.

    Opened when the check starts (``running``): a progress bar shows how far it has got and
    findings are added as they arrive; closing the panel stops the check.
    """

    BINDINGS = bindings(CHECK)
    LIMIT = 10_000
    """Findings listed at most (a file of millions of bad chunks: `mosqdb check` lists them all)."""

    def __init__(self, findings: list[Any], running: bool = False, broker: str | None = None) -> None:
        super().__init__()
        self.broker = broker  # the findings are graded for this Mosquitto release (its verdict heads the panel)
        self.release = broker  # the release itself once known (``auto`` names one)
        self._verdict: Text | None = None
        self.findings: list[Any] = []  # those listed (at most LIMIT)
        self.more: dict[str, int] = {}  # per severity, findings past the limit
        self.running = running
        self._initial = findings

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal-box", id="check-box"):
            yield Label(self.title_line(), id="check-title")
            yield Static("", id="check-verdict")
            yield JobBar(only="check", id="check-job")
            yield OptionList(id="check-list")

    def on_mount(self) -> None:
        self._show_verdict()
        self.add_findings(self._initial, finished=not self.running)

    def set_verdict(self, lines: Text, release: str) -> None:
        """The verdict of Mosquitto ``release`` (and the lines it logs) above the findings."""
        self.release = release
        self._verdict = lines
        if self.is_mounted:  # else on_mount shows it
            self._show_verdict()

    def _show_verdict(self) -> None:
        box = self.query_one("#check-verdict", Static)
        box.update(self._verdict or "")
        box.display = self._verdict is not None
        self.query_one("#check-title", Label).update(self.title_line())

    def total(self) -> int:
        """Every finding so far, listed or not."""
        return len(self.findings) + sum(self.more.values())

    def title_line(self) -> str:
        errors = sum(1 for f in self.findings if f.severity == "error") + self.more.get("error", 0)
        counts = f"{errors:,} error(s), {self.total() - errors:,} warning(s)"
        name = f"check for Mosquitto {self.release}" if self.release else "check"
        if self.running:
            return f"{name}: {counts} so far — Enter jumps, Esc stops the check"
        return f"{name}: {counts} — Enter jumps, Esc closes"

    def add_findings(self, findings: list[Any], finished: bool, more: dict[str, int] | None = None) -> None:
        """Append findings (as the checker streams them); ``finished`` with the last batch.

        Past :attr:`LIMIT` findings are only counted, per severity (and ``more`` counts ones never sent).
        """
        room = max(self.LIMIT - len(self.findings), 0)
        findings, rest = findings[:room], findings[room:]
        for f in rest:
            self.more[f.severity] = self.more.get(f.severity, 0) + 1
        for severity, n in (more or {}).items():
            self.more[severity] = self.more.get(severity, 0) + n
        option_list = self.query_one(OptionList)
        errors_first = [f for f in findings if f.severity == "error"] + [f for f in findings if f.severity != "error"]
        if any(f.severity == "error" for f in findings) and any(f.severity != "error" for f in self.findings):
            # errors come first: an error after warnings already listed rebuilds the list (rare, and at most LIMIT)
            combined = self.findings + findings
            self.findings = ([f for f in combined if f.severity == "error"]
                             + [f for f in combined if f.severity != "error"])
            highlighted = option_list.highlighted
            option_list.clear_options()
            options = [self.option(k, f) for k, f in enumerate(self.findings)]
            option_list.add_options(options)
            option_list.highlighted = 0 if highlighted is not None else None
            options = []
        else:
            options = [self.option(k, f) for k, f in enumerate(errors_first, len(self.findings))]
            self.findings.extend(errors_first)
        if finished:
            self.running = False
            if not self.findings:
                options.append(Option("no findings: the file is consistent", id="none", disabled=True))
            elif self.more:
                options.append(Option(f"… and {sum(self.more.values()):,} more: `mosqdb check` lists "
                                      "every finding", id="more", disabled=True))
        option_list.add_options(options)
        self.query_one("#check-title", Label).update(self.title_line())

    @staticmethod
    def option(k: int, f: Any) -> Option:
        style = "bold red" if f.severity == "error" else "yellow"
        label = Text.assemble((f"{f.severity:7} ", style), (f"{f.rule} ", "bold"), printable(f"{f.where()}: {f.message}" if f.where() else f.message))
        return Option(label, id=str(k))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id and event.option.id.isdigit():
            self.dismiss(self.findings[int(event.option.id)])

    def action_close(self) -> None:
        self.dismiss(None)
