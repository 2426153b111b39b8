"""Field tree: the decoded fields of one chunk, with types, raw values and byte spans.

Every node knows the bytes it came from, so selecting a field highlights them in the hex
view, and the hex cursor can select the field that owns a byte.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from codec.properties import BY_ID
from codec.values import is_utf8, printable, utc_text, utf8_or_none
from codec.views.jsonview import DIRECTION_NAMES, STATE_NAMES
from codec.views.timeview import expires_at, relative
from inspector.tui.actions import FIELDS, bindings
from inspector.tui.messages import SpanSelected
from inspector.tui.model.document import ChunkView, property_spans
from inspector.tui.widgets.focus import RepaintOnFocus

TIME_FIELDS = ("expiry_time", "session_expiry_time", "disconnect_t")
PAYLOAD_PREVIEW = 64
GUIDE_STYLE = Style(color="grey42")
CURSOR_STYLE = Style(bgcolor="grey30")
CURSOR_FOCUS = Style(bgcolor="dark_blue", bold=True)


@dataclass
class NodeInfo:
    name: str | None  # record value name, None for lengths/padding/header
    start: int  # relative to the chunk start (header included)
    size: int
    editable: bool = False


def fmt_time(v: int) -> str:
    if v == 0:
        return "0 (never)"
    text = utc_text(v, "%Y-%m-%d %H:%M:%S UTC")
    return f"{v} ({text})" if text is not None else f"{v} (outside years 1-9999)"


def fmt_text(s: str | None) -> str:
    if s is None:
        return "(none)"
    bad = not is_utf8(s)  # undecodable bytes, kept as surrogate escapes
    shown = s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") if bad else s
    return repr(shown) + (" (invalid UTF-8)" if bad else "")


def fmt_bytes(b: bytes, limit: int = PAYLOAD_PREVIEW) -> str:
    text = utf8_or_none(b)
    if text is not None and all(ch.isprintable() or ch in "\n\r\t" for ch in text):
        shown = text if len(text) <= limit else text[:limit] + "…"
        return f"({len(b)} bytes, UTF-8) {shown!r}"
    head = b[:limit // 2].hex(" ")
    return f"({len(b)} bytes, binary) {head}{' …' if len(b) > limit // 2 else ''}"


def fmt_expiry(rec: Any, name: str, value: int, at: float) -> str:
    """Absolute and relative: ``1795304607 (2026-11-21 23:43:27 UTC, expired 4 h ago)``."""
    exp = expires_at(rec)
    if exp is None:
        never = " - interval 0xFFFFFFFF" if value and name == "session_expiry_time" else ""
        return f"{fmt_time(value)[:-1]}{never}, never expires)" if value else "0 (never expires)"
    return f"{fmt_time(value)[:-1]}, {relative(exp, at)})"


def fmt_value(name: str, value: Any) -> str:
    if name == "state":
        return f"{value} ({STATE_NAMES.get(value, 'unknown state')})"
    if name == "direction":
        return f"{value} ({DIRECTION_NAMES.get(value, '?')})"
    if name in TIME_FIELDS:
        return fmt_time(value)
    if isinstance(value, bytes):
        return fmt_bytes(value)
    if isinstance(value, str) or value is None:
        return fmt_text(value)
    if isinstance(value, int) and name in ("store_id", "last_db_id") and value > 9:
        return f"{value} (0x{value:x})"
    return str(value)


def fmt_prop(p: Any) -> str:
    spec = BY_ID.get(p.id)
    kind = spec.kind if spec else "?"
    v = p.value
    if kind == "bin":
        shown = fmt_bytes(bytes(v))
    elif kind == "pair":
        shown = f"{fmt_text(v[0])} = {fmt_text(v[1])}"
    elif kind == "str":
        shown = fmt_text(v)
    else:
        shown = str(v)
    return f"{p.name} [{p.id}, {kind}] = {shown}"


@dataclass
class Node:
    """One line of the field tree (always expanded: a chunk has a few dozen fields)."""

    label: Text
    data: NodeInfo | None = None
    depth: int = 0
    children: list[Node] = field(default_factory=list)

    def add_leaf(self, label: str | Text, data: NodeInfo | None = None) -> Node:
        node = Node(label if isinstance(label, Text) else Text(label), data, self.depth + 1)
        self.children.append(node)
        return node

    add = add_leaf

    def set_label(self, label: str | Text) -> None:
        self.label = label if isinstance(label, Text) else Text(label)


_DETECTING: Any = None
DECODED_STYLE = "green"
DECODE_MAX = 1 << 20  # payloads decoded in the field tree (the tree is built on every cursor move)
NODES_MAX = 5000  # decoded values shown at most


def payload_decoder(app: Any) -> Any:
    """The app's decoder (``inspect --decode/--proto/--decode-config``), else one that detects."""
    global _DETECTING
    chosen = getattr(app, "payload_decoder", None)
    if chosen is not None:
        return chosen
    if _DETECTING is None:
        from codec.payloads import PayloadDecoder

        _DETECTING = PayloadDecoder.detecting()
    return _DETECTING


def fmt_decoded(value: Any) -> str:
    if isinstance(value, str):
        return fmt_text(value)
    from codec.payloads import canonical_json

    try:
        text = canonical_json(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= PAYLOAD_PREVIEW else text[:PAYLOAD_PREVIEW] + "…"


class FieldTree(RepaintOnFocus, ScrollView, can_focus=True):
    """The decoded fields of the selected chunk, drawn line by line (cheap to rebuild per chunk)."""

    BINDINGS = bindings(FIELDS)

    class Selected(Message):
        """Enter on a field: the app opens the editor for it."""

        def __init__(self, node: Node) -> None:
            self.node = node
            super().__init__()

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.root = Node(Text("no chunk"))
        self.rows: list[Node] = [self.root]
        self.cursor = 0
        self.view: ChunkView | None = None
        self.nodes_by_span: list[tuple[int, int, Node]] = []
        self._sync_node: Node | None = None

    # ------------------------------------------------------------ model
    @property
    def cursor_node(self) -> Node | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def clear(self) -> None:
        self.root = Node(Text(""))
        self.nodes_by_span = []

    def _flatten(self) -> None:
        rows: list[Node] = []

        def walk(n: Node) -> None:
            rows.append(n)
            for c in n.children:
                walk(c)

        walk(self.root)
        self.rows = rows
        self.virtual_size = Size(self.size.width or 40, len(rows))
        self.refresh()

    def _add(self, parent: Node, label: str | Text, info: NodeInfo | None, leaf: bool = True) -> Node:
        node = parent.add_leaf(label, info)
        if info is not None and info.size > 0:
            self.nodes_by_span.append((info.start, info.size, node))
        return node

    def show_message(self, title: str, lines: list[str]) -> None:
        self.clear()
        self.view = None
        self.root.set_label(Text(printable(title), style="bold red"))
        for line in lines:
            self.root.add_leaf(printable(line))
        self._flatten()
        self.cursor = 0

    def move_cursor(self, node: Node | None, *, announce: bool = True) -> None:
        if node is None or node not in self.rows:
            return
        self.cursor = self.rows.index(node)
        self._scroll_to_cursor()
        self.refresh()
        if announce:
            self._announce(node)

    def _announce(self, node: Node) -> None:
        from_hex = node is self._sync_node
        self._sync_node = None
        info = node.data
        if info is None:
            return
        msg = SpanSelected(info.name, info.start, info.size)
        msg.from_hex = from_hex  # type: ignore[attr-defined]
        self.post_message(msg)

    def _scroll_to_cursor(self) -> None:
        top, h = int(self.scroll_offset.y), max(self.size.height, 1)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + h:
            self.scroll_to(y=self.cursor - h + 1, animate=False)

    def action_move(self, delta: int) -> None:
        target = max(0, min(self.cursor + delta, len(self.rows) - 1))
        self.move_cursor(self.rows[target])

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(self.size.height - 1, 1))

    def action_edge(self, end: int) -> None:
        self.move_cursor(self.rows[-1 if end else 0])

    def action_select(self) -> None:
        node = self.cursor_node
        if node is not None:
            self.post_message(self.Selected(node))

    def on_click(self, event: Click) -> None:
        row = int(self.scroll_offset.y) + event.y
        if 0 <= row < len(self.rows):
            self.move_cursor(self.rows[row])

    # ------------------------------------------------------------ rendering
    def render_line(self, y: int) -> Strip:
        width = self.size.width
        row = int(self.scroll_offset.y) + y
        if row >= len(self.rows):
            return Strip.blank(width)
        node = self.rows[row]
        guide = "" if node.depth == 0 else "  " * (node.depth - 1) + "├ "
        segs = [Segment(guide, GUIDE_STYLE)] if guide else []
        segs += list(node.label.render(self.app.console))
        strip = Strip(segs).crop_extend(0, width, None)
        if row == self.cursor:
            strip = strip.apply_style(CURSOR_FOCUS if self.has_focus else CURSOR_STYLE)
        return strip

    def show(self, v: ChunkView, version: int | None) -> None:
        """Fill the tree from a chunk view (keeping the selected field if it still exists)."""
        old = self.cursor_node.data.name if self.cursor_node and self.cursor_node.data else None
        self.clear()
        self.view = v
        rec = v.record
        hs = v.header_size
        where = "to be written at" if v.inserted else "at"
        title = f"{v.label} {where} {v.offset} (0x{v.offset:x}), {len(v.data)} bytes"
        flags = " DELETED" if v.deleted else (" NEW" if v.inserted else (" EDITED" if v.edited else ""))
        self.root.set_label(Text(title + flags, style="bold red" if v.error else "bold"))
        root = self.root
        tlen = 4 if hs == 8 else 2
        t = int.from_bytes(v.data[:tlen], "big") if len(v.data) >= tlen else 0
        ln = int.from_bytes(v.data[tlen:hs], "big") if len(v.data) >= hs else 0
        self._add(root, Text(f"chunk_type = {t} ({v.kind})", style="blue"), NodeInfo(None, 0, tlen))
        self._add(root, Text(f"length = {ln}", style="blue"), NodeInfo(None, tlen, hs - tlen))
        if v.error is not None:
            root.add_leaf(Text(printable(f"⚠ {v.error.reason} (field {v.error.field or '?'}, offset {v.error.offset})"),
                               style="bold red"))
        if rec is not None:
            for sp in v.spans:
                start = hs + sp.offset
                if sp.kind in ("len16", "len32"):
                    val = int.from_bytes(v.data[start:start + sp.size], "big")
                    self._add(root, Text(f"{sp.name} = {val}", style="grey58"), NodeInfo(None, start, sp.size))
                elif sp.kind == "pad":
                    raw = v.data[start:start + sp.size].hex(" ")
                    self._add(root, Text(f"padding ({sp.size} bytes) {raw}", style="grey50"), NodeInfo(None, start, sp.size))
                elif sp.kind == "props":
                    props = rec.values.get("properties")
                    label = f"properties: {len(props)} ({sp.size} bytes)" if props else "properties: none"
                    node = self._add(root, label, NodeInfo("properties", start, sp.size), leaf=not props)
                    for psp, p in zip(property_spans(sp, props), props or [], strict=False):
                        self._add(node, fmt_prop(p), NodeInfo(None, hs + psp.offset, psp.size))
                else:
                    value = rec.values.get(sp.name)
                    shown = (fmt_expiry(rec, sp.name, value, getattr(self.app, "at", time.time()))
                             if sp.name in ("expiry_time", "session_expiry_time") else fmt_value(sp.name, value))
                    expired = sp.name in ("expiry_time", "session_expiry_time") and "expired" in shown
                    label = Text.assemble((sp.name, "bold"), f" {sp.kind} = ", (shown, "red" if expired else ""))
                    node = self._add(root, label, NodeInfo(sp.name, start, sp.size, editable=True))
                    if sp.name == "payload" and rec.kind == "msg_store":
                        self._add_decoded(node, rec.values.get("topic"), value, start)
            if rec.kind == "unknown":
                root.add_leaf(Text("unknown chunk type: body kept as raw bytes", style="magenta"))
        self._flatten()
        self.cursor = 0
        if old is not None:
            for _s, _n, node in self.nodes_by_span:
                if node.data and node.data.name == old:
                    self.move_cursor(node, announce=False)
                    break

    def show_row(self, v: ChunkView) -> None:
        """Fill the tree from a sqlite store's row: its table, rowid and primary key, each column as stored
        (text and blobs linked to their bytes in the hex view), then the values the broker restores from it."""
        old = self.cursor_node.data.name if self.cursor_node and self.cursor_node.data else None
        self.clear()
        self.view = v
        info = v.row
        doc = getattr(self.app, "doc", None)
        read_only = doc is None or doc.read_only
        self.root.set_label(Text(f"{info.table} rowid {info.rowid} (row {v.index}), {len(v.data)} bytes of text "
                                 "and blobs" + ("  READ-ONLY" if read_only else "  (e edits a value)"), style="bold"))
        values = v.record.values if v.record is not None else {}
        root = self.root
        root.add_leaf(Text.assemble(("primary key ", "blue"), printable(info.key_text())))
        stored = self._add(root, Text(f"as stored in {info.table}:", style="blue"), None)
        at = getattr(self.app, "at", time.time())
        for name, kind, value in info.columns:
            start, size = info.spans.get(name, (0, 0))
            if value is None:
                shown = "NULL"
            elif isinstance(value, bytes) and kind == "text":
                shown = fmt_text(value.decode("utf-8", "surrogateescape"))
            elif isinstance(value, bytes):
                shown = fmt_bytes(value)
            elif name in ("expiry_time", "session_expiry_time"):
                shown = fmt_expiry(v.record, name, int(value), at) if v.record is not None else fmt_time(int(value))
            elif name in TIME_FIELDS or name.endswith("_time"):
                shown = fmt_time(int(value)) if isinstance(value, int) else str(value)
            else:
                shown = str(value)
            label = Text.assemble((name, "bold"), f" {kind} = ", shown)
            node = self._add(stored, label, NodeInfo(name, start, size, editable=name in values and name != "properties"))
            if name == "payload" and isinstance(value, bytes) and v.record is not None and size == len(value):
                self._add_decoded(node, v.record.values.get("topic"), value, start)
        rec = v.record
        if rec is not None:
            restored = self._add(root, Text(f"as Mosquitto restores it (the v6 {rec.kind} values):", style="blue"),
                                 None)
            for name, value in rec.values.items():
                if name == "properties":
                    props = value or []
                    node = self._add(restored, f"properties: {len(props)}" if props else "properties: none", None)
                    for p in props:
                        self._add(node, fmt_prop(p), None)
                    continue
                shown = (fmt_expiry(rec, name, value, at) if name in ("expiry_time", "session_expiry_time")
                         else fmt_value(name, value))
                start, size = info.spans.get(name, (0, 0))
                self._add(restored, Text.assemble((name, "bold"), " = ", shown), NodeInfo(name, start, size,
                                                                                         editable=True))
        self._flatten()
        self.cursor = 0
        if old is not None:
            for _s, _n, node in self.nodes_by_span:
                if node.data and node.data.name == old:
                    self.move_cursor(node, announce=False)
                    break

    def _add_decoded(self, parent: Node, topic: str | None, payload: Any, start: int) -> None:
        """The payload as the decoder reads it, under its field: each value linked to its bytes (a
        span relative to the payload, moved to the chunk's bytes); a payload that is plain text is
        shown by its field already."""
        if not isinstance(payload, bytes) or not payload:
            return
        if len(payload) > DECODE_MAX:
            parent.add_leaf(Text(f"not decoded here: over {DECODE_MAX >> 20} MiB (dump --json --decode does)",
                                 style="grey50"))
            return
        try:
            d = payload_decoder(self.app).decode(topic, payload, spans=True)
        except Exception as exc:  # noqa: BLE001 - a decoder fault must not take the field tree with it
            parent.add_leaf(Text(printable(f"payload not decoded: {exc}"), style="red"))
            return
        if d is None or (d.ok and d.format == "text" and d.rule.startswith("detected")):
            return
        if not d.ok:
            at = f" at payload byte {d.offset}" if d.offset is not None else ""
            info = NodeInfo(None, start + d.offset, 1) if d.offset is not None and d.offset < len(payload) else None
            self._add(parent, Text(printable(f"not {d.format} ({d.rule}): {d.error}{at}"), style="bold red"), info)
            return
        head = self._add(parent, Text.assemble(("decoded ", "bold"), (d.format, DECODED_STYLE),
                                               (printable(f"  ({d.rule})"), "grey58")),
                         NodeInfo(None, start, len(payload)))
        tree = d.tree
        if tree is None:
            return
        budget = [NODES_MAX]

        def add(into: Node, f: Any) -> None:
            budget[0] -= 1
            if budget[0] < 0:
                if budget[0] == -1:
                    head.add_leaf(Text(f"… (the first {NODES_MAX} values shown)", style="grey50"))
                return
            value = "" if f.children and f.value is None else f" = {fmt_decoded(f.value)}"
            note = f"  {f.note}" if f.note else ""
            label = Text.assemble((printable(f.name), "bold"), (f" {f.kind}", "grey58"), printable(value),
                                  (printable(note), DECODED_STYLE))
            info = NodeInfo(None, start + f.start, f.end - f.start) if f.start is not None and f.end else None
            node = self._add(into, label, info)
            for c in f.children[:500]:
                add(node, c)
            if len(f.children) > 500:
                node.add_leaf(Text(f"… {len(f.children) - 500} more", style="grey50"))

        for c in tree.children[:500] if tree.children else [tree]:
            add(head, c)

    def node_at(self, pos: int) -> Node | None:
        """The innermost node whose bytes include ``pos``."""
        best = None
        for start, size, node in self.nodes_by_span:
            if start <= pos < start + size and (best is None or size < best[1]):
                best = (start, size, node)
        return best[2] if best else None

    def select_byte(self, pos: int) -> None:
        node = self.node_at(pos)
        if node is not None and node is not self.cursor_node:
            self._sync_node = node
            self.move_cursor(node)
