"""Data behind the widgets: one-line chunk summaries, filters and store-id columns.

Store ids sit at a fixed offset in msg_store, client_msg and retain bodies, so they are
gathered for millions of chunks with block reads and numpy instead of decoding; filters
that need text (topics, client ids) stream the file through codec.views.query.Selection.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from codec import CodecError, Record
from codec.columnar import gather_u64
from codec.layouts import ChunkType, layout_for
from codec.values import printable as safe_text
from codec.views.jsonview import DIRECTION_NAMES, STATE_NAMES
from codec.views.query import Selection, parse_store_ids, valid_filter
from inspector.tui.document import Document, chunk_kind_names

TYPE_SHORT = {1: "cfg", 2: "msg", 3: "cmsg", 4: "ret", 5: "sub", 6: "clnt"}
STORE_TYPES = (int(ChunkType.MSG_STORE), int(ChunkType.CLIENT_MSG), int(ChunkType.RETAIN))


def clip(text: str, n: int = 60) -> str:
    text = safe_text(text.replace("\n", "\\n").replace("\r", "\\r"))
    return text if len(text) <= n else text[: n - 1] + "…"


def printable(s: str | None) -> str:
    if s is None:
        return "-"
    return safe_text(s)  # the one rule: control characters and bytes that are not UTF-8 shown escaped


def summary(rec: Record) -> str:
    """One line per chunk: store id + topic, client ids, filters."""
    k, v = rec.kind, rec.values
    if k == "msg_store":
        flags = f"q{v['qos']}" + (" R" if v.get("retain") else "")
        return f"#{v['store_id']} {printable(v['topic'])} {flags} {len(v['payload'])}B"
    if k == "client_msg":
        state = STATE_NAMES.get(v["state"], str(v["state"]))
        return f"{printable(v['client_id'])} →#{v['store_id']} {state} {DIRECTION_NAMES.get(v['direction'], '?')}"
    if k == "retain":
        return f"→#{v['store_id']}"
    if k == "sub":
        return f"{printable(v['client_id'])} {printable(v['topic'])} q{v['qos']}"
    if k == "client":
        return f"{printable(v['client_id'])}" + (f" ({printable(v['username'])})" if v.get("username") else "")
    if k == "cfg":
        return f"shutdown={v['shutdown']} last_db_id={v['last_db_id']}"
    return f"type {rec.type}, {len(v.get('raw', b''))} bytes"


def type_label(t: int) -> str:
    return TYPE_SHORT.get(t, f"?{t}")


# ------------------------------------------------------------------ filters


@dataclass
class FilterSpec:
    """What the filter bar asked for, parsed from ``type:msg topic:a/# client:x store:1-9``."""

    text: str
    kinds: set[str] | None = None
    topics: list[str] | None = None
    clients: set[str] | None = None
    store_ids: tuple[int, int] | None = None

    @property
    def empty(self) -> bool:
        return not (self.kinds or self.topics or self.clients or self.store_ids)

    @property
    def needs_decode(self) -> bool:
        return bool(self.topics or self.clients)

    def selection(self) -> Selection:
        return Selection(kinds=self.kinds, topics=list(self.topics or []), clients=set(self.clients or ()),
                         store_ids=self.store_ids)


def parse_filter(text: str) -> FilterSpec:
    """Parse the filter bar; raises ValueError with a one-line reason."""
    spec = FilterSpec(text)
    kinds = chunk_kind_names()
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"filter: {exc}") from None
    for word in words:
        key, sep, val = word.partition(":")
        if not sep:
            key, val = ("topic", word) if ("/" in word or word in ("#", "+")) else ("type", word)
        key = key.lower()
        if key in ("type", "t", "kind"):
            for name in val.split(","):
                if name.lower() not in kinds:
                    raise ValueError(f"filter: unknown chunk type {name!r} (cfg, msg_store, client_msg, retain, sub, client)")
                spec.kinds = (spec.kinds or set()) | {ChunkType(kinds[name.lower()]).label}
        elif key in ("topic", "tp"):
            if not valid_filter(val):
                raise ValueError(f"filter: not a valid MQTT topic filter: {val!r}")
            spec.topics = (spec.topics or []) + [val]
        elif key in ("client", "c", "id"):
            spec.clients = (spec.clients or set()) | {val}
        elif key in ("store", "s", "sid"):
            try:
                spec.store_ids = parse_store_ids(val)
            except CodecError as exc:
                raise ValueError(f"filter: {exc.reason}") from None
        else:
            raise ValueError(f"filter: unknown key {key!r} (type:, topic:, client:, store:)")
    return spec


class StoreColumns:
    """Store ids of every msg_store/client_msg/retain chunk, read with numpy (no decoding)."""

    def __init__(self, doc: Document) -> None:
        idx = doc.index()
        assert idx is not None and doc.version is not None
        self.index = idx
        n = len(idx)
        offsets = np.frombuffer(idx.offsets, dtype=np.int64)[:n]
        types = np.frombuffer(idx.types, dtype=np.uint32)[:n]
        self.types = types
        self.ids = np.zeros(n, dtype=np.uint64)
        self.has = np.zeros(n, dtype=bool)
        for t in STORE_TYPES:
            rel = _store_id_offset(doc.version, t)
            if rel is None:  # e.g. a v2-v4 client_msg starts with its client id: decode those
                for c in safe_stream(doc, 0, [t]):
                    self.ids[c.index] = c.record["store_id"]
                    self.has[c.index] = True
                continue
            sel_all = np.flatnonzero(types == t)
            for k in range(0, len(sel_all), 1 << 18):  # bounded temporaries on millions of chunks
                sel = sel_all[k:k + (1 << 18)]
                self.ids[sel] = gather_u64(doc.db.fd, offsets[sel] + doc.hsize + rel, doc.endian)
                self.has[sel] = True
            del sel_all
        self.store_rows = np.nonzero(types == int(ChunkType.MSG_STORE))[0]
        order = np.argsort(self.ids[self.store_rows], kind="stable")
        self.store_rows = self.store_rows[order]
        self.sorted_ids = self.ids[self.store_rows]

    def find_store(self, store_id: int) -> int | None:
        """Chunk index of the msg_store with this id (binary search), or None."""
        k = int(np.searchsorted(self.sorted_ids, np.uint64(store_id)))
        if k < len(self.sorted_ids) and int(self.sorted_ids[k]) == store_id:
            return int(self.store_rows[k])
        return None

    def matching(self, spec: FilterSpec) -> np.ndarray:
        """Rows for a filter without text criteria (same rules as codec.views.query.Selection)."""
        n = len(self.types)
        keep = np.ones(n, dtype=bool)
        if spec.kinds is not None:
            wanted = [int(ChunkType[k.upper()]) for k in spec.kinds]
            keep &= np.isin(self.types, wanted)
        if spec.store_ids is not None:
            lo, hi = spec.store_ids
            in_range = self.has & (self.ids >= np.uint64(lo)) & (self.ids <= np.uint64(hi))
            cfg = (self.types == 1) & (spec.kinds is not None)
            keep &= in_range | cfg
        return np.nonzero(keep)[0].astype(np.int64)


def _store_id_offset(version: int, t: int) -> int | None:
    layout = layout_for(version, t)
    if layout is None:
        return None
    pos = 0
    for f in layout.fields:
        if f.name == "store_id":
            return pos
        if f.kind in ("str", "bytes", "props", "time_t"):
            return None
        pos += f.size if f.kind == "pad" else {"u8": 1, "u16": 2, "u32": 4, "u64h": 8, "i64h": 8,
                                                 "len16": 2, "len32": 4, "nibbles": 1}[f.kind]
    return None


def safe_stream(doc: Document, start: int = 0, types: list[int] | None = None) -> Iterator:
    """Chunks in file order from chunk ``start``; a chunk that fails to decode is skipped."""
    idx = doc.index()
    assert idx is not None
    i, n = start, len(idx)
    while i < n:
        try:
            for c in doc.db.stream(types=types, start=idx.offsets[i], stop=idx.end, first_index=i):
                i = c.index + 1
                yield c
            return
        except CodecError as exc:
            i = max(i, (exc.chunk_index if exc.chunk_index is not None else i) + 1)


def edit_matches(doc: Document, spec: FilterSpec) -> tuple[dict[int, bool], dict[int, list[int]]]:
    """How unsaved edits change a filter's rows: for each edited file chunk whether it matches
    now, and per anchor the inserted chunks (virtual ids, in list order) that match."""
    sel = spec.selection()
    edited = {i: sel.match(rec) for i, rec in doc.overlay.replaced.items() if i >= 0}
    added: dict[int, list[int]] = {}
    for v in sorted(doc.new_records, key=lambda v: (doc.new_anchor[v], -v)):
        if sel.match(doc.new_records[v]):
            added.setdefault(doc.new_anchor[v], []).append(v)
    return edited, added


def with_edits(rows: Any, doc: Document, spec: FilterSpec) -> np.ndarray:
    """Filter rows read from the file, corrected for unsaved edits (edited chunks re-tested,
    inserted chunks placed after their neighbour). Rows are file indexes in file order."""
    rows = np.asarray(rows, dtype=np.int64)
    if not doc.overlay.replaced and not doc.new_records:
        return rows
    edited, added = edit_matches(doc, spec)
    drop = [i for i, ok in edited.items() if not ok]
    if drop:
        rows = rows[~np.isin(rows, np.array(drop, dtype=np.int64))]
    now = [i for i, ok in edited.items() if ok]
    if now:
        rows = np.union1d(rows, np.array(now, dtype=np.int64))
    if added:
        order = sorted((a, -v, v) for a, vs in added.items() for v in vs)
        rows = np.insert(rows, np.searchsorted(rows, [a for a, _, _ in order], side="right"), [v for *_, v in order])
    return rows


def stream_matches(doc: Document, spec: FilterSpec, cancelled: Callable[[], bool],
                   batch: int = 2000) -> Iterator[list[int]]:
    """Chunk indexes that match a text filter, in batches, streaming the file once."""
    sel = spec.selection()
    kinds = sel.kinds
    types = None
    if kinds is not None and not sel.by_store:
        types = [int(ChunkType[k.upper()]) for k in kinds]
    found: list[int] = []
    edited = doc.overlay.replaced
    for c in safe_stream(doc, 0, types):
        if sel.match(edited.get(c.index, c.record)):
            found.append(c.index)
        if len(found) >= batch or (c.index & 0x3FFF) == 0:
            if cancelled():
                return
            if found:
                yield found
                found = []
    if found:
        yield found


def search_forward(doc: Document, text: str, start: int, cancelled: Callable[[], bool]) -> int | None:
    """First chunk at or after ``start`` whose summary or text fields contain ``text`` (case-insensitive).

    Unsaved edits count: an edited chunk is searched as edited, and chunks inserted after a
    chunk (virtual ids) are searched right after it.
    """
    needle = text.lower()
    raw_needle = text.encode("utf-8", "surrogateescape")
    edited = doc.overlay.replaced
    after: dict[int, list[int]] = {}
    for v in sorted(doc.new_records, key=lambda v: (doc.new_anchor[v], -v)):
        after.setdefault(doc.new_anchor[v], []).append(v)

    def hit(rec: Record) -> bool:
        if needle in summary(rec).lower():
            return True
        for name in ("source_id", "source_username", "username"):
            val = rec.get(name)
            if val and needle in val.lower():
                return True
        payload = rec.get("payload")
        return bool(payload and raw_needle in payload)

    for c in safe_stream(doc, start):
        if (c.index & 0x3FFF) == 0 and cancelled():
            return None
        if hit(edited.get(c.index, c.record)):
            return c.index
        for v in after.get(c.index, ()):
            if hit(doc.new_records[v]):
                return v
    return None
