"""Hex view: offset | hex bytes | ASCII for one chunk (or the raw bytes after damage).

Only visible rows are rendered and bytes are read on demand, so even megabytes of raw
tail stay cheap. Each byte is coloured by the kind of field that owns it (header,
length, padding, unknown); the selected field is highlighted and edited bytes marked.

Typing over bytes is a mode (``editing``, started by the app's ``i``): outside it every key is a
command as in the other panes, so ``f`` opens the filter instead of becoming a nibble. In the
mode hex digits overwrite the byte under the cursor, any other letter is refused with a hint
(so a command typed by mistake edits nothing), and Esc or leaving the pane ends it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rich.segment import Segment
from rich.style import Style
from textual.events import Click, Key
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from inspector.tui.actions import HEX, bindings
from inspector.tui.messages import HexByteTyped, HexCursorMoved, HexModeChanged
from inspector.tui.widgets.focus import RepaintOnFocus

KIND_STYLES = {
    "hdr": Style(color="bright_blue"),
    "len16": Style(color="grey58"),
    "len32": Style(color="grey58"),
    "pad": Style(color="grey35", bgcolor="grey15"),
    "bytes": Style(color="green"),
    "str": Style(color="bright_green"),
    "props": Style(color="cyan"),
    "prop": Style(color="cyan"),
    "raw": Style(color="magenta"),
    "unknown": Style(color="magenta", bgcolor="grey11"),
    "error": Style(color="bright_white", bgcolor="red3", bold=True),
}
DEFAULT_STYLE = Style(color="white")
OFFSET_STYLE = Style(color="grey50")
SELECT_STYLE = Style(bgcolor="dark_goldenrod", color="black")
CHANGED_STYLE = Style(color="bright_yellow", bold=True, underline=True)
CURSOR_STYLE = Style(reverse=True, bold=True)
EDIT_CURSOR_STYLE = Style(color="black", bgcolor="yellow", bold=True)
PASS_THROUGH = set("uU?")
"""Keys that keep their command while editing bytes (undo, redo, help); other letters are refused."""


@dataclass
class HexSource:
    """Bytes to show: ``base`` is the file offset of byte 0; spans are (start, size, name, kind)."""

    base: int
    size: int
    read: Callable[[int, int], bytes]
    spans: list[tuple[int, int, str, str]] = field(default_factory=list)
    changed: set[int] = field(default_factory=set)
    default_kind: str | None = None  # e.g. "unknown" for raw bytes after damage

    def __post_init__(self) -> None:
        self.spans.sort(key=lambda s: (s[0], -s[1]))

    def span_at(self, pos: int) -> tuple[int, int, str, str] | None:
        """The innermost span that holds byte ``pos`` (chunks have a few dozen spans)."""
        best = None
        for s in self.spans:
            if s[0] > pos:
                break
            if s[1] > 0 and pos < s[0] + s[1] and (best is None or s[1] < best[1]):
                best = s
        return best

    @classmethod
    def of_bytes(cls, base: int, data: bytes, **kw: object) -> HexSource:
        return cls(base, len(data), lambda start, n: data[start : start + n], **kw)  # type: ignore[arg-type]


class HexView(RepaintOnFocus, ScrollView, can_focus=True):
    """A virtual hex dump with a byte cursor; typing hex digits overwrites bytes when editable."""

    BINDINGS = bindings(HEX)
    cursor = reactive(0, repaint=False)
    editing = reactive(False, repaint=False)

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.source: HexSource | None = None
        self.select: tuple[int, int] | None = None
        self.editable = False
        self._nibble: int | None = None
        self._row_cache: dict[tuple[int, int], bytes] = {}  # (bytes per row, row): a resize changes both

    @property
    def digits(self) -> int:
        """Hex digits of the offset column: 8, more past 4 GiB (offsets >= 2**32 stay whole and aligned)."""
        src = self.source
        return 8 if src is None else max(8, len(f"{src.base + src.size:x}"))

    @property
    def per_row(self) -> int:
        w = self.scrollable_content_region.width or self.size.width or 80
        for n in (16, 8, 4):
            if self.digits + 4 + 4 * n <= w:
                return n
        return 4

    def set_source(self, source: HexSource | None, keep_cursor: bool = False) -> None:
        self.source = source
        self._row_cache.clear()
        self._nibble = None
        if not keep_cursor:
            self.select = None
            self.set_reactive(HexView.cursor, 0)
            self.scroll_to(y=0, animate=False)
        elif source is not None and self.cursor >= source.size:
            self.set_reactive(HexView.cursor, max(source.size - 1, 0))
        self.update_size()

    def update_size(self) -> None:
        rows = 0 if self.source is None else (self.source.size + self.per_row - 1) // self.per_row
        self.virtual_size = Size(self.size.width or 40, rows)
        self.refresh()

    def on_resize(self) -> None:
        self.update_size()

    # ------------------------------------------------------------ editing mode
    def watch_editing(self, value: bool) -> None:
        self._nibble = None
        self.refresh()
        self.post_message(HexModeChanged(value))

    def start_editing(self) -> bool:
        """Enter byte-edit mode (the app checks the file is writable); False if there is nothing to edit."""
        if not self.editable or self.source is None or not self.source.size:
            return False
        self.focus()
        self.editing = True
        return True

    def on_blur(self) -> None:  # RepaintOnFocus.on_blur runs too (Textual calls each class's handler)
        self.editing = False

    def highlight(self, start: int, size: int) -> None:
        """Highlight a byte range (a field) and bring it into view."""
        self.select = (start, size) if size > 0 else (start, 0)
        row = start // self.per_row
        top, h = int(self.scroll_offset.y), max(self.size.height, 1)
        if not top <= row < top + h:
            self.scroll_to(y=max(row - 1, 0), animate=False)
        self.set_reactive(HexView.cursor, start)
        self.refresh()

    # ------------------------------------------------------------ cursor
    def watch_cursor(self, value: int) -> None:
        if self.source is None:
            return
        row = value // self.per_row
        top, h = int(self.scroll_offset.y), max(self.size.height, 1)
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + h:
            self.scroll_to(y=row - h + 1, animate=False)
        self._nibble = None
        self.refresh()
        self.post_message(HexCursorMoved(value))

    def _clamp(self, pos: int) -> int:
        return max(0, min(pos, (self.source.size - 1) if self.source else 0))

    def action_move(self, delta: int) -> None:
        self.cursor = self._clamp(self.cursor + delta)

    def action_move_row(self, delta: int) -> None:
        self.cursor = self._clamp(self.cursor + delta * self.per_row)

    def action_page(self, direction: int) -> None:
        self.cursor = self._clamp(self.cursor + direction * self.per_row * max(self.size.height - 1, 1))

    def action_edge(self, end: int) -> None:
        self.cursor = self._clamp(10**18 if end else 0)

    def on_click(self, event: Click) -> None:
        if self.source is None:
            return
        row = int(self.scroll_offset.y) + event.y
        gutter = self.digits + 2
        col = event.x - gutter
        n = self.per_row
        k = col // 3 if 0 <= col < 3 * n else (event.x - gutter - 1 - 3 * n if event.x >= gutter + 1 + 3 * n else -1)
        if 0 <= k < n:
            self.cursor = self._clamp(row * n + k)

    def on_key(self, event: Key) -> None:
        if not self.editing:
            return
        if event.key == "escape":
            event.stop()
            event.prevent_default()
            self.editing = False
            return
        ch = event.character or ""
        if len(ch) != 1 or not ch.isprintable() or ch in PASS_THROUGH:
            return  # arrows, ctrl keys, undo and help keep their meaning
        event.stop()
        event.prevent_default()
        if not self.editable or self.source is None or ch.lower() not in "0123456789abcdef":
            self.app.bell()
            self.app.say(f"editing bytes: {ch!r} is not a hex digit (0-9, a-f); Esc stops editing")
            return
        digit = int(ch, 16)
        if self._nibble is None:
            self._nibble = digit
            self.refresh()
            return
        value = (self._nibble << 4) | digit
        self._nibble = None
        self.post_message(HexByteTyped(self.cursor, value))

    # ------------------------------------------------------------ rendering
    def _read_row(self, row: int) -> bytes:
        n = self.per_row
        data = self._row_cache.get((n, row))
        if data is None:
            assert self.source is not None
            data = self.source.read(row * n, min(n, self.source.size - row * n))
            if len(self._row_cache) > 256:
                self._row_cache.clear()
            self._row_cache[(n, row)] = data
        return data

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        src = self.source
        row = int(self.scroll_offset.y) + y
        n = self.per_row
        if src is None or row * n >= src.size:
            return Strip.blank(width)
        data = self._read_row(row)
        start = row * n
        segs = [Segment(f"{src.base + start:0{self.digits}x}  ", OFFSET_STYLE)]
        asc: list[Segment] = []
        sel = self.select
        for k in range(n):
            pos = start + k
            if k < len(data):
                b = data[k]
                span = src.span_at(pos)
                kind = span[3] if span else src.default_kind
                style = KIND_STYLES.get(kind or "", DEFAULT_STYLE)
                if pos in src.changed:
                    style = style + CHANGED_STYLE
                if sel is not None and sel[0] <= pos < sel[0] + max(sel[1], 1):
                    style = style + SELECT_STYLE
                if pos == self.cursor and self.has_focus:
                    style = style + (EDIT_CURSOR_STYLE if self.editing else CURSOR_STYLE)
                text = f"{b:02x}"
                if pos == self.cursor and self.editing and self._nibble is not None:
                    text = f"{self._nibble:x}_"
                segs.append(Segment(text, style))
                segs.append(Segment(" "))
                asc.append(Segment(chr(b) if 32 <= b < 127 else ".", style))
            else:
                segs.append(Segment("   "))
                asc.append(Segment(" "))
        segs.append(Segment("|", OFFSET_STYLE))
        segs.extend(asc)
        segs.append(Segment("|", OFFSET_STYLE))
        return Strip(segs).crop_extend(0, width, None)
