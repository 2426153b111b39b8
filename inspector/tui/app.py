"""The Textual inspector: chunk list, field tree and hex view over one db, with edits.

The app owns a :class:`~inspector.tui.document.Document`; the index is built in a worker thread
that posts progress, so rows appear before the scan ends. Filters that need decoding,
search, reference lookups and checks run in workers too, and never block keystrokes.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, Static
from textual.worker import get_current_worker

from codec import CodecError, FileChangedError
from codec.layouts import ChunkType
from codec.ops.check import check_file
from codec.values import printable
from inspector.tui.document import ChunkView, Document, EditRefused
from inspector.tui.filters import StoreColumns, parse_filter, search_forward, stream_matches, with_edits
from inspector.tui.messages import (
    FilterProgress,
    HexByteTyped,
    HexCursorMoved,
    RowHighlighted,
    ScanProgress,
    SpanSelected,
)
from inspector.tui.screens import CheckScreen, ConfirmQuit, HelpScreen, PromptScreen
from inspector.tui.widgets.chunklist import DAMAGE_ROW, ChunkList
from inspector.tui.widgets.fieldtree import FieldTree
from inspector.tui.widgets.hexview import HexSource, HexView
from inspector.tui.widgets.summary import SummaryBar

ACTIONS = [
    ("Go to", "goto", "Jump to a chunk index, file offset (0x.., @..) or store id (#..)"),
    ("Search", "search", "Find text in topics, client ids and payloads"),
    ("Search next", "search_next", "Repeat the last search"),
    ("Filter", "filter", "Filter by type, topic filter, client id, store id"),
    ("Clear filter", "clear_filter", "Show every chunk again"),
    ("Follow reference", "follow", "client_msg/retain → msg_store; msg_store → everything referencing it"),
    ("Check file", "check", "Run the integrity rules and list findings"),
    ("Export selection", "export", "Write the filtered chunks as JSON lines (.jsonl) or a Parquet dataset (directory)"),
    ("Edit field", "edit_field", "Edit the selected field's value"),
    ("Delete chunk", "delete", "Delete (or restore) the chunk; a client with its subs and queue"),
    ("Add a copy", "add_copy", "Insert a copy of the chunk after it, to edit into a new one"),
    ("Add a new chunk", "add_new", "Insert a blank msg_store, client_msg, retain, sub or client after the chunk"),
    ("Undo", "undo", "Undo the last edit"),
    ("Redo", "redo", "Redo the last undone edit"),
    ("Save", "save", "Save atomically over the file"),
    ("Save as", "save_as", "Save to another file"),
    ("Help", "help", "List keys"),
    ("Quit", "quit_app", "Quit (asks when edits are unsaved)"),
]


class InspectorApp(App[None]):
    """mosqdb inspect."""

    CSS_PATH = "app.tcss"
    TITLE = "mosqdb inspect"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("q", "quit_app", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("g", "goto", "Goto"),
        Binding("slash", "search", "Search"),
        Binding("n", "search_next", "Next", show=False),
        Binding("f", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear", show=False),
        Binding("r", "follow", "Ref"),
        Binding("c", "check", "Check"),
        Binding("x", "export", "Export", show=False),
        Binding("e", "edit_field", "Edit"),
        Binding("d", "delete", "Del"),
        Binding("a", "add_copy", "Add copy", show=False),
        Binding("A", "add_new", "Add new", show=False),
        Binding("u,ctrl+z", "undo", "Undo"),
        Binding("U,ctrl+y", "redo", "Redo", show=False),
        Binding("ctrl+s", "save", "Save"),
        Binding("S", "save_as", "Save as", show=False),
    ]

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

    # ------------------------------------------------------------ goto / search / refs
    def need_index(self) -> bool:
        if not self.doc.complete():
            self.say("the index is still being built; try again in a moment", "warning")
            return False
        return True

    def store_columns(self) -> StoreColumns:
        if self.columns is None:
            self.columns = StoreColumns(self.doc)
        return self.columns

    @work(thread=True, exclusive=True, group="columns")
    def columns_worker(self) -> None:
        """Gather store ids in the background so goto/follow/filter by store id answer at once."""
        doc = self.doc
        cols = StoreColumns(doc)
        self.call_from_thread(self._columns_ready, doc, cols)

    def _columns_ready(self, doc: Document, cols: StoreColumns) -> None:
        if self.columns is None and doc is self.doc and doc.db.partial_index() is cols.index:
            self.columns = cols

    def jump(self, item: int) -> None:
        if not self.chunks.goto_item(item):
            self.clear_filter()
            self.chunks.goto_item(item)

    def action_goto(self) -> None:
        self.push_screen(PromptScreen("Go to", placeholder="123 = chunk index, 0x1f or @31 = offset, #42 = store id"),
                         self.do_goto)

    def do_goto(self, text: str | None) -> None:
        if not text or not self.need_index():
            return
        text = text.strip()
        idx = self.doc.index()
        assert idx is not None
        try:
            if text[0] in "#s":
                sid = int(text.lstrip("#s").strip(), 0)
                item = self.store_columns().find_store(sid)
                if item is None:
                    self.say(f"no msg_store with store id {sid}", "warning")
                    return
            elif text.startswith(("0x", "@")):
                off = int(text.lstrip("@"), 0)
                found = idx.find(off)
                if found is None:
                    if idx.end <= off < self.doc.db.size and self.chunks.show_damage:
                        found = DAMAGE_ROW
                    else:
                        self.say(f"offset {off} is not inside a chunk (file header is 0..22, end {idx.end})", "warning")
                        return
                item = found
            else:
                item = int(text, 0)
                if not 0 <= item < len(idx):
                    self.say(f"chunk index {item} out of range 0..{len(idx) - 1}", "warning")
                    return
        except ValueError:
            self.say(f"goto: cannot read {text!r}", "warning")
            return
        self.jump(item)
        self.say(f"went to {'damage' if item == DAMAGE_ROW else f'chunk {item}'}")

    def action_search(self) -> None:
        self.push_screen(PromptScreen("Search", self.last_search, "text in topic, client id, source, payload"),
                         self.do_search)

    def do_search(self, text: str | None) -> None:
        if not text or not self.need_index():
            return
        self.last_search = text
        item = self.item
        if item is not None and item <= -2:
            item = self.doc.new_anchor.get(item)  # an inserted chunk: go on after its neighbour
        start = (item + 1) if item is not None and item >= 0 else 0
        self.say(f"searching {text!r} from chunk {start}…")
        self.search_worker(text, start)

    def action_search_next(self) -> None:
        if self.last_search:
            self.do_search(self.last_search)

    @work(thread=True, exclusive=True, group="search")
    def search_worker(self, text: str, start: int) -> None:
        worker = get_current_worker()
        found = search_forward(self.doc, text, start, lambda: worker.is_cancelled)
        if not worker.is_cancelled:
            self.call_from_thread(self.search_done, text, found)

    def search_done(self, text: str, found: int | None) -> None:
        if found is None:
            self.say(f"{text!r} not found after this chunk", "warning")
        else:
            self.jump(found)
            self.say(f"{text!r} found in chunk {found} (n: next)")

    def action_follow(self) -> None:
        if self.item is None or self.item == DAMAGE_ROW or not self.need_index():
            return
        rec = self.doc.record(self.item)
        if rec is None:
            return
        if rec.kind in ("client_msg", "retain"):
            sid = rec["store_id"]
            target = self.store_columns().find_store(sid)
            if target is None:
                self.say(f"{rec.kind}[{self.item}] references store id {sid}, which no msg_store has (dangling)", "warning")
                return
            self.jump(target)
            self.say(f"followed {rec.kind}[{self.item}] → msg_store[{target}] (#{sid}); r again lists its referrers")
        elif rec.kind == "msg_store":
            self.apply_filter(f"store:{rec['store_id']}")
        elif rec.kind in ("client", "sub"):
            self.apply_filter(f"client:{shlex.quote(rec['client_id'])}")
        else:
            self.say(f"{rec.kind} chunks reference nothing")

    # ------------------------------------------------------------ filter
    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.stop()
            self.apply_filter(event.value)
            self.chunks.focus()

    def action_clear_filter(self) -> None:
        for worker in self.workers:
            if worker.group == "search" and worker.is_running:
                worker.cancel()
                self.say("search cancelled")
        if self.filter_text or self.query_one("#filter").display:
            self.clear_filter()
            self.chunks.focus()

    def clear_filter(self) -> None:
        self.filter_gen += 1
        self.filter_text = ""
        self.filter_busy = False
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        keep = self.item
        rows = self.doc.row_array(self.doc.count())
        self.chunks.set_rows(rows, keep=keep, sorted_rows=rows is None)
        self.update_status()

    def apply_filter(self, text: str) -> None:
        text = text.strip()
        if not text:
            self.clear_filter()
            return
        try:
            spec = parse_filter(text)
        except ValueError as exc:
            self.say(str(exc), "error")
            return
        if not self.need_index():
            return
        box = self.query_one("#filter", Input)
        box.value = text
        box.display = True
        self.filter_gen += 1
        self.filter_text = text
        keep = self.item
        self.filter_spec = spec
        if not spec.needs_decode:
            rows = with_edits(self.store_columns().matching(spec), self.doc, spec)
            self.filter_busy = False
            self.chunks.set_rows(rows, keep=keep)
        else:
            self.filter_rows = []
            self.filter_busy = True
            self.chunks.set_rows([], keep=None)
            self.filter_worker(spec, self.filter_gen)
        self.say(f"filter applied: {text}")

    @work(thread=True, exclusive=True, group="filter")
    def filter_worker(self, spec: Any, gen: int) -> None:
        worker = get_current_worker()

        def cancelled() -> bool:
            return worker.is_cancelled or gen != self.filter_gen

        try:
            for batch in stream_matches(self.doc, spec, cancelled):
                self.post_message(FilterProgress(gen, batch, False))
        except CodecError as exc:
            self.call_from_thread(self.say, f"filter stopped: {exc}", "error")
        self.post_message(FilterProgress(gen, [], True))

    def on_filter_progress(self, msg: FilterProgress) -> None:
        if msg.generation != self.filter_gen:
            return
        self.filter_rows.extend(msg.rows)
        first = self.chunks.rows is not None and len(self.chunks.rows) == 0
        self.chunks.rows = self.filter_rows
        self.chunks.update_size()
        if msg.done:
            self.filter_busy = False
            self.chunks.rows = with_edits(self.filter_rows, self.doc, self.filter_spec)  # inserted chunks too
            self.chunks.update_size()
        if first and self.filter_rows:
            self.chunks.reselect()
        self.update_status()

    # ------------------------------------------------------------ editing
    def action_add_copy(self) -> None:
        if self.item is None or self.item == DAMAGE_ROW or not self.editable() or not self.need_index():
            return
        self.insert_chunk(lambda: self.doc.insert_copy(self.item), "a copy of chunk {anchor} after it")

    def action_add_new(self) -> None:
        if self.item is None or self.item == DAMAGE_ROW or not self.editable() or not self.need_index():
            return
        self.push_screen(PromptScreen("Add a new chunk after this one: which kind?",
                                      placeholder="msg_store, client_msg, retain, sub or client",
                                      hint="numbers start at 0 and text empty: edit the fields next (u: undo)"),
                         self.do_add_new)

    def do_add_new(self, kind: str | None) -> None:
        if not kind or self.item is None:
            return
        item = self.item
        self.insert_chunk(lambda: self.doc.insert_new(item, kind), "a new " + kind.strip() + " after chunk {anchor}")

    def insert_chunk(self, insert: Callable[[], int], what: str) -> None:
        """Run an insertion, show the new chunk and say what was added (``what`` names ``{anchor}``)."""
        try:
            new = insert()
        except EditRefused as exc:
            self.say(f"refused: {exc}", "error")
            return
        self.refresh_after_edit()
        self.jump(new)
        self.say(f"added {what.replace('{anchor}', str(self.doc.new_anchor[new]))}: edit its fields (u: undo)")

    def sync_rows(self) -> None:
        """Put inserted chunks among the rows (the unfiltered list only) when they change."""
        if self.rows_version == self.doc.rows_version:
            return
        self.rows_version = self.doc.rows_version
        if self.filter_text:
            return
        keep = self.item
        if keep is not None and keep <= -2 and keep not in self.doc.new_records:
            keep = self.doc.new_anchor.get(keep)  # an undone insertion: back to its neighbour
        rows = self.doc.row_array(self.doc.count())
        self.chunks.set_rows(rows, keep=keep, sorted_rows=rows is None)
        self.item = self.chunks.item(self.chunks.cursor)

    def refresh_after_edit(self) -> None:
        self.sync_rows()
        self.chunks.refresh()
        self.show_item(keep_cursor=True)
        self.query_one(SummaryBar).refresh_summary(self.doc)

    def editable(self) -> bool:
        if self.doc.read_only:
            self.say("read-only: editing is disabled (reopen without --read-only, or check permissions)", "warning")
            return False
        return True

    def action_edit_field(self) -> None:
        self.flush_detail()
        if self.item is None or self.item == DAMAGE_ROW or not self.editable():
            return
        node = self.fields.cursor_node
        info = node.data if node is not None else None
        if info is None or not info.editable or info.name is None:
            self.say("select a value field in the field tree (lengths and padding follow from values; "
                     "other bytes: type hex digits in the hex view)", "warning")
            self.fields.focus()
            return
        rec = self.doc.record(self.item)
        assert rec is not None
        value = rec.values.get(info.name)
        if isinstance(value, bytes):
            try:
                current = value.decode("utf-8")
                hint = "payload as UTF-8 text, or hex:0a0b…, or escapes like \\xff"
            except UnicodeDecodeError:
                current = "hex:" + value.hex()
                hint = "binary payload: hex:0a0b… or text"
        elif isinstance(value, str):
            current = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            hint = "UTF-8 text; \\xNN escapes allowed (must stay valid UTF-8)"
        else:
            current = "" if value is None else str(value)
            hint = "an integer (decimal or 0x..)"
        item, name = self.item, info.name
        self.push_screen(PromptScreen(f"{rec.kind}[{item}].{name}", current, hint=hint),
                         lambda text: self.do_edit(item, name, text))

    def do_edit(self, item: int, name: str, text: str | None) -> None:
        if text is None:
            return
        try:
            edit = self.doc.set_field(item, name, text)
        except EditRefused as exc:
            self.say(f"refused: {exc}", "error")
            return
        self.refresh_after_edit()
        warning = self.reference_warning(item, name)
        self.say(f"edited {edit.label} (u: undo)" + (f" — warning: {warning}" if warning else ""),
                 "warning" if warning else "information")

    def reference_warning(self, item: int, name: str) -> str | None:
        """Say so when an edited store id leaves references dangling (the edit is kept)."""
        if name != "store_id" or not self.doc.complete():
            return None
        rec = self.doc.record(item)
        if rec is None:
            return None
        cols = self.store_columns()
        sid = rec["store_id"]
        if rec.kind in ("client_msg", "retain") and cols.find_store(sid) is None:
            return f"no msg_store has store id {sid}: the broker drops this {rec.kind} on load"
        if rec.kind == "msg_store":
            old = int(cols.ids[item])
            refs = int(np.count_nonzero((cols.ids == np.uint64(old)) & np.isin(cols.types, [3, 4])))
            if refs and old != sid:
                return f"{refs} client_msg/retain chunk(s) still reference store id {old}"
        return None

    def on_field_tree_selected(self, event: FieldTree.Selected) -> None:
        self.action_edit_field()

    def on_hex_byte_typed(self, msg: HexByteTyped) -> None:
        if self._detail_timer is not None:  # the hex view still shows the previous chunk
            return
        if self.item is None or self.item == DAMAGE_ROW or not self.editable():
            return
        try:
            edit = self.doc.set_byte(self.item, msg.pos, msg.value)
        except EditRefused as exc:
            self.say(f"refused: {exc}", "error")
            self.hex.refresh()
            return
        self.refresh_after_edit()
        self.hex.cursor = min(msg.pos + 1, max((self.hex.source.size if self.hex.source else 1) - 1, 0))
        self.say(f"{edit.label} (u: undo)")

    def action_delete(self) -> None:
        if self.item is None or self.item == DAMAGE_ROW or not self.editable():
            return
        item = self.item
        v = self.doc.view(item)
        if v.inserted:
            self.doc.delete([item], f"remove the new {v.kind}")
            self.refresh_after_edit()
            self.say(f"removed the new {v.kind} (u: undo)")
            return
        if v.deleted:
            self.doc.restore(item)
            self.refresh_after_edit()
            self.say(f"restored chunk {item} (u: undo)")
            return
        rec = v.record
        if rec is not None and rec.kind == "client" and item >= 0:
            if not self.need_index():
                return
            self.say(f"finding the subscriptions and queue of {rec['client_id']!r}…")
            self.session_worker(item, rec["client_id"])
            return
        warning = None
        if rec is not None and rec.kind == "msg_store" and self.doc.complete():
            cols = self.store_columns()
            refs = int(np.count_nonzero((cols.ids == np.uint64(rec["store_id"]))
                                        & np.isin(cols.types, [3, 4])))
            live = refs
            if refs:
                warning = (f"msg_store #{rec['store_id']} is still referenced by {live} client_msg/retain chunk(s); "
                           "the broker drops those references on load")
        label = f"delete {v.kind}[{item}]"
        self.doc.delete([item], label, warning)
        self.refresh_after_edit()
        self.say(f"{label} (u: undo)" + (f" — warning: {warning}" if warning else ""),
                 "warning" if warning else "information")

    @work(thread=True, exclusive=True, group="session")
    def session_worker(self, item: int, client_id: str) -> None:
        from inspector.tui.filters import safe_stream

        found = [item]
        subs = queued = 0
        for c in safe_stream(self.doc, 0, [int(ChunkType.CLIENT_MSG), int(ChunkType.SUB)]):
            if c.record.get("client_id") == client_id:
                found.append(c.index)
                if c.kind == "sub":
                    subs += 1
                else:
                    queued += 1
        self.call_from_thread(self.session_done, sorted(found), client_id, subs, queued)

    def session_done(self, items: list[int], client_id: str, subs: int, queued: int) -> None:
        label = f"delete session {client_id!r} with {subs} sub(s) and {queued} queued message(s)"
        try:
            self.doc.delete(items, label)
        except EditRefused as exc:
            self.say(str(exc), "error")
            return
        self.refresh_after_edit()
        self.say(f"{label} (u: undo)")

    def action_undo(self) -> None:
        edit = self.doc.undo()
        self.refresh_after_edit()
        self.say(f"undid: {edit.label}" if edit else "nothing to undo")

    def action_redo(self) -> None:
        edit = self.doc.redo()
        self.refresh_after_edit()
        self.say(f"redid: {edit.label}" if edit else "nothing to redo")

    # ------------------------------------------------------------ save / quit
    def action_save(self) -> None:
        if not self.editable():
            return
        if not self.doc.is_dirty():
            self.say("nothing to save")
            return
        self.do_save(None)

    def action_save_as(self) -> None:
        if self.doc.db.empty:
            return
        self.push_screen(PromptScreen("Save as", self.doc.path, "path of the new file"), self.do_save_as)

    def do_save_as(self, path: str | None) -> None:
        if path:
            self.do_save(os.path.expanduser(path.strip()))

    def do_save(self, path: str | None, then_exit: bool = False) -> bool:
        try:
            result = self.doc.save(path)
        except FileChangedError as exc:
            self.say(f"not saved: {exc}", "error")
            return False
        except CodecError as exc:
            self.say(f"not saved: {exc}", "error")
            return False
        self.columns = None
        self.columns_worker()
        self.clear_filter()
        self.hex.editable = not self.doc.read_only
        self.refresh_after_edit()
        self.say(f"saved {result.size:,} bytes to {result.path} ({result.chunks_encoded} chunk(s) encoded, "
                 f"{result.chunks_deleted} deleted)")
        if then_exit:
            self.exit()
        return True

    def action_quit_app(self) -> None:
        if self.doc.is_dirty():
            self.push_screen(ConfirmQuit(len(self.doc.undo_stack)), self.quit_answer)
        else:
            self.exit()

    def quit_answer(self, answer: str | None) -> None:
        if answer == "save":
            self.do_save(None, then_exit=True)
        elif answer == "discard":
            self.exit()

    # ------------------------------------------------------------ export
    def action_export(self) -> None:
        if self.doc.db.empty or not self.need_index():
            return
        base = os.path.splitext(self.doc.path)[0]
        self.push_screen(PromptScreen("Export the current selection (the file as saved, not unsaved edits)",
                                      base + ".jsonl", hint="NAME.jsonl: JSON lines; any other name: a Parquet "
                                      "dataset directory (one file per chunk kind)"), self.do_export)

    def do_export(self, out: str | None) -> None:
        if not out:
            return
        spec = parse_filter(self.filter_text) if self.filter_text else None
        self.say(f"exporting to {out}…")
        self.export_worker(out.strip(), spec)

    @work(thread=True, exclusive=True, group="export")
    def export_worker(self, out: str, spec: Any) -> None:
        try:
            from exporters import files
        except ImportError:
            self.call_from_thread(self.say, "export needs the exporters package (not installed)", "error")
            return
        selection = spec.selection() if spec is not None else None
        kinds = sorted(spec.kinds) if spec is not None and spec.kinds else list(files.KINDS)
        try:
            if out.endswith(".jsonl"):
                counts = files.export_jsonl([self.doc.path], out, kinds=kinds, selection=selection,
                                            endian=self.doc.endian)
            else:
                counts = files.export_parquet([self.doc.path], out, kinds=kinds, selection=selection,
                                              endian=self.doc.endian)
        except (CodecError, OSError, ValueError) as exc:
            self.call_from_thread(self.say, f"export failed: {exc}", "error")
            return
        rows = ", ".join(f"{k} {n}" for k, n in counts.items() if n)
        self.call_from_thread(self.say, f"exported to {out}: {rows or 'nothing selected'}")

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
        for title, action, helptext in ACTIONS:
            yield SystemCommand(title, helptext, getattr(self, f"action_{action}"))


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
