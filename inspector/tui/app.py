"""The Textual inspector: chunk list, field tree and hex view over one db, with edits.

The app owns a :class:`~inspector.tui.model.document.Document`; the index is built in a worker thread
that posts progress, so rows appear before the scan ends. Filters that need decoding,
search, reference lookups and checks run in workers too, and never block keystrokes.

This module is the composition root: layout (a header that features can add lines to, the three
panes, a job bar, the mode line, the status line and the key bar), the index worker, what the panes
show for the selected chunk, check and help. The actions live beside it, mixed in:
:mod:`~inspector.tui.features.navigation` (goto, search, follow, filter), :mod:`~inspector.tui.features.editing`
and :mod:`~inspector.tui.features.saving` (save, quit, export); their keys are in :mod:`~inspector.tui.actions`.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical
from textual.events import DescendantBlur, DescendantFocus
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input, Static

from codec import CodecError
from codec.values import printable
from inspector.tui.actions import (
    BYTES,
    FIELDS,
    FILTER,
    HEX,
    LIST,
    PANES,
    actions,
    bindings,
    palette_help,
    palette_title,
)
from inspector.tui.features.diffing import DiffMixin
from inspector.tui.features.editing import EditingMixin
from inspector.tui.features.filters import FILTER_HELP, FILTER_PLACEHOLDER, StoreColumns
from inspector.tui.features.navigation import NO_ROWS, NavigationMixin
from inspector.tui.features.saving import SavingMixin
from inspector.tui.features.sessions import SessionsMixin
from inspector.tui.features.tree import TopicTreeMixin
from inspector.tui.features.verdict import VerdictMixin, graded, model_findings, panel_lines
from inspector.tui.messages import (
    CheckFindings,
    HexCursorMoved,
    HexModeChanged,
    RowHighlighted,
    ScanProgress,
    SpanSelected,
)
from inspector.tui.model.document import ChunkView, Document
from inspector.tui.model.jobs import Cancelled, JobThreads, Progress
from inspector.tui.model.rows import clip
from inspector.tui.model.savecheck import SaveCheck
from inspector.tui.model.storedoc import open_document
from inspector.tui.screens.check import CheckScreen
from inspector.tui.screens.help import HelpScreen
from inspector.tui.widgets.chunklist import DAMAGE_ROW, ChunkList
from inspector.tui.widgets.fieldtree import FieldTree
from inspector.tui.widgets.hexview import HexSource, HexView
from inspector.tui.widgets.jobbar import JobBar
from inspector.tui.widgets.keybar import KeyBar
from inspector.tui.widgets.summary import SummaryBar

CANCELLABLE = ("filter", "search", "check", "export", "broker", "diff", "tree", "sessions")
"""Jobs (worker groups) that Esc stops; the index scan runs on."""

# (title, action, description) of each palette command, read from the actions table
ACTIONS = [(a.title, a.name, a.description) for a in actions()]

LAYOUTS = ("normal", "wide", "list")
"""The layout toggle (w): three panes, a wider chunk list, the chunk list alone."""


class InspectorApp(NavigationMixin, EditingMixin, SavingMixin, VerdictMixin, DiffMixin, TopicTreeMixin, SessionsMixin,
                   App[None]):
    """mosqdb inspect: one document, three panes, the actions of the mixins bound from the actions table."""

    CSS_PATH = "app.tcss"
    TITLE = "mosqdb inspect"
    ENABLE_COMMAND_PALETTE = True
    AUTO_FOCUS = "ChunkList, ModalScreen *"  # the list, not the hidden filter bar; in a dialog its first field
    BINDINGS = bindings()  # from the actions table, like the help screen and the palette

    def __init__(self, doc: Document, *, scan_step: int = 100_000, check_at: float | None = None,
                 detail_delay: float = 0.05, check_process_from: int | None = 200_000,
                 broker: str | None = None, broker_conf: str | None = None, diff: str | None = None) -> None:
        super().__init__()
        self.doc = doc
        self.scan_step = scan_step
        self.detail_delay = detail_delay  # the field tree and hex follow the list once keys pause
        self._detail_timer: Timer | None = None
        self.check_at = check_at
        # files of this many chunks are checked in a child process (inspector.tui.model.checkproc); None: never
        self.check_process_from = check_process_from
        # the reference time for expiry in every view (fixed by --at or by tests; else now)
        self.at = check_at if check_at is not None else time.time()
        self.item: int | None = None
        self.columns: StoreColumns | None = None
        self.columns_lock = threading.Lock()  # one gathering of the store-id columns at a time (navigation)
        self.filter_gen = 0
        self.filter_rows = NO_ROWS  # the filter's answer (int64 chunk numbers)
        self.filter_text = ""
        self.filter_spec: Any = None
        self.filter_busy = False
        self.last_search = ""
        self.status_text = ""
        self.rows_version = doc.rows_version
        self.generation = doc.generation  # the document's chunk numbering the list shows
        self.jobs: dict[str, ScanProgress] = {}  # running jobs, their newest progress (the job bar shows one)
        self.stopped_at: dict[str, int] = {}  # how far a cancelled job had got when its worker stopped
        self.job_started: dict[str, float] = {}  # when each running job was first heard of
        self.job_bar_delay = 0.3
        self.pending_offset: int | None = None  # a goto by offset: the hex byte to show once the chunk is shown
        self.topics: dict[int, str | None] = {}  # store id -> topic, for the visible retain/client_msg rows
        self.layout_mode = LAYOUTS[0]
        self.save_check = SaveCheck(check_at, check_process_from)
        self.broker = broker  # the release whose verdict the header shows (--broker, b)
        self.broker_conf = broker_conf
        self.verdict: Any = None
        self.verdict_before: str | None = None
        self.diff_other = diff  # the file whose differences the rows are marked with (--diff, v)
        self.diff: Any = None
        self.topic_tree: Any = None  # (the DbFile it was built from, its codec.ops.tree.TopicTree)
        self.sessions_cache: Any = None  # (the DbFile they were read from, rows, groups)

    # ------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield SummaryBar(id="summary")  # the header: features add lines with header_line()
        yield Input(placeholder=FILTER_PLACEHOLDER, id="filter")
        yield Static(FILTER_HELP, id="filter-help")
        with Horizontal(id="main"):
            chunks = ChunkList(self.doc, id="chunks")
            chunks.topic_of = self.topic_of
            chunks.diff_mark = self.diff_mark
            yield chunks
            with Vertical(id="right"):
                yield FieldTree(id="fields")
                yield HexView(id="hex")
        yield JobBar(id="jobs")
        yield Static("", id="mode")
        yield Static("", id="status")
        yield KeyBar(id="keys")

    def header_line(self, key: str, line: Text | str | None) -> None:
        """Add (or with None remove) a line of the header under ``key``: for features that have
        something to say about the whole file (a broker's verdict, a store view, a diff)."""
        self.query_one(SummaryBar).set_line(key, line)

    @property
    def chunks(self) -> ChunkList:
        return self.query_one(ChunkList)

    @property
    def fields(self) -> FieldTree:
        return self.query_one(FieldTree)

    @property
    def hex(self) -> HexView:
        return self.query_one(HexView)

    def on_mount(self) -> None:
        # the workers' threads are daemons: quitting never waits for a job (inspector.tui.model.jobs.JobThreads)
        asyncio.get_running_loop().set_default_executor(JobThreads())
        self.query_one("#filter").display = False
        self.query_one("#filter-help").display = False
        self.hex.editable = not self.doc.read_only
        self.chunks.focus()
        self.query_one(SummaryBar).refresh_summary(self.doc)
        if self.doc.read_only:
            self.say(f"opened read-only ({self.doc.read_only_why}): editing is disabled", "warning")
        self.update_mode()
        if self.broker is not None:
            self.set_broker(self.broker)
        if self.diff_other is not None:
            self.refresh_diff()
        if self.doc.db.empty:
            self.fields.show_message("empty file", ["0 bytes: the broker treats this as no saved state"])
            return
        self.scan()

    # ------------------------------------------------------------ status
    def say(self, text: str, severity: str = "information") -> None:
        """Show a message in the status line (and as a toast for warnings and errors)."""
        text = printable(text)  # file names, ids and topics: no control characters, no markup
        self.status_text = text
        self.update_status()
        if severity != "information":
            self.notify(text, severity=severity, timeout=6, markup=False)  # type: ignore[arg-type]

    def update_status(self) -> None:
        parts = []
        if self.filter_text:
            n = len(self.chunks.rows) if self.chunks.rows is not None else 0
            parts.append(f"[filter {self.filter_text!r}: {n:,} rows{' (scanning…)' if self.filter_busy else ''}]")
        if self.status_text:
            parts.append(self.status_text)
        self.query_one("#status", Static).update(Text(printable(" ".join(parts))))
        self.update_mode()

    # ------------------------------------------------------------ focus, mode line, key bar, layout
    def pane(self) -> str:
        """Where the focus is, as the key bar and the mode line name it (:data:`~inspector.tui.actions.PANES`)."""
        focused = self.screen_stack[0].focused if self.screen_stack else None
        if isinstance(focused, HexView):
            return BYTES if focused.editing else HEX
        if isinstance(focused, FieldTree):
            return FIELDS
        if isinstance(focused, Input) and focused.id == "filter":
            return FILTER
        return LIST

    def update_mode(self) -> None:
        """The mode line: focused pane, the selected chunk, the filter, unsaved edits, read-only."""
        try:
            line = self.query_one("#mode", Static)
            bar = self.query_one(KeyBar)
        except Exception:  # noqa: BLE001 - not composed yet (or shutting down)
            return
        pane = self.pane()
        bar.show_pane(pane, self.doc.read_only)
        text = Text.assemble((f" {PANES[pane].upper()} ", "bold black on cyan" if pane != BYTES else
                              "bold black on yellow"), " ")
        item = self.item
        if item is not None and not self.doc.db.empty:
            if item == DAMAGE_ROW:
                text.append("damage (raw bytes)", style="bold red")
            elif item >= 0 or item in self.doc.new_records:  # (a saved insertion is gone until reselected)
                v = self.doc.view(item)
                text.append(v.label, style="bold")
                if v.record is not None and v.record.get("store_id") is not None:
                    text.append(f" #{v.record['store_id']}")
                if v.deleted:
                    text.append(" (deleted)", style="grey62")
            mark = self.diff_mark(item) if item >= 0 else None
            if mark is not None:
                name = os.path.basename(self.diff_other or "")
                text.append(f"  {mark} {'not in' if mark == '+' else 'changed from'} {clip(name, 30)}",
                            style="green" if mark == "+" else "yellow")
        if self.filter_text:
            text.append(f"  filter {clip(self.filter_text, 30)!r}", style="cyan")
        if self.doc.read_only:
            text.append("  READ-ONLY" + self.doc.read_only_note, style="bold yellow")
        elif self.doc.is_dirty():
            text.append(f"  {len(self.doc.undo_stack)} unsaved edit(s): ^s saves", style="bold dark_orange")
        if pane == BYTES:
            text.append("  typing hex overwrites bytes, Esc stops", style="yellow")
        line.update(text)

    def on_descendant_focus(self, _event: DescendantFocus) -> None:
        self.update_mode()

    def on_descendant_blur(self, _event: DescendantBlur) -> None:
        self.update_mode()

    def on_hex_mode_changed(self, _msg: HexModeChanged) -> None:
        self.update_mode()

    def action_layout(self) -> None:
        """Cycle the layout: three panes, a wider chunk list, the chunk list alone."""
        self.layout_mode = LAYOUTS[(LAYOUTS.index(self.layout_mode) + 1) % len(LAYOUTS)]
        main = self.query_one("#main")
        for mode in LAYOUTS:
            main.set_class(mode == self.layout_mode, f"-{mode}")
        if self.layout_mode == "list" and self.pane() in (FIELDS, HEX, BYTES):
            self.chunks.focus()
        self.say({"normal": "layout: chunk list, fields and hex (w: wider list)",
                  "wide": "layout: a wider chunk list (w: the list alone)",
                  "list": "layout: the chunk list alone (w: back to three panes)"}[self.layout_mode])

    # ------------------------------------------------------------ jobs
    def in_child(self) -> bool:
        """Big files: whole-file jobs (check, broker model, diff) run in a child process (inspector.tui.model.checkproc)."""
        return self.check_process_from is not None and self.doc.count() >= self.check_process_from

    def on_scan_progress(self, msg: ScanProgress) -> None:
        """Any long job's progress: keep the running ones, show the job bar, act on the index's."""
        current = self.jobs.get(msg.job)
        stale = msg.worker is not None and msg.worker.is_cancelled
        if msg.finished or stale:
            if current is not None and (current.worker is msg.worker or msg.worker is None):
                del self.jobs[msg.job]
        elif current is None or current.worker is msg.worker or not current.worker or current.worker.is_cancelled:
            self.jobs[msg.job] = msg
        self.refresh_jobs()
        if msg.job == "index" and not stale:
            self.index_progress(msg)

    def refresh_jobs(self) -> None:
        """Show the newest running job (the index scan only when nothing else runs) in every job bar.

        The main job bar waits ``job_bar_delay`` seconds before it shows a job, so a job that is
        through at once (a small file's index, a quick filter) does not flash a line on and off.
        """
        now = time.monotonic()
        for job in list(self.job_started):
            if job not in self.jobs:
                del self.job_started[job]
        for job in self.jobs:
            self.job_started.setdefault(job, now)
        shown = {job: m for job, m in self.jobs.items() if now - self.job_started[job] >= self.job_bar_delay}
        if len(shown) < len(self.jobs):
            self.set_timer(self.job_bar_delay, self.refresh_jobs)
        for screen in self.screen_stack:
            for bar in screen.query(JobBar):
                if bar.only is not None:  # a job's own bar (the check panel's) shows it at once
                    bar.show(self.jobs.get(bar.only))
                else:
                    others = [m for job, m in shown.items() if job != "index"]
                    bar.show(others[-1] if others else shown.get("index"))

    def cancel_jobs(self, *jobs: str) -> list[str]:
        """Stop running jobs (Esc: every one but the index scan); the names of those stopped."""
        stopped = []
        for worker in list(self.workers):
            if worker.group in (jobs or CANCELLABLE) and worker.is_running and not worker.is_cancelled:
                worker.cancel()
                stopped.append(worker.group)
        for job in stopped:
            self.jobs.pop(job, None)
        self.refresh_jobs()
        return stopped

    # ------------------------------------------------------------ index worker
    @work(thread=True, exclusive=True, group="scan")
    def scan(self) -> None:
        db = self.doc.db
        progress = Progress(self, "index", db.size, rate=4)  # the first rows at once, then a few updates a second
        try:
            for count in db.scan_steps(self.scan_step):
                idx = db.partial_index()
                progress(idx.end if idx is not None else 0, db.size, count)
        except Cancelled:
            return
        progress.done, progress.found = db.size, self.doc.count()
        progress.finish()

    def index_progress(self, msg: ScanProgress) -> None:
        idx = self.doc.index()
        if msg.finished and idx is not None:
            self.chunks.show_damage = idx.error is not None or idx.trailing > 0
            if idx.error is not None:
                self.say(f"damaged file: {pathless(idx.error)}", "error")
        self.chunks.update_size()
        self.query_one(SummaryBar).refresh_summary(self.doc)
        if self.item is None or msg.finished:
            self.chunks.reselect()
        if msg.finished and self.doc.count():
            self.columns_worker()
        if msg.finished and self.broker is not None and self.verdict is None and "broker" not in self.jobs:
            self.refresh_verdict()  # the model reads the index: it starts once the index is built
        if msg.finished and self.diff_other is not None and self.diff is None and "diff" not in self.jobs:
            self.refresh_diff()

    # ------------------------------------------------------------ selection
    def on_row_highlighted(self, msg: RowHighlighted) -> None:
        self.item = msg.item
        self.update_mode()
        if self._detail_timer is not None:
            self._detail_timer.stop()
            self._detail_timer = None
        if self.detail_delay <= 0:
            self.show_item()
        else:  # while a key repeats only the list repaints; details follow when it stops
            self._detail_timer = self.set_timer(self.detail_delay, self.flush_detail)

    def flush_detail(self) -> None:
        """Show the pending chunk's fields and bytes now (before acting on them)."""
        if self._detail_timer is not None:
            self._detail_timer.stop()
            self._detail_timer = None
            self.show_item()

    def show_item(self, keep_cursor: bool = False) -> None:
        item = self.item
        if item is None:
            self.fields.show_message("no chunk", [])
            self.hex.set_source(None)
            return
        if item == DAMAGE_ROW:
            self.show_damage()
            return
        v = self.doc.view(item)
        if v.row is not None:
            self.fields.show_row(v)
        else:
            self.fields.show(v, self.doc.version)
        self.hex.set_source(self.hex_source(v), keep_cursor=keep_cursor)
        self.show_pending_offset()

    def hex_source(self, v: ChunkView) -> HexSource:
        if v.row is not None:  # a store's row: its text and blob columns as stored
            return HexSource.of_bytes(0, v.data, spans=[(s.offset, s.size, s.name, s.kind) for s in v.spans])
        hs = v.header_size
        tlen = 4 if hs == 8 else 2
        spans = [(0, tlen, "chunk_type", "hdr"), (tlen, hs - tlen, "length", "hdr")]
        unknown = v.record is not None and v.record.kind == "unknown"
        spans += [(hs + s.offset, s.size, s.name, "unknown" if unknown else s.kind) for s in v.spans]
        return HexSource.of_bytes(v.offset, v.data, spans=spans, changed=v.changed_bytes(),
                                  default_kind=None if v.record is not None else "unknown")

    def show_damage(self) -> None:
        idx = self.doc.index()
        assert idx is not None
        db = self.doc.db
        start, size = idx.end, db.size - idx.end
        err = idx.error
        if err is not None:
            lines = [pathless(err), f"bytes {start}..{db.size} ({size} bytes) are shown raw below",
                     "chunks before this point are intact; `mosqdb check` lists details"]
            title = f"⚠ damage at offset {start} (0x{start:x})"
        else:
            lines = [f"{size} bytes after the last chunk (a partial chunk header or an unknown chunk cut short)",
                     "the broker ignores them"]
            title = f"⚠ trailing bytes at offset {start} (0x{start:x})"
        self.fields.show_message(title, lines)
        spans = []
        if err is not None and err.offset is not None and start <= err.offset < db.size:
            spans.append((err.offset - start, 1, "error", "error"))
        fd = db.fd
        src = HexSource(start, size, lambda s, n: os.pread(fd, n, start + s), spans=spans, default_kind="unknown")
        self.hex.set_source(src)
        self.show_pending_offset()

    def on_span_selected(self, msg: SpanSelected) -> None:
        if getattr(msg, "from_hex", False):
            self.hex.select = (msg.start, msg.size)
            self.hex.refresh()
        else:
            self.hex.highlight(msg.start, msg.size)

    def on_hex_cursor_moved(self, msg: HexCursorMoved) -> None:
        if self.hex.has_focus and self.item is not None and self.item != DAMAGE_ROW:
            self.fields.select_byte(msg.pos)

    # ------------------------------------------------------------ check / help / palette
    def action_check(self) -> None:
        if self.doc.db.empty or not self.need_index():
            return
        self.say("checking…")
        broker = self.broker if self.doc.db.broker_model else None
        self.push_screen(CheckScreen([], running=True, broker=broker), self.finding_chosen)
        if broker is not None and self.verdict is not None:
            self.show_check_verdict(broker, self.verdict)
        self.refresh_jobs()
        self.check_worker(broker)

    @work(thread=True, exclusive=True, group="check")
    def check_worker(self, broker: str | None = None) -> None:
        """The checker's findings into the panel; with a broker chosen, graded for it (its verdict
        first, computed here if the header has none yet) and followed by the model's own findings."""
        from codec.ops.check import Finding, check_file  # loaded on first use: the first screen does not need it

        progress = Progress(self, "check", self.doc.count())
        progress.found = -1  # check_file returns its findings at the end: how many is not known before
        batch: list[Any] = []
        kept = 0  # findings sent to the panel; past its limit only their severities are counted (memory)
        more: dict[str, int] = {}
        findings: Iterable[Any]
        pred = None
        try:
            if broker is not None:
                pred = self.verdict
                if pred is None:
                    pred = self.compute_verdict(broker, progress)
                    if pred is None:  # a child process killed before it was through
                        raise Cancelled("check")
                    self.call_from_thread(self.verdict_ready, broker, self.doc.path, pred)
                    self.call_from_thread(self.show_check_verdict, broker, pred)
            if self.in_child():
                from inspector.tui.model.checkproc import run_check

                findings = (Finding(**f) for f in run_check(self.doc.db.path, self.doc.endian, self.check_at,
                                                            progress, progress.cancelled))
            else:  # a list today; should check_file yield its findings, the panel fills as they come
                findings = check_file(self.doc.db, at=self.check_at, progress=progress)
            for plain in findings:
                for finding in graded([plain], pred):
                    if kept < CheckScreen.LIMIT:
                        batch.append(finding)
                        kept += 1
                    else:
                        more[finding.severity] = more.get(finding.severity, 0) + 1
                if time.monotonic() - progress.last >= progress.interval:
                    progress(progress.done, found=kept + sum(more.values()))
                    self.post_message(CheckFindings(batch, False, progress.worker, more))
                    batch, more = [], {}
            batch += model_findings(pred)
        except Cancelled:
            self.stopped_at["check"] = progress.done
            return
        except (RuntimeError, CodecError, ValueError) as exc:  # the child process failed; the model refused
            self.post_message(CheckFindings(batch, True, progress.worker, more))
            self.call_from_thread(self.say, f"check failed: {exc}", "error")
            return
        finally:
            progress.finish()
        if progress.cancelled():  # a child process killed before it was through
            self.stopped_at["check"] = progress.done
            return
        self.post_message(CheckFindings(batch, True, progress.worker, more))

    def file_saved(self) -> None:
        """The file on disk changed (a save): what was computed from it is computed again."""
        self.refresh_verdict()
        self.refresh_diff()

    def show_check_verdict(self, broker: str, pred: Any) -> None:
        """The verdict at the head of the check panel, if it is open."""
        for screen in self.screen_stack:
            if isinstance(screen, CheckScreen) and screen.broker == broker:
                screen.set_verdict(panel_lines(pred, broker), pred.broker)

    def on_check_findings(self, msg: CheckFindings) -> None:
        if msg.worker is not None and msg.worker.is_cancelled:
            return
        screen = next((s for s in self.screen_stack if isinstance(s, CheckScreen) and s.running), None)
        if screen is None:
            return
        screen.add_findings(msg.findings, msg.finished, msg.more)
        if msg.finished:
            self.say(f"check: {screen.total():,} finding(s)")

    def finding_chosen(self, finding: Any) -> None:
        if self.cancel_jobs("check"):  # the panel closed before the check was through
            self.say("check stopped")
        if finding is None:
            return
        idx = self.doc.index()
        assert idx is not None
        if finding.chunk_index is not None and finding.chunk_index < len(idx):
            self.jump(finding.chunk_index)
        elif finding.offset is not None and self.doc.chunk_bytes:  # (a store's findings name rows, not offsets)
            found = idx.find(finding.offset)
            self.jump(found if found is not None else DAMAGE_ROW)
        self.say(f"{finding.rule}: {finding.message}")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for a in actions():
            yield SystemCommand(palette_title(a), palette_help(a, self.doc.read_only), getattr(self, f"action_{a.name}"))


def pathless(err: CodecError) -> str:
    """The error's one line without the file path (the header already names the file)."""
    saved, err.path = err.path, None
    try:
        return str(err)
    finally:
        err.path = saved


def run(path: str, *, endian: str = "little", read_only: bool = False) -> None:
    from inspector.tui.model.memory import one_malloc_arena

    one_malloc_arena()
    doc = open_document(path, endian=endian, read_only=read_only)
    try:
        InspectorApp(doc).run()
    finally:
        doc.close()


__all__ = ["InspectorApp", "run"]
