"""The virtual chunk list: one line per chunk, only visible lines are rendered.

Rows come straight from the index arrays (or from a filter's array of chunk indexes), so
2.4 M chunks cost no widgets and no objects; only the visible chunks are decoded. Retain and
client_msg rows show the topic of the stored message they reference, looked up for the visible
rows only (``topic_of``, the app's store-id lookup). The widget keeps its own top row and draws its own scrollbar instead of using Textual's
scrolling, so paging is a repaint, never a relayout of the screen.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.events import Click, MouseScrollDown, MouseScrollUp
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from codec.views.timeview import expires_at
from inspector.tui.actions import LIST, bindings
from inspector.tui.messages import RowHighlighted
from inspector.tui.model.document import Document
from inspector.tui.model.rows import clip, summary, type_label
from inspector.tui.widgets.focus import RepaintOnFocus

DAMAGE_ROW = -1
STYLES = {
    "index": Style(color="grey62"),
    "offset": Style(color="grey50"),
    "cfg": Style(color="magenta"),
    "msg": Style(color="green"),
    "cmsg": Style(color="cyan"),
    "ret": Style(color="yellow"),
    "sub": Style(color="blue"),
    "clnt": Style(color="bright_magenta"),
    "bad": Style(color="red", bold=True),
    "deleted": Style(color="grey42", strike=True),
    "edited": Style(color="yellow", bold=True),
    "cursor": Style(bgcolor="grey30"),
    "cursor_focus": Style(bgcolor="dark_blue", bold=True),
    "track": Style(bgcolor="grey19"),
    "thumb": Style(bgcolor="grey58"),
    "topic": Style(color="bright_cyan"),
    "diff_added": Style(color="black", bgcolor="green", bold=True),
    "diff_changed": Style(color="black", bgcolor="yellow", bold=True),
}


class ChunkList(RepaintOnFocus, Widget, can_focus=True):
    """Rows of chunks; ``rows`` is None (all chunks) or an array of chunk indexes (filtered)."""

    BINDINGS = bindings(LIST)
    cursor = reactive(0, always_update=True, repaint=False)

    def __init__(self, doc: Document, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.doc = doc
        self.rows: np.ndarray | list[int] | None = None
        self.show_damage = False
        self.sorted_rows = True  # False when inserted chunks (negative ids) sit among the rows
        self.top = 0
        self._last_item: int | None = None
        self.topic_of: Callable[[int], str | None] = lambda _sid: None  # the app's store-id -> topic lookup
        self.diff_mark: Callable[[int], str | None] = lambda _row: None  # + / ~ against a second file (v)

    # ------------------------------------------------------------ model
    def total(self) -> int:
        if self.rows is not None:
            return len(self.rows)
        return self.doc.count() + (1 if self.show_damage else 0)

    def item(self, row: int) -> int | None:
        """Chunk index at a row (DAMAGE_ROW for the damage/trailing row)."""
        if row < 0 or row >= self.total():
            return None
        if self.rows is not None:
            return int(self.rows[row])
        n = self.doc.count()
        return row if row < n else DAMAGE_ROW

    def row_of(self, item: int) -> int | None:
        if self.rows is None:
            n = self.doc.count()
            if item == DAMAGE_ROW:
                return n if self.show_damage else None
            return item if 0 <= item < n else None
        arr = np.asarray(self.rows)
        if not self.sorted_rows:
            hits = np.flatnonzero(arr == item)
            return int(hits[0]) if len(hits) else None
        pos = int(np.searchsorted(arr, item))
        return pos if pos < len(arr) and int(arr[pos]) == item else None

    def set_rows(self, rows: np.ndarray | list[int] | None, keep: int | None = None, *,
                 sorted_rows: bool = True) -> None:
        self.rows = rows
        self.sorted_rows = sorted_rows
        self.update_size()
        row = self.row_of(keep) if keep is not None else None
        self.cursor = row if row is not None else 0

    def update_size(self) -> None:
        self.top = max(0, min(self.top, self.total() - 1))
        self.refresh()

    def scroll_to(self, *, y: int, animate: bool = False) -> None:  # noqa: ARG002 - mirrors Widget.scroll_to
        top = max(0, min(int(y), max(self.total() - max(self.size.height, 1), 0)))
        if top != self.top:
            self.top = top
            self.refresh()

    def on_mouse_scroll_down(self, event: MouseScrollDown) -> None:
        event.stop()
        self.scroll_to(y=self.top + 3)

    def on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        event.stop()
        self.scroll_to(y=self.top - 3)

    # ------------------------------------------------------------ cursor
    def watch_cursor(self, value: int) -> None:
        total = self.total()
        if total == 0:
            item = None
        else:
            if value >= total or value < 0:
                self.cursor = max(0, min(value, total - 1))
                return
            item = self.item(value)
            self.scroll_to_row(value)
        self.refresh()
        if item != self._last_item:
            self._last_item = item
            self.post_message(RowHighlighted(item))

    def reselect(self) -> None:
        """Tell the app again which chunk is under the cursor (after edits)."""
        self._last_item = None
        self.cursor = self.cursor

    def scroll_to_row(self, row: int) -> None:
        h = max(self.size.height, 1)
        top = self.top
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + h:
            self.scroll_to(y=row - h + 1, animate=False)

    def action_move(self, delta: int) -> None:
        self.cursor = max(0, min(self.cursor + delta, self.total() - 1))

    def action_page(self, direction: int) -> None:
        h = max(self.size.height - 1, 1)
        target = max(0, min(self.cursor + direction * h, self.total() - 1))
        self.scroll_to(y=max(0, self.top + direction * h), animate=False)
        self.cursor = target

    def action_jump(self, where: int) -> None:
        self.cursor = 0 if where == 0 else max(self.total() - 1, 0)

    def goto_item(self, item: int) -> bool:
        row = self.row_of(item)
        if row is None:
            return False
        self.cursor = row
        h = max(self.size.height, 1)
        if not self.top <= row < self.top + h:
            self.scroll_to(y=max(0, row - h // 3), animate=False)
        return True

    def on_click(self, event: Click) -> None:
        row = self.top + event.y
        if 0 <= row < self.total():
            self.cursor = row

    def on_resize(self) -> None:
        self.update_size()

    # ------------------------------------------------------------ rendering
    def render_line(self, y: int) -> Strip:
        width = max(self.size.width - 1, 1)
        row = self.top + y
        item = self.item(row)
        bar = Segment(" ", self._scrollbar(y))
        if item is None:
            return Strip([Segment(" " * width), bar])
        strip = Strip(self._row_segments(item, width)).crop_extend(0, width, None)
        if row == self.cursor:
            strip = strip.apply_style(STYLES["cursor_focus" if self.has_focus else "cursor"])
        return Strip([*strip, bar])

    def _scrollbar(self, y: int) -> Style:
        h, total = max(self.size.height, 1), self.total()
        if total <= h:
            return STYLES["track"]
        size = max(1, h * h // total)
        start = (h - size) * self.top // max(total - h, 1)
        return STYLES["thumb"] if start <= y < start + size else STYLES["track"]

    def _row_segments(self, item: int, width: int) -> list[Segment]:
        doc = self.doc
        digits = max(len(str(max(doc.count() - 1, 0))), 2)
        if item == DAMAGE_ROW:
            idx = doc.index()
            err = idx.error if idx is not None else None
            if err is not None:
                text = f"⚠ damage at 0x{idx.end:x}: {err.reason}"  # type: ignore[union-attr]
            else:
                text = f"⚠ {idx.trailing if idx else 0} trailing bytes at 0x{idx.end if idx else 0:x}"
            return [Segment(clip(text, width), STYLES["bad"])]
        v = doc.view(item)
        label = "bad" if v.record is None else type_label(v.record.type)
        if v.error is not None:
            text = f"!! {v.error.reason}"
            label_style = STYLES["bad"]
        else:
            text = doc.row_text(item) if v.row is not None else summary(v.record) if v.record is not None else ""
            label_style = STYLES.get(label, STYLES["bad"])
            exp = expires_at(v.record) if v.record is not None else None
            if exp is not None and exp <= getattr(self.app, "at", exp):
                text = "⌛expired " + text
        mark = "D" if v.deleted else ("+" if v.inserted else ("*" if v.edited else " "))
        mark_style = STYLES["deleted"] if v.deleted else STYLES["edited"]
        body_style = STYLES["deleted"] if v.deleted else Style()
        segs = [Segment(mark, mark_style)]
        if getattr(self.app, "diff_other", None) is not None:  # the second column: what differs from the other file
            diff = self.diff_mark(item) if item >= 0 else None
            segs.append(Segment(diff or " ", STYLES["diff_added" if diff == "+" else "diff_changed"]))
        segs.append(Segment(f"{'new' if v.inserted else item:>{digits}} ", STYLES["index"]))
        if v.row is not None:  # a store's row: its table where a chunk shows its offset
            segs.append(Segment(f"{v.row.table:<13} " if width >= 40 else "", STYLES["offset"]))
        elif width >= 40:
            segs.append(Segment(f"{v.offset:08x} ", STYLES["offset"]))
        segs.append(Segment(f"{label:<4} ", label_style))
        used = sum(len(s.text) for s in segs)
        topic = None
        if v.record is not None and v.record.kind in ("retain", "client_msg") and v.error is None and (
                v.row is None or v.record.kind == "client_msg"):  # a store's retain shows its own topic (its key)
            topic = self.topic_of(v.record["store_id"])
        if topic is None:
            segs.append(Segment(clip(text, max(width - used, 1)), body_style))
            return segs
        # the topic right after the reference (what a person looks for), then the rest of the summary
        head, _, tail = text.partition("→#")
        ref, _, rest = tail.partition(" ")
        first = f"{head}→#{ref} "
        segs.append(Segment(clip(first, max(width - used, 1)), body_style))
        used += len(clip(first, max(width - used, 1)))
        if width - used > 1:
            shown = clip(topic, max(width - used, 1))
            segs.append(Segment(shown, body_style + STYLES["topic"] if v.deleted else STYLES["topic"]))
            used += len(shown)
        if rest and width - used > 2:
            segs.append(Segment(clip(" " + rest, width - used), body_style))
        return segs
