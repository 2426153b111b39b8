"""Finding chunks: the filter bar, store-id columns, search, and unsaved edits among the matches.

Store ids sit at a fixed offset in msg_store, client_msg and retain bodies, so they are
gathered for millions of chunks with block reads and numpy instead of decoding (goto and
follow). Filters are answered by the codec's column engine (codec.views.select.pick), the
same one the CLI and the exporters use, with unsaved edits and inserted chunks decided in the
same pass, as if the file held them.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from codec import CodecError, Record
from codec.columnar import gather_u64
from codec.layouts import ChunkType, layout_for
from codec.views.jsonview import DIRECTION_NAMES, STATE_NAMES
from codec.views.query import Selection, parse_store_ids, valid_filter
from inspector.tui.model.document import Document, chunk_kind_names
from inspector.tui.model.rows import summary

FILTER_KEYS = {"type": "type", "t": "type", "kind": "type", "topic": "topic", "tp": "topic", "client": "client",
               "c": "client", "id": "client", "store": "store", "s": "store", "sid": "store"}
"""The filter bar's criteria and their short spellings."""

FILTER_PLACEHOLDER = "type:retain  topic:site/+/temp  client:dev-1  store:10-20  or a topic prefix: site/te"
FILTER_HELP = ("types: cfg msg_store client_msg retain sub client (msg, cmsg, ret…) · topic: an MQTT filter · "
               "a bare word: topics starting with it · criteria combine (AND) · Enter applies, Esc clears")
PREFIX_LIMIT = 2000
"""Different topic levels a bare word may open onto (each becomes one MQTT filter)."""


@dataclass
class FilterSpec:
    """What the filter bar asked for, parsed from ``type:msg topic:a/# client:x store:1-9 sensors/te``.

    ``prefixes``: bare words, topics starting with them; :func:`resolve_prefixes` turns them into
    MQTT filters (``topics``) that match exactly those topics, so every path that takes a
    Selection (the column engine, the exporters) answers them. ``notes``: suggestions to show.
    """

    text: str
    kinds: set[str] | None = None
    topics: list[str] | None = None
    clients: set[str] | None = None
    store_ids: tuple[int, int] | None = None
    prefixes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.kinds or self.topics or self.clients or self.store_ids or self.prefixes)

    def selection(self) -> Selection:
        assert not self.prefixes, "resolve_prefixes first"
        return Selection(kinds=self.kinds, topics=list(self.topics or []), clients=set(self.clients or ()),
                         store_ids=self.store_ids)


def suggest(word: str, names: list[str]) -> str:
    """`` (did you mean X?)`` for a near miss among ``names``, else nothing."""
    close = difflib.get_close_matches(word.lower(), names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def parse_filter(text: str) -> FilterSpec:
    """Parse the filter bar; raises ValueError with a one-line reason (and a suggestion for a near miss).

    A bare word is a chunk type when it names one (``retain``, ``retained``), an MQTT filter when
    it holds a wildcard, and otherwise a topic prefix (``sensors/te``).
    """
    spec = FilterSpec(text)
    kinds = chunk_kind_names()
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"filter: {exc}") from None
    for word in words:
        key, sep, val = word.partition(":")
        if not sep:
            if word.lower() in kinds:
                key, val = "type", word
            elif "+" in word or "#" in word:
                key, val = "topic", word
            else:
                spec.prefixes.append(word)
                hint = suggest(word, list(kinds)) if "/" not in word else ""
                if hint:
                    spec.notes.append(f"{word!r} is read as a topic prefix{hint.replace('mean ', 'mean type:')}")
                continue
        key = FILTER_KEYS.get(key.lower(), "")
        if key == "type":
            for name in val.split(","):
                if name.lower() not in kinds:
                    raise ValueError(f"filter: unknown chunk type {name!r}{suggest(name, list(kinds))}; types: "
                                     "cfg, msg_store, client_msg, retain, sub, client")
                spec.kinds = (spec.kinds or set()) | {ChunkType(kinds[name.lower()]).label}
        elif key == "topic":
            if not valid_filter(val):
                raise ValueError(f"filter: not a valid MQTT topic filter: {val!r} (+ and # stand for whole levels, "
                                 "# last: a/+/c, a/#)")
            spec.topics = (spec.topics or []) + [val]
        elif key == "client":
            spec.clients = (spec.clients or set()) | {val}
        elif key == "store":
            try:
                spec.store_ids = parse_store_ids(val)
            except CodecError as exc:
                raise ValueError(f"filter: {exc.reason}") from None
        else:
            raw = word.partition(":")[0]
            hint = suggest(raw, sorted(set(FILTER_KEYS.values())))
            raise ValueError(f"filter: unknown key {raw + ':'!r}{hint.replace('?)', ':?)')}; keys: type:, topic:, "
                             "client:, store:, or a bare word for a topic prefix")
    return spec


def resolve_prefixes(doc: Document, spec: FilterSpec) -> FilterSpec:
    """The spec with each topic prefix turned into the MQTT filters that match exactly the topics
    starting with it: ``corp/ret`` → ``corp/retained/#`` (which also matches ``corp/retained``) for
    each level ``ret…`` the file's stored and subscribed topics have (one column pass per type).
    Unsaved edits count. Raises ValueError past :data:`PREFIX_LIMIT` different levels."""
    if not spec.prefixes:
        return spec
    from codec.columnar import literal_at

    src = doc.column_source() if doc.count() else None
    topics = list(spec.topics or [])
    for prefix in spec.prefixes:
        p = prefix.encode("utf-8", "surrogateescape")
        base = p[: p.rfind(b"/") + 1]
        levels: set[bytes] = set()

        def note(topic: bytes) -> None:
            if topic.startswith(p):  # noqa: B023 - used at once, in this pass
                levels.add(topic[len(base):].split(b"/", 1)[0])  # noqa: B023
                if len(levels) > PREFIX_LIMIT:  # noqa: B023
                    raise ValueError(f"filter: topics starting {prefix!r} open onto more than {PREFIX_LIMIT:,} "  # noqa: B023
                                     "different levels: type more of it, or use topic:FILTER")

        def test(data: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
            out = np.zeros(len(starts), dtype=bool)
            rows = np.flatnonzero(np.asarray(sizes) >= len(p))  # noqa: B023
            rows = rows[literal_at(data, np.asarray(starts, dtype=np.int64)[rows], p)]  # noqa: B023
            out[rows] = True
            for s, n in zip(np.asarray(starts)[rows].tolist(), np.asarray(sizes)[rows].tolist(), strict=True):
                note(bytes(data[s:s + n]))
            return out

        if src is not None:
            for t in (int(ChunkType.MSG_STORE), int(ChunkType.SUB)):
                src.gather(t, (), {"topic": test})
        for rec in [*doc.overlay.replaced.values(), *doc.new_records.values()]:
            if rec.kind in ("msg_store", "sub") and rec.get("topic"):
                note(rec["topic"].encode("utf-8", "surrogateescape"))
        found = sorted(level.decode("utf-8", "surrogateescape") for level in levels
                       if b"+" not in level and b"#" not in level)
        head = base.decode("utf-8", "surrogateescape")
        topics += [f"{head}{level}/#" for level in found] or [prefix]  # none: the prefix itself matches nothing more
    return FilterSpec(spec.text, spec.kinds, topics, spec.clients, spec.store_ids, [], list(spec.notes))


class StoreColumns:
    """The msg_store chunks sorted by store id, for goto and follow, gathered a window of chunks at a
    time with block reads (no decoding): one sorted uint64 a store, ``store id << bits | chunk number``
    (``bits`` enough for any chunk number), so equal ids keep file order. Ids too wide for that (past
    2^42 on 2.4 M chunks) are kept as sorted ids beside their chunk numbers.

    References (client_msg and retain store ids, as many again) are not kept: :meth:`references`
    counts them with one more pass when an edit asks. On 2.4 M chunks this holds 9.6 MB where a
    store id per chunk, with the stores' sorted ids and int64 chunk numbers, held 41 MB.
    """

    def __init__(self, doc: Document, *, pack: bool = True) -> None:
        idx = doc.index()
        assert idx is not None and doc.version is not None
        self.doc = doc
        self.index = idx
        n = len(idx)
        self.bits = max(n.bit_length(), 1)
        types = idx.types_array()[:n]
        count = sum(int(np.count_nonzero(types[k:k + WINDOW] == int(ChunkType.MSG_STORE))) for k in range(0, n, WINDOW))
        self.keys = np.zeros(count, dtype=np.uint64)
        self.rows: np.ndarray | None = None  # set when the ids are too wide to share a key with the rows
        widest, shift, k = np.uint64((1 << (64 - self.bits)) - 1), np.uint64(self.bits), 0
        for rows, ids in store_ids(doc, int(ChunkType.MSG_STORE)):
            if not pack or (len(ids) and int(ids.max()) > widest):
                self._unpacked(count)
                return
            self.keys[k:k + len(ids)] = (ids << shift) | rows.astype(np.uint64)
            k += len(ids)
        assert k == count
        self.keys.sort()  # in place

    def _unpacked(self, count: int) -> None:
        """Sorted ids, and their chunk numbers beside them (ids that leave no room for a chunk number)."""
        self.keys = np.zeros(count, dtype=np.uint64)
        self.rows = np.zeros(count, dtype=np.int64)
        k = 0
        for rows, ids in store_ids(self.doc, int(ChunkType.MSG_STORE)):
            self.keys[k:k + len(ids)], self.rows[k:k + len(ids)] = ids, rows
            k += len(ids)
        order = np.argsort(self.keys, kind="stable")  # equal ids keep file order: the first one is found
        self.keys, self.rows = self.keys[order], self.rows[order]

    def find_store(self, store_id: int) -> int | None:
        """Chunk index of the msg_store with this id (the first in the file; binary search), or None."""
        if not 0 <= store_id < 1 << 64:
            return None
        if self.rows is not None:
            k = int(np.searchsorted(self.keys, np.uint64(store_id)))
            return int(self.rows[k]) if k < len(self.keys) and int(self.keys[k]) == store_id else None
        if store_id >> (64 - self.bits):
            return None  # wider than any packed id
        k = int(np.searchsorted(self.keys, np.uint64(store_id << self.bits)))
        if k < len(self.keys) and int(self.keys[k]) >> self.bits == store_id:
            return int(self.keys[k]) & ((1 << self.bits) - 1)
        return None

    def references(self, store_id: int) -> int:
        """How many client_msg and retain chunks of the file reference this store id (unsaved edits
        aside): a pass over their store ids, asked by an edit that may leave them dangling."""
        want = np.uint64(store_id)
        return sum(int(np.count_nonzero(ids == want))
                   for t in (int(ChunkType.CLIENT_MSG), int(ChunkType.RETAIN)) for _rows, ids in store_ids(self.doc, t))


WINDOW = 1 << 16
"""Chunks whose store ids are gathered at once (with reads of :data:`BLOCK` bytes): temporaries of about
2 MB whatever the file size (brokers save the stores one after another, so a window may be all stores)."""

BLOCK = 1 << 20


def store_ids(doc: Document, t: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(chunk numbers, store ids) of the file's chunks of type ``t`` (msg_store, client_msg, retain), in
    file order, a window at a time: read at the store id's fixed place in the body, decoded where it
    has none (a v2-v4 client_msg starts with its client id), a store's column batch by batch."""
    idx = doc.index()
    assert idx is not None and doc.version is not None
    batches = doc.store_id_batches(t)
    if batches is not None:  # columns of the file's own (a store's)
        yield from batches
        return
    n = len(idx)
    rel = _store_id_offset(doc.version, t)
    if rel is None:
        rows: list[int] = []
        ids: list[int] = []
        for c in safe_stream(doc, 0, [t]):
            rows.append(c.index)
            ids.append(c.record["store_id"])
            if len(rows) == WINDOW:
                yield np.array(rows, dtype=np.int64), np.array(ids, dtype=np.uint64)
                rows, ids = [], []
        if rows:
            yield np.array(rows, dtype=np.int64), np.array(ids, dtype=np.uint64)
        return
    offsets, types = idx.offsets_array()[:n], idx.types_array()[:n]  # views of the index
    for k in range(0, n, WINDOW):
        sel = np.flatnonzero(types[k:k + WINDOW] == t) + k
        if len(sel):
            yield sel, gather_u64(doc.db.fd, offsets[sel] + (doc.hsize + rel), doc.endian, block=BLOCK)


def _store_id_offset(version: int, t: int) -> int | None:
    """Where store_id sits in this chunk type's body, or None past a variable-size field."""
    layout = layout_for(version, t)
    return None if layout is None else layout.offset_of("store_id")


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


Inserted = tuple[dict[int, list[Record]], dict[int, list[int]]]
"""Inserted chunks by the file chunk they follow, in saved order: (their records, their virtual ids)."""


def inserted_records(doc: Document) -> Inserted:
    """The document's inserted chunks by anchor, in the order a save writes them (a snapshot)."""
    recs: dict[int, list[Record]] = {}
    ids: dict[int, list[int]] = {}
    for v in sorted(doc.new_records, key=lambda v: (doc.new_anchor[v], -v)):
        recs.setdefault(doc.new_anchor[v], []).append(doc.new_records[v])
        ids.setdefault(doc.new_anchor[v], []).append(v)
    return recs, ids


def filter_view(doc: Document, spec: FilterSpec, replaced: dict[int, Record] | None = None,
                inserted: Inserted | None = None, step: Callable[[], None] | None = None) -> np.ndarray:
    """The rows a filter shows, decided on columns in one pass (codec.views.select.pick, one gather
    per chunk type it needs), as if the file held its unsaved edits: edited records (``replaced``,
    default the document's) stand in for the chunks they replace, inserted ones (default the
    document's) are decided in their places, so a store among them counts for the references after
    it. Chunks the decoder refuses are left out. Rows: file indexes in file order, with the kept
    inserted chunks (virtual ids) right after their neighbour. ``step``: called per window of columns
    (a cancelled filter raises there and frees its columns)."""
    from codec.sources import known_refusals
    from codec.views.select import pick

    edits = doc.overlay.replaced if replaced is None else replaced
    recs, ids = inserted_records(doc) if inserted is None else inserted
    bad = known_refusals(doc.db)  # (a store's rows all decode: rows, not bytes)
    picked = pick(doc.db, spec.selection(), replaced=edits, inserted=recs, bad=bad, source=doc.column_source(),
                  step=step)
    rows = picked.rows
    added = [(a, ids[a][j]) for a in sorted(picked.added) for j in picked.added[a]]
    if added:
        rows = np.insert(rows, np.searchsorted(rows, [a for a, _v in added], side="right"), [v for _a, v in added])
    return rows


# What a chunk's summary (rows.summary) writes besides its text fields, per type: characters of
# the generated text (lower case), the characters next to each text field, and the text fields.
# A needle character that the generated text never holds must lie in a text field, and so must the
# needle's stretch around it up to a character that can border a field: that stretch (lower case)
# is what the columns are searched for; chunks that hold it are then confirmed one by one.
_DIGITS = "0123456789-"
SUMMARY_TEXT: dict[int, tuple[str, str, tuple[str, ...]]] = {
    int(ChunkType.MSG_STORE): ("#" + _DIGITS + " qrb", " ", ("topic", "source_id", "source_username")),
    int(ChunkType.CLIENT_MSG): (" →#?" + _DIGITS + "".join(STATE_NAMES.values()) + "".join(DIRECTION_NAMES.values()),
                                " ", ("client_id",)),
    int(ChunkType.RETAIN): ("→#" + _DIGITS, "", ()),
    int(ChunkType.SUB): (" q" + _DIGITS, " ", ("client_id", "topic")),
    int(ChunkType.CLIENT): (" ()" + _DIGITS, " ()", ("client_id", "username")),
}


def search_stretch(needle: str, chunk_type: int) -> str | None:
    """The longest stretch of ``needle`` (lower case) that must lie inside one text field of a
    chunk of this type for its summary to hold the needle; None if the needle could be all
    generated text (then every chunk of the type is a candidate)."""
    generated, borders, _fields = SUMMARY_TEXT[chunk_type]
    best: str | None = None
    for i, ch in enumerate(needle):
        if ch in generated:
            continue
        a, b = i, i + 1
        while a > 0 and needle[a - 1] not in borders:
            a -= 1
        while b < len(needle) and needle[b] not in borders:
            b += 1
        if best is None or b - a > len(best):
            best = needle[a:b]
    return best


def search_candidates(doc: Document, text: str, first: int, stop: int) -> np.ndarray:
    """Chunks in ``[first, stop)`` that may match a search (a superset: the caller confirms each),
    found on columns: text fields searched for the needle's must-hold stretch, payloads for the
    needle's bytes, with the codec gathers (codec.views.select)."""
    from codec.views.select import contains

    needle = text.lower()
    src = doc.column_source()
    types = src.types[first:stop]
    out = [np.flatnonzero(~np.isin(types, list(SUMMARY_TEXT))) + first]  # cfg, unknown: few, confirmed
    raw = text.encode("utf-8", "surrogateescape")
    for t, (_gen, _borders, fields) in SUMMARY_TEXT.items():
        rows = np.flatnonzero(types == t) + first
        if not len(rows):
            continue
        stretch = search_stretch(needle, t)
        if stretch is None or not stretch.isascii() or not stretch.isprintable():
            out.append(rows)  # no column can rule these out
            continue
        tests = {f: contains(stretch.encode(), fold=True) for f in fields}
        if t == int(ChunkType.MSG_STORE):
            tests["payload"] = contains(raw)
        if not tests:
            continue
        cols = src.gather(t, (), tests, rows=rows)
        hit = np.zeros(len(rows), dtype=bool)
        for mark in cols.marks.values():
            hit |= mark
        hit[np.isin(rows, cols.bad)] = False
        out.append(rows[hit])
    return np.unique(np.concatenate(out))


def search_forward(doc: Document, text: str, start: int, cancelled: Callable[[], bool],
                   window: int = 1 << 18) -> int | None:
    """First chunk at or after ``start`` whose summary or text fields contain ``text`` (case-insensitive).

    Unsaved edits count: an edited chunk is searched as edited, and chunks inserted after a
    chunk (virtual ids) are searched right after it. Chunks are ruled out on columns
    (:func:`search_candidates`), a window of chunks at a time from the cursor on; only the
    candidates are decoded and confirmed.
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

    idx = doc.index()
    assert idx is not None
    n = len(idx)
    extra = np.array(sorted(i for i in set(edited) | set(after) if i >= 0), dtype=np.int64)
    first = max(start, 0)
    while first < n:
        if cancelled():
            return None
        stop = min(first + window, n)
        cand = np.union1d(search_candidates(doc, text, first, stop), extra[(extra >= first) & (extra < stop)])
        for c in cand.tolist():
            if c in edited:
                rec = edited[c]
            else:
                try:
                    rec = doc.db.chunk(c).record
                except CodecError:
                    continue  # a chunk the decoder refuses is skipped, as the list shows it
            if hit(rec):
                return c
            for v in after.get(c, ()):
                if hit(doc.new_records[v]):
                    return v
        first = stop
    return None
