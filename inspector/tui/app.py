"""The Textual inspector: chunk list, field tree and hex view over one db, with edits.

The app owns a :class:`~inspector.tui.document.Document`; the index is built in a worker thread
that posts progress, so rows appear before the scan ends. Filters that need decoding,
search, reference lookups and checks run in workers too, and never block keystrokes.

This module is the composition root: layout, status line, the index worker, what the panes show
for the selected chunk, check and help. The actions live beside it, mixed in:
:mod:`~inspector.tui.navigation` (goto, search, follow, filter), :mod:`~inspector.tui.editing`
and :mod:`~inspector.tui.saving` (save, quit, export); their keys are in :mod:`~inspector.tui.actions`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, Static
from textual.worker import get_current_worker

from codec import CodecError
from codec.ops.check import check_file
from codec.values import printable
from inspector.tui.actions import actions, bindings, palette_help
from inspector.tui.document import ChunkView, Document
from inspector.tui.editing import EditingMixin
from inspector.tui.filters import StoreColumns
from inspector.tui.messages import (
    HexCursorMoved,
    RowHighlighted,
    ScanProgress,
    SpanSelected,
)
from inspector.tui.navigation import NavigationMixin
from inspector.tui.saving import SavingMixin
from inspector.tui.screens import CheckScreen, HelpScreen
from inspector.tui.widgets.chunklist import DAMAGE_ROW, ChunkList
from inspector.tui.widgets.fieldtree import FieldTree
from inspector.tui.widgets.hexview import HexSource, HexView
from inspector.tui.widgets.summary import SummaryBar

# (title, action, description) of each palette command, read from the actions table
ACTIONS = [(a.title, a.name, a.description) for a in actions()]


class InspectorApp(NavigationMixin, EditingMixin, SavingMixin, App[None]):
    """mosqdb inspect: one document, three panes, the actions of the mixins bound from the actions table."""

    CSS_PATH = "app.tcss"
    TITLE = "mosqdb inspect"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = bindings()  # from the actions table, like the help screen and the palette

    def __init__(self, doc: Document, *, scan_step: int = 100_000, check_at: float | None = None,
                 detail_delay: float = 0.05) -> None:
        super().__init__()
        self.doc = doc
        self.scan_step = scan_step
        self.detail_delay = detail_delay  # the field tree and hex follow the list once keys pause
        self._detail_timer: Timer | None = None
        self.check_at = check_at
        # the reference time for expiry in every view (fixed by --at or by tests; else now)
        self.at = check_at if check_at is not None else time.time()
        self.item: int | None = None
        self.columns: StoreColumns | None = None
        self.filter_gen = 0
        self.filter_rows: list[int] = []
        self.filter_text = ""
        self.filter_spec: Any = None
        self.filter_busy = False
        self.last_search = ""
        self.status_text = ""
        self.rows_version = doc.rows_version

    # ------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield SummaryBar(id="summary")
        yield Input(placeholder="filter: type:msg topic:a/# client:ID store:1-9   (Enter applies, Esc clears)",
                    id="filter")
        with Horizontal(id="main"):
            yield ChunkList(self.doc, id="chunks")
            with Vertical(id="right"):
                yield FieldTree(id="fields")
                yield HexView(id="hex")
        yield Static("", id="status")
        yield Footer()

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
        self.query_one("#filter").display = False
        self.hex.editable = not self.doc.read_only
        self.chunks.focus()
        self.query_one(SummaryBar).refresh_summary(self.doc)
        if self.doc.read_only:
            why = "--read-only" if self.doc.forced_read_only else "no write permission"
            self.say(f"opened read-only ({why}): editing is disabled", "warning")
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

    # ------------------------------------------------------------ index worker
    @work(thread=True, exclusive=True, group="scan")
    def scan(self) -> None:
        worker = get_current_worker()
        last = 0.0
        for count in self.doc.db.scan_steps(self.scan_step):
            if worker.is_cancelled:
                return
            now = time.monotonic()
            if now - last > 0.25:  # the first rows at once, then a few updates a second
                last = now
                self.post_message(ScanProgress(count, False))
        self.post_message(ScanProgress(self.doc.count(), True))

    def on_scan_progress(self, msg: ScanProgress) -> None:
        idx = self.doc.index()
        if msg.done and idx is not None:
            self.chunks.show_damage = idx.error is not None or idx.trailing > 0
            if idx.error is not None:
                self.say(f"damaged file: {pathless(idx.error)}", "error")
        self.chunks.update_size()
        self.query_one(SummaryBar).refresh_summary(self.doc)
        if self.item is None or msg.done:
            self.chunks.reselect()
        if msg.done and self.doc.count():
            self.columns_worker()

    # ------------------------------------------------------------ selection
    def on_row_highlighted(self, msg: RowHighlighted) -> None:
        self.item = msg.item
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
        self.fields.show(v, self.doc.version)
        self.hex.set_source(self.hex_source(v), keep_cursor=keep_cursor)

    def hex_source(self, v: ChunkView) -> HexSource:
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
        self.check_worker()

    @work(thread=True, exclusive=True, group="check")
    def check_worker(self) -> None:
        findings = list(check_file(self.doc.db, at=self.check_at))
        self.call_from_thread(self.show_findings, findings)

    def show_findings(self, findings: list[Any]) -> None:
        self.say(f"check: {len(findings)} finding(s)")
        self.push_screen(CheckScreen(findings), self.finding_chosen)

    def finding_chosen(self, finding: Any) -> None:
        if finding is None:
            return
        idx = self.doc.index()
        assert idx is not None
        if finding.chunk_index is not None and finding.chunk_index < len(idx):
            self.jump(finding.chunk_index)
        elif finding.offset is not None:
            found = idx.find(finding.offset)
            self.jump(found if found is not None else DAMAGE_ROW)
        self.say(f"{finding.rule}: {finding.message}")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for a in actions():
            yield SystemCommand(a.title, palette_help(a, self.doc.read_only), getattr(self, f"action_{a.name}"))


def pathless(err: CodecError) -> str:
    """The error's one line without the file path (the header already names the file)."""
    saved, err.path = err.path, None
    try:
        return str(err)
    finally:
        err.path = saved


def run(path: str, *, endian: str = "little", read_only: bool = False) -> None:
    doc = Document(path, endian=endian, read_only=read_only)
    try:
        InspectorApp(doc).run()
    finally:
        doc.close()


__all__ = ["InspectorApp", "run"]
