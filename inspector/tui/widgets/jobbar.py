"""The running job's line: what it does, a progress bar with percent, how many it found, "Esc stops".

Hidden unless a job runs, so it takes no room on a quiet screen. The app feeds it the newest
:class:`~inspector.tui.messages.ScanProgress` of the job it shows (see ``InspectorApp.refresh_jobs``).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar

from inspector.tui.messages import ScanProgress
from inspector.tui.model.jobs import JOB_TITLES


class JobBar(Horizontal):
    """One line: ``checking  ━━━━━━━━━━━━╸━━━━━  41%  12 found  Esc stops``. ``only``: the one job it shows."""

    DEFAULT_CSS = """
    JobBar { height: 1; display: none; background: $panel-darken-1; padding: 0 1; }
    JobBar > Label { width: auto; margin-right: 2; }
    JobBar > ProgressBar { width: auto; margin-right: 2; }
    JobBar > #job-hint { color: $text-muted; }
    """

    def __init__(self, only: str | None = None, **kw: str) -> None:
        super().__init__(**kw)
        self.only = only
        self.shown: ScanProgress | None = None

    def compose(self) -> ComposeResult:
        yield Label("", id="job-title")
        yield ProgressBar(total=None, show_eta=False, id="job-progress")
        yield Label("", id="job-found")
        yield Label("", id="job-hint")

    def show(self, msg: ScanProgress | None) -> None:
        """Show a job's progress, or hide the line (None)."""
        self.shown = msg
        if msg is None:
            self.display = False
            return
        self.query_one("#job-title", Label).update(JOB_TITLES.get(msg.job, msg.job) + "…")
        bar = self.query_one(ProgressBar)
        if msg.total > 0:
            bar.update(total=msg.total, progress=min(msg.done, msg.total))
        else:
            bar.update(total=None)
        what = "chunks" if msg.job == "index" else ("written" if msg.job == "export" else "found")
        known = msg.found >= 0 and msg.job != "export"
        self.query_one("#job-found", Label).update(f"{msg.found:,} {what}" if known else "")
        self.query_one("#job-hint", Label).update("" if msg.job == "index" else "Esc stops")
        self.display = True


__all__ = ["JobBar"]
