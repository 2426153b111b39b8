"""Moving around the chunk list: goto, search, following references and the filter bar.

Mixed into :class:`~inspector.tui.app.InspectorApp`, whose ``doc``, panes and ``say`` these use.
Store ids come from :class:`~inspector.tui.features.filters.StoreColumns` (gathered once, in a worker);
filters (the codec's column engine) and search run in workers, so keys never wait for them.
"""

from __future__ import annotations

import shlex
import threading
from typing import Any

import numpy as np
from rich.text import Text
from textual import work
from textual.widgets import Input, Static

from codec import CodecError
from codec.values import printable
from inspector.tui.features.filters import (
    FILTER_HELP,
    StoreColumns,
    filter_view,
    inserted_records,
    parse_filter,
    resolve_prefixes,
    search_forward,
)
from inspector.tui.messages import FilterProgress
from inspector.tui.model.document import Document
from inspector.tui.model.jobs import Cancelled, Progress
from inspector.tui.screens.prompt import PromptScreen
from inspector.tui.widgets.chunklist import DAMAGE_ROW

NO_ROWS = np.zeros(0, dtype=np.int64)


class NavigationMixin:
    """Goto, search, follow and filter actions of the inspector app."""

    # the app's state these read and set (InspectorApp.__init__ sets them)
    doc: Document
    item: int | None
    columns: StoreColumns | None
    columns_lock: threading.Lock
    filter_gen: int
    filter_rows: np.ndarray
    filter_text: str
    filter_spec: Any
    filter_busy: bool
    last_search: str
    pending_offset: int | None
    topics: dict[int, str | None]

    # ------------------------------------------------------------ goto / search / refs
    @property
    def unit(self) -> str:
        """What the list's entries are: chunks of a .db, rows of a sqlite store."""
        return self.doc.unit

    def need_index(self) -> bool:
        if not self.doc.complete():
            self.say("the index is still being built; try again in a moment", "warning")
            return False
        return True

    def store_columns(self) -> StoreColumns:
        """The store-id columns of the current index, gathered once: a goto or follow while the worker
        gathers them waits for its answer rather than gathering a second copy beside it."""
        with self.columns_lock:
            cols = self.columns
            if cols is None or not self.columns_current(cols):
                cols = self.columns = StoreColumns(self.doc)
            return cols

    def columns_current(self, cols: StoreColumns) -> bool:
        """Whether ``cols`` were gathered on the document's index as it is (a save replaces it)."""
        return cols.doc is self.doc and self.doc.db.partial_index() is cols.index

    @work(thread=True, exclusive=True, group="columns")
    def columns_worker(self) -> None:
        """Gather store ids in the background so goto/follow answer at once."""
        doc = self.doc
        with self.columns_lock:
            if self.columns is not None and self.columns_current(self.columns):
                return  # a goto gathered them first
            cols = StoreColumns(doc)
            if not self.columns_current(cols):
                return  # saved meanwhile: the save's own worker gathers them again
            self.columns = cols
        self.call_from_thread(self._columns_ready)

    def _columns_ready(self) -> None:
        self.topics.clear()
        self.chunks.refresh()  # retain and client_msg rows can show their topics now

    def topic_of(self, store_id: int) -> str | None:
        """The topic of the stored message with this id (unsaved edits count), for retain and client_msg
        rows; None until the store ids are gathered, or when no msg_store has it. Asked for visible rows
        only, and remembered."""
        if store_id in self.topics:
            return self.topics[store_id]
        cols = self.columns
        if cols is None:
            return None
        topic = None
        target = cols.find_store(store_id)
        rec = self.doc.record(target) if target is not None else None
        if rec is None or rec.kind != "msg_store" or rec["store_id"] != store_id:
            rec = next((r for r in self.doc.new_records.values()
                        if r.kind == "msg_store" and r["store_id"] == store_id), None)
        if rec is not None:
            topic = rec.get("topic")
        if len(self.topics) > 4096:
            self.topics.clear()
        self.topics[store_id] = topic
        return topic

    def jump(self, item: int) -> None:
        if not self.chunks.goto_item(item):
            self.clear_filter()
            self.chunks.goto_item(item)

    def action_goto(self) -> None:
        self.push_screen(PromptScreen("Go to", placeholder="123 = chunk index, 0x1f or @31 = offset, #42 = store id",
                                      check=lambda text: self.goto_target(text)[1]), self.do_goto)

    def goto_target(self, text: str) -> tuple[int | None, str | None]:
        """Where a goto text leads: (the item, None), or (None, why not) — the prompt stays open then."""
        text = text.strip()
        if not text:
            return None, None
        if not self.doc.complete():
            return None, "the index is still being built; try again in a moment"
        idx = self.doc.index()
        assert idx is not None
        try:
            if text[0] in "#s":
                sid = int(text.lstrip("#s").strip(), 0)
                item = self.store_columns().find_store(sid)
                if item is None:
                    return None, f"no msg_store with store id {sid}"
                return item, None
            if text.startswith(("0x", "@")) and not self.doc.chunk_bytes:
                return None, "a sqlite store has rows, not byte offsets: give a row number or #store id"
            if text.startswith(("0x", "@")):
                off = int(text.lstrip("@"), 0)
                found = idx.find(off)
                if found is None:
                    if idx.end <= off < self.doc.db.size and self.chunks.show_damage:
                        return DAMAGE_ROW, None
                    return None, f"offset {off} is not inside a chunk (file header is 0..22, end {idx.end})"
                return found, None
            item = int(text, 0)
        except ValueError:
            return None, f"goto: cannot read {text!r} (123, 0x1f, @31 or #42)"
        if not 0 <= item < len(idx):
            return None, f"{self.unit} index {item} out of range 0..{len(idx) - 1}"
        return item, None

    def do_goto(self, text: str | None) -> None:
        if not text or not self.need_index():
            return
        item, why = self.goto_target(text)
        if item is None:
            if why:
                self.say(why, "warning")
            return
        text = text.strip()
        if text.startswith(("0x", "@")):
            self.pending_offset = int(text.lstrip("@"), 0)  # the hex view goes to this byte once it shows the chunk
        same = item == self.item
        self.jump(item)
        if same:  # no new row: the details are not shown again, so move the hex view here
            self.show_pending_offset()
        where = f" at offset {self.pending_offset} (0x{self.pending_offset:x})" if self.pending_offset is not None else ""
        self.say(f"went to {'damage' if item == DAMAGE_ROW else f'{self.unit} {item}'}{where}")

    def show_pending_offset(self) -> None:
        """Put the hex cursor on the byte a goto by offset asked for, when the hex view shows it."""
        off, self.pending_offset = self.pending_offset, None
        src = self.hex.source
        if off is not None and src is not None and src.base <= off < src.base + src.size:
            self.hex.highlight(off - src.base, 1)
            self.hex.call_after_refresh(self.hex.highlight, off - src.base, 1)  # once the new size is laid out

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
        self.say(f"searching {text!r} from {self.unit} {start}…")
        self.search_worker(text, start)

    def action_search_next(self) -> None:
        if self.last_search:
            self.do_search(self.last_search)

    @work(thread=True, exclusive=True, group="search")
    def search_worker(self, text: str, start: int) -> None:
        progress = Progress(self, "search")  # search_forward reports no position: an indeterminate bar
        progress.post(False)
        try:
            found = search_forward(self.doc, text, start, progress.cancelled)
        finally:
            progress.finish()
        if not progress.cancelled():
            self.call_from_thread(self.search_done, text, found)

    def search_done(self, text: str, found: int | None) -> None:
        if found is None:
            self.say(f"{text!r} not found after this chunk", "warning")
        else:
            self.jump(found)
            self.say(f"{text!r} found in {self.unit} {found} (n: next)")

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
        self.query_one("#filter-help").display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.stop()
            if self.apply_filter(event.value):
                self.chunks.focus()
            else:  # refused: the text stays to be corrected, and what is typed next goes into it
                event.input.focus()

    def action_clear_filter(self) -> None:
        stopped = self.cancel_jobs()  # Esc stops a running filter, search, check, export or broker verdict first
        if stopped:
            self.say(", ".join(stopped) + " cancelled")
        if "broker" in stopped:
            self.verdict_stopped()
        if "diff" in stopped:
            self.diff_stopped()
        if self.filter_text or self.query_one("#filter").display:
            had = self.filter_text
            self.clear_filter()
            self.chunks.focus()
            if had:
                self.say(f"filter {had!r} cleared: every chunk shown")

    def clear_filter(self) -> None:
        self.filter_gen += 1
        self.filter_text = ""
        self.filter_rows = NO_ROWS  # the answer goes (a million rows: 8 MB)
        self.filter_busy = False
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.query_one("#filter-help", Static).update(FILTER_HELP)
        self.query_one("#filter-help").display = False
        if self.status_text.startswith("filter applied"):
            self.status_text = ""
        keep = self.item
        rows = self.doc.row_array(self.doc.count())
        self.chunks.set_rows(rows, keep=keep, sorted_rows=rows is None)
        self.update_status()

    def apply_filter(self, text: str, keep: int | None = None) -> bool:
        """Filter the list by ``text``; False when it is refused (the reason is said), True when it runs."""
        text = text.strip()
        if not text:
            self.clear_filter()
            return True
        try:
            spec = parse_filter(text)
        except ValueError as exc:
            self.say(str(exc), "error")
            help_line = self.query_one("#filter-help", Static)
            help_line.update(Text(printable(str(exc)), style="bold red"))
            help_line.display = True
            return False
        if not self.need_index():
            return False
        self.query_one("#filter-help", Static).update(FILTER_HELP)
        box = self.query_one("#filter", Input)
        box.value = text
        box.display = True
        self.filter_gen += 1
        self.filter_text = text
        keep = self.item if keep is None else keep
        self.filter_spec = spec
        self.filter_rows = NO_ROWS
        self.filter_busy = True
        self.chunks.set_rows([], keep=None)
        self.query_one("#filter-help").display = False
        self.filter_worker(spec, self.filter_gen, dict(self.doc.overlay.replaced), inserted_records(self.doc), keep)
        self.say(f"filter applied: {text}" + ("; " + "; ".join(spec.notes) if spec.notes else ""))
        return True

    @work(thread=True, exclusive=True, group="filter")
    def filter_worker(self, spec: Any, gen: int, replaced: dict, inserted: Any, keep: int | None = None) -> None:
        """The whole answer at once (codec.views.select: one columnar pass per chunk type needed); the job bar
        shows while it runs, and a newer filter or Esc (a new generation) drops the answer."""
        progress = Progress(self, "filter", self.doc.count(), stop=lambda: gen != self.filter_gen)
        progress.post(False)
        rows = NO_ROWS
        try:
            resolved = resolve_prefixes(self.doc, spec)
            if gen == self.filter_gen:
                self.filter_spec = resolved  # export and edits see the topics the prefixes opened onto
            # unsaved edits and insertions too; int64; Esc or a newer filter stops it at the next window
            rows = filter_view(self.doc, resolved, replaced, inserted, step=progress.check)
        except Cancelled:
            return
        except (CodecError, ValueError) as exc:
            self.call_from_thread(self.say, f"filter stopped: {exc}", "error")
            if isinstance(exc, ValueError) and gen == self.filter_gen:  # the text is refused: back to it
                self.call_from_thread(self.query_one("#filter", Input).focus)
        finally:
            progress.finish()
        if gen == self.filter_gen:
            self.post_message(FilterProgress(gen, rows, True, replace=True, keep=keep))

    def on_filter_progress(self, msg: FilterProgress) -> None:
        if msg.generation != self.filter_gen:
            return
        self.filter_rows = msg.rows
        self.filter_busy = not msg.done
        self.chunks.set_rows(self.filter_rows, keep=msg.keep)
        self.chunks.reselect()
        self.update_status()
