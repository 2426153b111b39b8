"""Marking what differs from a second file: ``v`` (or ``inspect FILE --diff OTHER``), the header line, ``V``.

The comparison (:mod:`inspector.tui.model.diffmarks`, the content diff of ``mosqdb diff``) runs in a worker
with its steps as progress — in a child process on big files, as the checker — then the chunk list
marks each row the other file lacks (``+``) or holds with other values (``~``), the header counts
them and what only the other file holds, and ``V`` lists those (and jumps to the marked rows).
Both files are read as they are on disk: with unsaved edits the line says so; a save compares again.
"""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from codec import CodecError
from codec.values import printable
from inspector.tui.actions import DIFF_LIST, bindings
from inspector.tui.model.document import Document
from inspector.tui.model.jobs import Progress
from inspector.tui.model.rows import clip, summary
from inspector.tui.screens.prompt import PromptScreen

HEADER_KEY = "diff"
KINDS = (("retained", "retained", "retained"), ("sessions", "session", "sessions"),
         ("subscriptions", "subscription", "subscriptions"), ("queued", "queued message", "queued messages"),
         ("stored", "stored message", "stored messages"))
"""(report key, one, many) of what the diff counts."""


def not_a_file(text: str) -> str | None:
    """Why the compare prompt refuses ``text`` (not a file), or None (empty ends the comparison)."""
    path = os.path.expanduser(text.strip())
    if not path or os.path.isfile(path):
        return None
    return f"{path}: {'is a directory' if os.path.isdir(path) else 'no such file'}: nothing to compare with"


def plural(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def removed_text(marks: Any) -> str:
    """``2 retained, 1 session`` (what only the other file holds), or ``nothing``."""
    counts = marks.removed()
    parts = [plural(counts[k], one, many) for k, one, many in KINDS if counts.get(k)]
    return ", ".join(parts) if parts else "nothing"


def diff_text(marks: Any, *, unsaved: bool = False) -> Text:
    """The header line: ``≠ other.db: 3 rows not in it (+), 2 changed (~); only in it: 1 retained — V lists``."""
    name = printable(os.path.basename(marks.other))
    out = Text(no_wrap=True, overflow="ellipsis")
    if marks.same:
        out.append(f"= {name}: same content", style="bold green")
        out.append(" (retained, sessions, subscriptions, queues, stored messages)")
    else:
        out.append(f"≠ {name}: ", style="bold cyan")
        out.append(f"{plural(len(marks.added), 'row', 'rows')} not in it (+)", style="green" if len(marks.added) else "")
        out.append(", ")
        out.append(f"{len(marks.changed):,} changed (~)", style="yellow" if len(marks.changed) else "")
        out.append(f"; only in it: {removed_text(marks)}")
    if unsaved:
        out.append(" (the files on disk: unsaved edits not included)", style="dark_orange")
    if not marks.same:
        out.append("  V lists", style="grey62")
    return out


class DiffScreen(ModalScreen[int | None]):
    """What differs from the other file: what only it holds, then this file's added and changed rows
    (Enter on one jumps to it)."""

    BINDINGS = bindings(DIFF_LIST)
    LIMIT = 500
    """Lines per section (``mosqdb diff --json`` lists every change)."""

    def __init__(self, marks: Any, doc: Document) -> None:
        super().__init__()
        self.marks = marks
        self.doc = doc

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal-box", id="diff-box"):
            name = printable(os.path.basename(self.marks.other))
            yield Label(f"compared with {name} (by content, as `mosqdb diff {name} THIS`) — Enter jumps, Esc closes",
                        id="diff-title")
            yield OptionList(*self.options(), id="diff-list")

    def options(self) -> list[Option]:
        m, rep = self.marks, self.marks.report
        name = printable(os.path.basename(m.other))
        out: list[Option] = [self.heading(f"only in {name} (not here): {removed_text(m)}")]
        items: list[str] = [f"- retained {printable(repr(t))}" for t in rep.retained["removed"]]
        items += [f"- session {printable(repr(c))}" for c in rep.sessions["removed"]]
        items += [f"- subscription {printable(repr(s['client_id']))} {printable(repr(s['topic']))} q{s['qos']}"
                  for s in rep.subscriptions["removed"]]
        items += [f"- {plural(q.removed, 'queued message', 'queued messages')} of {printable(repr(q.client_id))}"
                  for q in rep.queued.values() if q.removed]
        if rep.stored["removed"]:
            items.append(f"- {plural(rep.stored['removed'], 'stored message', 'stored messages')} in all "
                         "(the messages above, and ones nothing references)")
        out += self.lines(items, "removed")
        for label, rows, mark in ((f"not in {name} (+)", m.added, "+"), (f"changed from {name} (~)", m.changed, "~")):
            out.append(self.heading(f"{label}: {plural(len(rows), 'row', 'rows')}"))
            shown = rows[: self.LIMIT].tolist()
            out += [Option(self.row_label(mark, r), id=f"row:{r}") for r in shown]
            if len(rows) > len(shown):
                out.append(Option(f"  … and {len(rows) - len(shown):,} more", disabled=True))
        return out

    @staticmethod
    def heading(text: str) -> Option:
        return Option(Text(text, style="bold"), disabled=True)

    def lines(self, items: list[str], key: str) -> list[Option]:
        out = [Option(Text(clip(t, 200)), disabled=True) for t in items[: self.LIMIT]]
        if len(items) > self.LIMIT:
            out.append(Option(f"  … and {len(items) - self.LIMIT:,} more (`mosqdb diff --json` lists all)",
                              disabled=True))
        return out or [Option("  (none)", disabled=True)]

    def row_label(self, mark: str, row: int) -> Text:
        v = self.doc.view(row)
        text = summary(v.record) if v.record is not None else "(does not decode)"
        style = "green" if mark == "+" else "yellow"
        return Text.assemble((f"{mark} ", style), (f"{v.kind}[{row}] ", "bold"), clip(text, 160))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        oid = event.option.id or ""
        if oid.startswith("row:"):
            self.dismiss(int(oid[4:]))

    def action_close(self) -> None:
        self.dismiss(None)


class DiffMixin:
    """The diff's actions, worker, header line and row marks (mixed into the app)."""

    doc: Document
    diff_other: str | None  # the file compared with; None: no diff
    diff: Any  # its DiffMarks once computed

    def action_diff(self) -> None:
        value = self.diff_other or (os.path.dirname(os.path.abspath(self.doc.path)) + os.sep)
        self.push_screen(PromptScreen("Compare with another file: mark what differs", value,
                                      "path of a mosquitto.db or a 2.1 sqlite store",
                                      hint="rows it lacks get +, rows it holds otherwise ~; V lists what only it "
                                           "holds; empty: no comparison", check=not_a_file), self.set_diff)

    def set_diff(self, text: str | None) -> None:
        """Compare with the file ``text`` (empty: stop comparing); a path that is not a file is refused."""
        if text is None:
            return
        path = os.path.expanduser(text.strip())
        if not path:
            self.diff_other, self.diff = None, None
            self.cancel_jobs("diff")
            self.header_line(HEADER_KEY, None)
            self.chunks.refresh()
            self.update_mode()
            self.say("comparison ended: no rows marked")
            return
        if not os.path.isfile(path):
            why = "is a directory" if os.path.isdir(path) else "no such file"
            self.say(f"{path}: {why}: nothing to compare with", "error")
            return
        self.diff_other, self.diff = path, None
        self.refresh_diff()

    def refresh_diff(self) -> None:
        """(Re)compare the file on disk with the other one, in a worker (once the index is built)."""
        if self.diff_other is None:
            return
        self.diff = None
        self.chunks.refresh()
        name = printable(os.path.basename(self.diff_other))
        self.header_line(HEADER_KEY, Text(f"≠ {name}: comparing by content…", style="yellow"))
        if self.doc.db.empty or self.doc.complete():
            self.diff_worker(self.diff_other, self.doc.path)

    def update_diff_line(self) -> None:
        if self.diff_other is not None and self.diff is not None:
            self.header_line(HEADER_KEY, diff_text(self.diff, unsaved=self.doc.is_dirty()))

    def diff_mark(self, row: int) -> str | None:
        """``+`` (the other file lacks it), ``~`` (it holds it otherwise) or None, for the chunk list."""
        if self.diff is None or row < 0:
            return None
        mark = self.diff.mark(row)
        return None if mark is None else ("+" if mark == "added" else "~")

    @work(thread=True, exclusive=True, group="diff")
    def diff_worker(self, other: str, path: str) -> None:
        from inspector.tui.model.diffmarks import STEPS, diff_marks

        progress = Progress(self, "diff", STEPS)
        progress.found = -1
        progress.post(False)

        def compute() -> Any:
            if self.in_child():
                from inspector.tui.model.checkproc import run_result

                return run_result(["diff", path, other, self.doc.endian], progress, progress.cancelled)
            return diff_marks(path, other, endian=self.doc.endian, progress=progress)

        progress.deliver(compute, (CodecError, OSError, RuntimeError, ValueError),
                         lambda why: self.diff_failed(other, why), lambda marks: self.diff_ready(other, path, marks))

    def diff_ready(self, other: str, path: str, marks: Any) -> None:
        if other != self.diff_other or path != self.doc.path:
            return
        self.diff = marks
        self.update_diff_line()
        self.chunks.refresh()
        self.update_mode()
        name = os.path.basename(other)
        self.say(f"{os.path.basename(path)} and {name}: same content" if marks.same else
                 f"compared with {name}: {len(marks.added):,} row(s) +, {len(marks.changed):,} ~; "
                 f"only in {name}: {removed_text(marks)} (V lists)")

    def diff_failed(self, other: str, reason: str) -> None:
        if other == self.diff_other:
            name = printable(os.path.basename(other))
            self.header_line(HEADER_KEY, Text(f"≠ {name}: not compared — {printable(reason)}", style="bold red"))
            self.say(f"comparison failed: {reason}", "error")

    def diff_stopped(self) -> None:
        if self.diff_other is not None and self.diff is None:
            name = printable(os.path.basename(self.diff_other))
            self.header_line(HEADER_KEY, Text(f"≠ {name}: comparison stopped — v compares again", style="yellow"))

    def action_diff_list(self) -> None:
        if self.diff is None:
            self.say("no comparison yet: v chooses a file to compare with" if self.diff_other is None
                     else "still comparing…", "warning")
            return
        self.push_screen(DiffScreen(self.diff, self.doc), self.diff_row_chosen)

    def diff_row_chosen(self, row: int | None) -> None:
        if row is not None:
            self.jump(row)
            self.say(f"chunk {row}: {'not in' if self.diff_mark(row) == '+' else 'changed from'} "
                     f"{os.path.basename(self.diff_other or '')}")


__all__ = ["DiffMixin", "DiffScreen", "diff_text", "removed_text"]
