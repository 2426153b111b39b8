"""The inspector's document: one open db plus an overlay of reversible edits.

Nothing is written until save. Every change (a field, a byte, a deletion) is an
:class:`Edit` that remembers the previous overlay state of the chunks it touches, so undo
and redo are exact. Chunks are decoded on demand and a few hundred are cached, which is
what keeps a 2.4 M-chunk file cheap to browse.
"""

from __future__ import annotations

import ast
import contextlib
import os
import struct
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from codec import CodecError, DbFile, Record, Span
from codec.engine import INT_LIMITS, decode_chunk, encode_chunk  # INT_LIMITS: the encoder's range per kind
from codec.index import ChunkIndex
from codec.layouts import ChunkType, header_size, layout_for, version_row
from codec.properties import encode_property, encode_vbi
from codec.writer import Overlay, SaveResult, save

# semantic ranges a field must respect beyond its byte width
FIELD_LIMITS: dict[str, tuple[int, int]] = {
    "qos": (0, 2), "retain": (0, 1), "dup": (0, 1), "direction": (0, 1), "state": (0, 11), "shutdown": (0, 1),
}
TEXT_FIELDS = ("topic", "client_id", "source_id", "source_username", "username")


class EditRefused(Exception):
    """An edit the format or the file does not allow; the message is shown to the user."""


@dataclass
class ChunkView:
    """What the UI shows for one chunk: its current bytes, decoded record and byte spans."""

    index: int
    offset: int
    header_size: int
    data: bytes  # header + body, edits applied
    original: bytes  # as stored in the file
    record: Record | None
    spans: list[Span]
    error: CodecError | None = None
    deleted: bool = False
    edited: bool = False
    inserted: bool = False  # a new chunk (not in the file) placed after ``offset``'s chunk
    row: Any = None  # a sqlite store's row (inspector.tui.model.storedoc.RowInfo): table, rowid, key, columns

    @property
    def label(self) -> str:
        if self.row is not None:
            return f"{self.row.table}[rowid {self.row.rowid}]"
        return f"{self.kind}[new]" if self.inserted else f"{self.kind}[{self.index}]"

    @property
    def kind(self) -> str:
        return self.record.kind if self.record is not None else "damaged"

    def changed_bytes(self) -> set[int]:
        """Positions (relative to the chunk start) whose byte differs from the file."""
        if not self.edited and not self.inserted:
            return set()
        if len(self.data) != len(self.original):
            return set(range(len(self.data)))
        return {i for i, (a, b) in enumerate(zip(self.data, self.original, strict=True)) if a != b}


State = tuple[Record | None, bool]  # (replacement record or None, deleted)


@dataclass
class Edit:
    """One reversible change: the overlay state of each touched chunk before and after."""

    label: str
    before: dict[int, State] = field(default_factory=dict)
    after: dict[int, State] = field(default_factory=dict)
    warning: str | None = None
    base: Base | None = None  # the file its chunk numbers are of (a save starts a new one)


Snapshot = tuple[dict[int, Record], set[int], dict[int, Record], dict[int, int]]
"""An overlay's state: (replaced, deleted, inserted records, their anchors)."""


@dataclass(eq=False)
class Base:
    """A file the edits were made on: the one open now, or one a save has replaced since.

    A save renames a new file over the old one, whose bytes stay readable through the descriptor
    it was opened with: undoing past a save goes back to that file with the edits as they were
    saved (``saved``), and a further save writes from it. ``prev``/``next``: the base saved from /
    the base a save made.
    """

    db: DbFile
    prev: Base | None = None
    next: Base | None = None
    saved: Snapshot | None = None


def property_spans(props_span: Span, props: list[Any] | None) -> list[Span]:
    """Byte spans of each MQTT v5 property inside a property tail (for nested highlighting)."""
    if not props:
        return []
    total = sum(len(encode_property(p)) for p in props)
    pos = props_span.offset + len(encode_vbi(total))
    out = []
    for k, p in enumerate(props):
        n = len(encode_property(p))
        out.append(Span(f"properties.{k}", pos, n, "prop"))
        pos += n
    return out


class Document:
    """An open db, its edit overlay, undo/redo history and a small decode cache."""

    CACHE = 512
    # What the features may offer on this file (a 2.1 sqlite store's document, inspector.tui.model.storedoc,
    # says otherwise): the features ask these, never which format the file is.
    unit = "chunk"  # what the list's entries are
    checks_save = True  # a save is checked for errors the file has not now first (a store's rows as they are typed)
    read_only_note = ""  # said after READ-ONLY on the status line
    refused_bytes: str | None = None  # why the hex view does not edit bytes here (None: it does)
    refused_adds: str | None = None  # why no chunk is added here (None: they are)
    refused_trim: str | None = None  # why a session's queue is not trimmed here (None: it is)
    refused_save_as: str | None = None  # why the file is not saved under another name (None: it is)

    def __init__(self, path: str, *, endian: str = "little", read_only: bool = False) -> None:
        self.path = path
        self.endian = endian
        self.db = DbFile(path, endian=endian)
        self.read_only = read_only or not os.access(path, os.W_OK)
        self.forced_read_only = read_only
        self.overlay = Overlay()
        self.undo_stack: list[Edit] = []
        self.redo_stack: list[Edit] = []
        self.saved_depth = 0
        self._cache: OrderedDict[int, ChunkView] = OrderedDict()
        # inserted chunks: virtual ids -2, -3, ... -> record, and the file chunk they follow
        self.new_records: dict[int, Record] = {}
        self.new_anchor: dict[int, int] = {}
        self.rows_version = 0  # bumped when inserted chunks appear or disappear
        self._next_virtual = -2
        self.base = Base(self.db)
        self.disk = self.db  # the file as on disk now (a save refuses when it changed since)
        self.generation = 0  # bumped when the chunk numbers change (a save, an undo past one)

    @property
    def read_only_why(self) -> str:
        """Why edits are refused (the status line says it)."""
        return "--read-only" if self.forced_read_only else "no write permission"

    def column_source(self) -> Any:
        """The gathers the column engine reads (codec.views.select.FileColumns; a store's own)."""
        from codec.views.select import FileColumns

        return FileColumns(self.db)

    @property
    def chunk_bytes(self) -> bool:
        """Its chunks are bytes at offsets in the file (codec.storage): offsets name them (goto, findings)."""
        return self.db.chunk_bytes

    def heading(self) -> tuple[str, str] | None:
        """The header's two lines when the file describes itself in figures of its own (a store: its schema,
        journal and rows per table); None: the header is drawn from the chunks (version, shutdown flag,
        counts per type as edited)."""
        return None

    def store_id_batches(self, t: int) -> Iterator[tuple[Any, Any]] | None:
        """(row numbers, store ids) of chunk type ``t`` batch by batch when the file has them as columns of
        its own (a store); None: they are read at the store id's place in each chunk's bytes."""
        return None

    def saved_text(self, result: Any) -> str:
        """What the status line says after a save (``result``: what :meth:`save` returned)."""
        kept = f"; the file as it was: {result.backup}" if result.backup else ""
        return (f"saved {result.size:,} bytes to {result.path} ({result.chunks_encoded} chunk(s) encoded, "
                f"{result.chunks_deleted} deleted){kept} (u: undo)")

    # ------------------------------------------------------------ index
    @property
    def version(self) -> int | None:
        return self.db.version

    @property
    def hsize(self) -> int:
        return header_size(self.db.version or 6)

    def index(self) -> ChunkIndex | None:
        return self.db.partial_index()

    def count(self) -> int:
        """Chunks the UI may show: while scanning, the newest one may still be settling."""
        idx = self.db.partial_index()
        if idx is None:
            return 0
        return len(idx) if idx.complete else max(len(idx) - 1, 0)

    def complete(self) -> bool:
        idx = self.db.partial_index()
        return bool(idx is not None and idx.complete)

    # ------------------------------------------------------------ chunks
    def view(self, i: int) -> ChunkView:
        """The chunk as it currently is (overlay applied), decoded with spans."""
        v = self._cache.get(i)
        if v is not None:
            self._cache.move_to_end(i)
            return v
        v = self._make_view(i)
        self._cache[i] = v
        if len(self._cache) > self.CACHE:
            self._cache.popitem(last=False)
        return v

    def original(self, i: int) -> bytes:
        idx = self.db.partial_index()
        assert idx is not None
        off = idx.offsets[i]
        return os.pread(self.db.fd, idx.chunk_end(i) - off, off)

    def _make_view(self, i: int) -> ChunkView:
        idx = self.db.partial_index()
        assert idx is not None
        if i <= -2:
            rec = self.new_records[i]
            data = encode_chunk(rec, self.db.version, endian=self.endian)
            anchor = self.new_anchor[i]
            off = idx.chunk_end(anchor)
            record, spans, error = self.decode_bytes(data, anchor + 1, off)
            return ChunkView(i, off, self.hsize, data, b"", record, spans, error, edited=True, inserted=True)
        off = idx.offsets[i]
        raw = self.original(i)
        rec = self.overlay.replaced.get(i)
        data = raw if rec is None else encode_chunk(rec, self.db.version, endian=self.endian)
        record, spans, error = self.decode_bytes(data, i, off)
        return ChunkView(i, off, self.hsize, data, raw, record, spans, error,
                         deleted=i in self.overlay.deleted, edited=rec is not None)

    def decode_bytes(self, data: bytes, i: int, off: int) -> tuple[Record | None, list[Span], CodecError | None]:
        """Decode one chunk's bytes (header + body); errors come back located, not raised."""
        version = self.db.version or 6
        hs = self.hsize
        fmt = version_row(version).header_format
        try:
            t, length = struct.unpack_from(fmt, data, 0)
            rec, end, spans = decode_chunk(version, t, data, hs, len(data), length, endian=self.endian, want_spans=True)
        except (CodecError, struct.error) as exc:
            err = exc if isinstance(exc, CodecError) else CodecError(str(exc))
            if isinstance(exc, CodecError) and exc.offset is not None and exc.offset < off:
                err.offset = off + exc.offset
            err.located(path=self.path, chunk_index=i, chunk_offset=off)
            return None, [], err
        rec.version = version
        if end != len(data):
            err = CodecError(f"chunk decodes to {end} bytes but occupies {len(data)}", path=self.path,
                             offset=off, chunk_index=i, chunk_type=rec.kind)
            return rec, list(spans or []), err
        return rec, list(spans or []), None

    def record(self, i: int) -> Record | None:
        return self.view(i).record

    # ------------------------------------------------------------ edits
    def _state(self, i: int) -> State:
        if i <= -2:
            return self.new_records.get(i), False
        return self.overlay.replaced.get(i), i in self.overlay.deleted

    def _set_state(self, i: int, state: State) -> None:
        rec, deleted = state
        if i <= -2:  # an inserted chunk: present with its record, or gone
            if rec is None or deleted:
                if self.new_records.pop(i, None) is not None:
                    self.rows_version += 1
            else:
                if i not in self.new_records:
                    self.rows_version += 1
                self.new_records[i] = rec
            self._cache.pop(i, None)
            return
        if rec is None:
            self.overlay.replaced.pop(i, None)
        else:
            self.overlay.replaced[i] = rec
        if deleted:
            self.overlay.deleted.add(i)
        else:
            self.overlay.deleted.discard(i)
        self._cache.pop(i, None)

    def apply(self, edit: Edit) -> Edit:
        if self.read_only:
            raise EditRefused("the file is open read-only; edits are disabled")
        edit.base = self.base
        for i in edit.after:
            edit.before.setdefault(i, self._state(i))
        for i, st in edit.after.items():
            self._set_state(i, st)
        self.undo_stack.append(edit)
        if self.saved_depth > len(self.undo_stack) - 1:
            self.saved_depth = -1  # the saved state can no longer be reached by redo
        self.redo_stack.clear()
        return edit

    def _step(self, source: list[Edit], target: list[Edit], states: str) -> Edit | None:
        """Move the last edit of ``source`` to ``target``, its chunks set to its ``before`` or ``after``."""
        if not source:
            return None
        edit = source[-1]
        self._switch(edit.base)
        source.pop()
        for i, st in getattr(edit, states).items():
            self._set_state(i, st)
        target.append(edit)
        return edit

    def undo(self) -> Edit | None:
        return self._step(self.undo_stack, self.redo_stack, "before")

    def redo(self) -> Edit | None:
        edit = self._step(self.redo_stack, self.undo_stack, "after")
        if edit is None:
            return None
        nxt = self.base.next
        if nxt is not None and len(self.undo_stack) == self.saved_depth and self._snapshot_is(self.base.saved):
            self._load(nxt, None)  # redone up to the save: show the file as saved, as after the save
        return edit

    # ------------------------------------------------------------ bases (undo past a save)
    def _snapshot(self) -> Snapshot:
        return dict(self.overlay.replaced), set(self.overlay.deleted), dict(self.new_records), dict(self.new_anchor)

    def _snapshot_is(self, snap: Snapshot | None) -> bool:
        if snap is None:
            return False
        replaced, deleted, records, _anchors = snap
        return (deleted == self.overlay.deleted and replaced.keys() == self.overlay.replaced.keys()
                and all(replaced[i] is self.overlay.replaced[i] for i in replaced)
                and records.keys() == self.new_records.keys()
                and all(records[v] is self.new_records[v] for v in records))

    def _load(self, base: Base, snap: Snapshot | None) -> None:
        """Show ``base`` with the overlay ``snap`` (None: no edits)."""
        replaced, deleted, records, anchors = snap if snap is not None else ({}, set(), {}, {})
        left = self.base
        self.base, self.db = base, base.db
        if left is not base and left.db is not base.db and hasattr(left.db, "drop_index"):
            left.db.drop_index()  # kept for undo, not shown: its index is scanned again if it is
        if base.db.partial_index() is None or not base.db.partial_index().complete:
            for _ in base.db.scan_steps():
                pass
        self.overlay = Overlay(dict(replaced), set(deleted))
        self.new_records, self.new_anchor = dict(records), dict(anchors)
        self.rows_version += 1
        self.generation += 1
        self._cache.clear()

    def _switch(self, target: Base | None) -> None:
        """Make ``target`` (an edit's base) the shown one: back through the saves for an undo, forward
        for a redo, each step with the edits as that save wrote them."""
        if target is None or target is self.base:
            return
        older, b = False, self.base.prev
        while b is not None:
            if b is target:
                older = True
                break
            b = b.prev
        while self.base is not target:
            if older:
                prev = self.base.prev
                assert prev is not None
                self._load(prev, prev.saved)
            else:
                nxt = self.base.next
                assert nxt is not None, "redo of an edit whose file is gone"
                self._load(nxt, None)

    def _prune(self) -> None:
        """Close the files no edit in the history can go back to."""
        wanted = {id(e.base) for e in self.undo_stack}
        b, keep = self.base, self.base
        while b is not None:
            if id(b) in wanted:
                keep = b
            b = b.prev
        old, keep.prev = keep.prev, None
        while old is not None:
            if old.db is not self.disk:
                old.db.close()
            old = old.prev

    def is_dirty(self) -> bool:
        return len(self.undo_stack) != self.saved_depth

    def set_field(self, i: int, name: str, text: str) -> Edit:
        """Change one field from what the user typed, validated by the field's type and range."""
        return self.apply(self.field_edit(i, name, text))

    def field_edit(self, i: int, name: str, text: str) -> Edit:
        """The edit setting one field from typed text, not applied; EditRefused says why it cannot be
        (the edit prompt stays open with the reason)."""
        v = self.view(i)
        if v.record is None:
            raise EditRefused(f"chunk {i} cannot be decoded; edit its bytes in the hex view instead")
        rec = v.record
        if name not in rec.values:
            raise EditRefused(f"{rec.kind} has no editable field {name!r}")
        value = parse_value(rec, name, text)
        new = rec.with_values(**{name: value})
        try:
            encode_chunk(new, self.db.version, endian=self.endian)
        except CodecError as exc:
            raise EditRefused(f"{rec.kind}[{i}].{name}: {exc.reason}") from None
        return Edit(f"{v.label}.{name} = {short(value)}", after={i: (new, i in self.overlay.deleted)})

    def set_byte(self, i: int, pos: int, value: int) -> Edit:
        """Overwrite one byte of a chunk; refused unless the bytes still decode to the same size."""
        v = self.view(i)
        data = bytearray(v.data)
        if not 0 <= pos < len(data):
            raise EditRefused("cursor outside the chunk")
        old = data[pos]
        data[pos] = value
        rec, _spans, err = self.decode_bytes(bytes(data), i, v.offset)
        if err is not None or rec is None:
            reason = err.reason if err is not None else "does not decode"
            field_name = f".{err.field}" if err is not None and err.field else ""
            raise EditRefused(f"byte {pos} = {value:02x} refused: {rec.kind if rec else 'chunk'}[{i}]{field_name}: {reason}")
        if encode_chunk(rec, self.db.version, endian=self.endian) != bytes(data):
            raise EditRefused(f"byte {pos} = {value:02x} refused: the codec cannot write these bytes back exactly")
        if bytes(data) == v.original and not v.inserted:
            new_state: State = (None, i in self.overlay.deleted)
        else:
            new_state = (rec, i in self.overlay.deleted)
        return self.apply(Edit(f"chunk {i} byte {pos}: {old:02x} -> {value:02x}", after={i: new_state}))

    def delete(self, indexes: list[int], label: str, warning: str | None = None) -> Edit:
        after: dict[int, State] = {i: (None, False) if i <= -2 else (self.overlay.replaced.get(i), True)
                                   for i in indexes}
        return self.apply(Edit(label, after=after, warning=warning))

    def insert_copy(self, i: int) -> int:
        """Add a copy of chunk ``i`` right after it (then edit its fields); returns its virtual id."""
        v = self.view(i)
        if v.record is None:
            raise EditRefused(f"chunk {i} does not decode; only decodable chunks can be copied")
        anchor = self.new_anchor[i] if i <= -2 else i
        new_id = self._next_virtual
        self._next_virtual -= 1
        self.new_anchor[new_id] = anchor
        rec = v.record.with_values()
        self.apply(Edit(f"add a copy of {v.label} after it", after={new_id: (rec, False)}))
        return new_id

    def insert_new(self, i: int, kind: str) -> int:
        """Add a blank chunk of ``kind`` right after chunk ``i`` (then edit its fields); returns its virtual id.

        The values come from the layout table of the file's version (``Layout.blank``): numbers
        0, empty text and payload, no properties.
        """
        chunk_type = addable_kind(kind)
        version = self.version
        layout = layout_for(version, chunk_type) if version is not None else None
        if layout is None:
            raise EditRefused("this file has no db version (an empty file): there is nothing to add to")
        anchor = self.new_anchor[i] if i <= -2 else i
        new_id = self._next_virtual
        self._next_virtual -= 1
        self.new_anchor[new_id] = anchor
        rec = Record(int(chunk_type), layout.blank(), version)
        self.apply(Edit(f"add a new {ChunkType(chunk_type).label} after chunk {anchor}", after={new_id: (rec, False)}))
        return new_id

    def row_array(self, n: int) -> Any:
        """File chunks 0..n-1 with inserted chunks placed after their anchors (None: no inserts)."""
        if not self.new_records:
            return None
        import numpy as np

        order = sorted(self.new_records, key=lambda v: (self.new_anchor[v], -v))
        at = [self.new_anchor[v] + 1 for v in order]
        return np.insert(np.arange(n, dtype=np.int64), at, order)

    def full_overlay(self) -> Overlay:
        """The overlay to save: replacements, deletions and inserted chunks in order."""
        inserted: dict[int, list[Record]] = {}
        for v in sorted(self.new_records, key=lambda v: (self.new_anchor[v], -v)):
            inserted.setdefault(self.new_anchor[v] + 1, []).append(self.new_records[v])
        return Overlay(dict(self.overlay.replaced), set(self.overlay.deleted), inserted)

    def restore(self, i: int) -> Edit:
        """Undelete one chunk (keeping any replacement record)."""
        return self.apply(Edit(f"restore chunk {i}", after={i: (self.overlay.replaced.get(i), False)}))

    # ------------------------------------------------------------ save
    def save(self, path: str | None = None, verify: Any = None) -> SaveResult:
        """Write atomically with codec.writer.save, then open the written file, keeping the history.

        ``verify(tmp)`` may refuse the written temp file before it is renamed (nothing changes then).
        Over the file itself, the file as it was is kept first, as ``--in-place`` keeps it
        (``FILE.bak``, then ``.bak.1`` …, never over anything), once the temp file is verified; it is
        removed again when the save does not happen. The undo history stays: undoing past the save
        goes back to the file as it was (:class:`Base`), and a further save writes that.
        """
        from codec.broker.running import require_no_broker
        from codec.safefile import keep_backup

        target = path or self.path
        require_no_broker(target)  # a running broker would write over it at its next save
        in_place = os.path.exists(target) and os.path.samefile(target, self.disk.path)
        backup: list[str] = []

        def keep_then_verify(tmp: str) -> None:
            if verify is not None:
                verify(tmp)
            if in_place:
                backup.append(keep_backup(target))

        try:
            result = save(self.db, target, self.full_overlay(), verify=keep_then_verify, guard=self.disk)
        except BaseException:
            for name in backup:
                with contextlib.suppress(OSError):
                    os.unlink(name)
            raise
        result.backup = backup[0] if backup else None
        self.saved_to(target)
        return result

    def saved_to(self, path: str) -> None:
        """Open the file just written at ``path`` as the new base; the history is kept (see :class:`Base`)."""
        db = DbFile(path, endian=self.endian)
        for _ in db.scan_steps():
            pass
        self.base.saved = self._snapshot()
        new = Base(db, prev=self.base)
        self.base.next = new
        old_disk = self.disk
        self.disk = db
        self.path = path
        self.read_only = self.forced_read_only or not os.access(path, os.W_OK)
        self.redo_stack.clear()  # a redo would need the edits after the save as they were: a save is an edit point
        self._load(new, None)
        self.saved_depth = len(self.undo_stack)
        if old_disk is not self.disk and not any(b.db is old_disk for b in self._bases()):
            old_disk.close()
        self._prune()

    def _bases(self) -> list[Base]:
        out, b = [], self.base
        while b is not None:
            out.append(b)
            b = b.prev
        return out

    def reopen(self, path: str) -> None:
        old = self.db
        self.db = DbFile(path, endian=self.endian)
        for _ in self.db.scan_steps():
            pass
        old.close()
        self.path = path
        self.read_only = self.forced_read_only or not os.access(path, os.W_OK)
        self.overlay = Overlay()
        self.new_records.clear()
        self.new_anchor.clear()
        self.rows_version += 1
        self.undo_stack.clear()
        self.redo_stack.clear()
        self.saved_depth = 0
        self._cache.clear()

    def close(self) -> None:
        for b in self._bases():
            b.db.close()
        self.disk.close()
        self.db.close()


def short(value: Any, n: int = 40) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= n else text[: n - 1] + "…"


def _field_kind(rec: Record, name: str) -> str | None:
    layout = layout_for(rec.version, rec.type, rec.abi)
    if layout is None:
        return None
    for f in layout.fields:
        if name in f.values:
            return f.kind
    return None


def parse_value(rec: Record, name: str, text: str) -> Any:
    """Turn typed text into a field value; raise EditRefused with a message saying why not."""
    kind = _field_kind(rec, name)
    where = f"{rec.kind}.{name}"
    if kind in ("u8", "u16", "u32", "u64h", "i64h", "nibbles", "time_t"):
        try:
            value = int(text.strip(), 0)
        except ValueError:
            raise EditRefused(f"{where}: {text!r} is not an integer") from None
        if kind == "time_t":  # signed, 4 or 8 bytes as the file was written
            bits = rec.time_t_size * 8 - 1
            lo, hi = -(1 << bits), (1 << bits) - 1
        else:  # the encoder's own ranges, so an edit is refused exactly when encoding would fail
            lo, hi = (0, 0x0F) if kind == "nibbles" else INT_LIMITS[kind]
        lo, hi = FIELD_LIMITS.get(name, (lo, hi))
        if not lo <= value <= hi:
            raise EditRefused(f"{where}: {value} is out of range {lo}..{hi}")
        return value
    if kind == "str":
        raw = parse_bytes_text(text, where)
        if rec.kind in ("msg_store", "sub") and name == "topic" and not raw:
            raise EditRefused(f"{where}: a topic cannot be empty")
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EditRefused(f"{where}: not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
        if "\0" in decoded:
            raise EditRefused(f"{where}: MQTT strings cannot contain NUL")
        if name == "topic" and rec.kind == "msg_store" and ("+" in decoded or "#" in decoded):
            raise EditRefused(f"{where}: a message topic cannot contain the wildcards + or #")
        return None if (not decoded and name in ("source_id", "source_username", "username")) else decoded
    if kind == "bytes":
        t = text.strip()
        if t.startswith("hex:"):
            try:
                return bytes.fromhex(t[4:])
            except ValueError:
                raise EditRefused(f"{where}: hex:... must be pairs of hex digits") from None
        return parse_bytes_text(text, where)
    raise EditRefused(f"{where}: this field is edited through the hex view")


def parse_bytes_text(text: str, where: str) -> bytes:
    r"""Text as UTF-8, with Python escapes (\xff, \n) understood so any byte can be typed."""
    if "\\" not in text:
        return text.encode("utf-8", "surrogateescape")
    try:
        value = ast.literal_eval("b'" + text.replace("'", "\\'") + "'") if text.isascii() else None
    except (ValueError, SyntaxError):
        raise EditRefused(f"{where}: bad escape sequence in {text!r}") from None
    if value is None:
        raise EditRefused(f"{where}: use either escapes or non-ASCII text, not both")
    return value


def addable_kind(kind: str) -> int:
    """The chunk type a typed kind names, among those a chunk can be added of; EditRefused otherwise."""
    kinds = {k: t for k, t in chunk_kind_names().items() if t != ChunkType.CFG}
    chunk_type = kinds.get(kind.strip().lower().replace("-", "_"))
    if chunk_type is None:
        import difflib

        labels = ", ".join(t.label for t in ChunkType if t != ChunkType.CFG)
        close = difflib.get_close_matches(kind.strip().lower(), list(kinds), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise EditRefused(f"{kind!r} is not a chunk kind to add{hint}: use one of {labels} (a file has one cfg chunk)")
    return chunk_type


def chunk_kind_names() -> dict[str, int]:
    """Names accepted in the filter bar for chunk types (with short aliases and plurals; ``retained`` is
    ``retain``, as in every command's ``--kind``)."""
    names = {t.label: int(t) for t in ChunkType}
    names.update({"msg": 2, "msgs": 2, "store": 2, "stores": 2, "msg_stores": 2, "cmsg": 3, "queue": 3, "queued": 3,
                  "client_msgs": 3, "ret": 4, "retained": 4, "retains": 4, "subs": 5, "subscription": 5,
                  "subscriptions": 5, "session": 6, "sessions": 6, "clients": 6})
    return names
