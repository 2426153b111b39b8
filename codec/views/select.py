"""The one query path: selections and MQTT filters decided on columns, a whole file at once.

:class:`codec.views.query.Selection` states what to keep; :func:`pick` decides it for a whole
file: chunk types come from the index arrays, store ids, topics and client ids are gathered
through the layout table straight from a read-only map of the file (numpy, no record objects),
MQTT filters are matched on the topic bytes by :func:`topic_mask`, and the store-id closure
(client messages and retains that reference a matching stored message) is a sorted search.
Records that are not (yet) in the file — unsaved edits, inserted chunks — are decided in the
same pass (``replaced``, ``inserted``). Topics in hand (a backup, SQL rows, a subscription
list) go through :func:`topics_matching` / :func:`pairs_matching`, the same matcher. There is
no per-record matcher in the product; tests hold one as an oracle
(``tests/support/reference_selection.py``) and compare.

The rules: stores count in file order (a reference matches only a matching store at or
before it, compared by chunk position); cfg only when ``kinds`` asks; a ``sub`` matches a
topic filter by filter-or-equal; the client criterion applies to client, client_msg and sub
chunks; criteria combine with AND; ``$`` topics never match a leading wildcard.

Damage: the index stops where the walk does; chunks the walk passes but the per-record
decoder refuses (a cfg ``dbid_size`` other than 8, a property tail that does not parse or
a stored length too small for the fields) are found here too (:attr:`Picked.bad`), so a
command can stop its output exactly where the stream would have raised.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from codec.columnar import BATCH, decode_batch, literal_at
from codec.engine import Record
from codec.errors import CodecError
from codec.layouts import CFG, CLIENT, CLIENT_MSG, LAYOUTS, MSG_STORE, RETAIN, SUB, ChunkType, header_size
from codec.properties import decode_properties
from codec.reader import DbFile
from codec.views.query import Selection

SLASH = ord("/")
DOLLAR = ord("$")
KNOWN = np.array([int(t) for t in ChunkType], dtype=np.uint32)
_EMPTY_ROWS = np.zeros(0, dtype=np.int64)
WINDOW = 1 << 18
"""Chunks of the index a selection gathers at once (:meth:`FileColumns.windows`): a few MB of values."""


def as_bytes(text: str) -> bytes:
    """A text value as the file holds it (undecodable bytes were kept with surrogateescape)."""
    return text.encode("utf-8", "surrogateescape")


# ---------------------------------------------------------------- MQTT filters on byte columns
def topic_mask(data: np.ndarray, starts: np.ndarray, sizes: np.ndarray, filters: Iterable[str], *,
               exact: bool = False) -> np.ndarray:
    """Which topics (``data[starts[i]:starts[i] + sizes[i]]``) match any MQTT filter.

    The MQTT matching rules, evaluated level by level on the bytes of every topic at once (rows that fail a level drop out, so a literal prefix such
    as ``fleet/site059/`` costs a few byte comparisons per row). ``exact`` also accepts a
    topic equal to the filter (how a ``sub`` chunk's own filter is selected).
    """
    starts = np.asarray(starts, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    n = len(starts)
    out = np.zeros(n, dtype=bool)
    filters = list(filters)
    if not n or not filters:
        return out
    ends = starts + sizes
    dollar = np.zeros(n, dtype=bool)
    nonempty = np.flatnonzero(sizes > 0)
    dollar[nonempty] = data[starts[nonempty]] == DOLLAR
    everyone = np.arange(n)
    no_dollar = np.flatnonzero(~dollar)
    for flt in filters:
        fb = as_bytes(flt)
        rows = no_dollar if fb[:1] in (b"+", b"#") else everyone  # $ topics never match a leading wildcard
        out[rows[_filter_hits(data, starts[rows], ends[rows], fb.split(b"/"))]] = True
        if exact:
            out[bytes_equal(data, starts, sizes, fb)] = True
    return out


def bytes_equal(data: np.ndarray, starts: np.ndarray, sizes: np.ndarray, value: bytes) -> np.ndarray:
    """Rows whose value equals ``value`` (indexes into ``starts``)."""
    hit = np.flatnonzero(np.asarray(sizes) == len(value))
    return hit[literal_at(data, np.asarray(starts)[hit], value)]


def topics_matching(filters: Iterable[str], topics: Sequence[str | bytes | None], *,
                    exact: bool = False) -> np.ndarray:
    """Per topic in hand: does any MQTT filter match it? (:func:`topic_mask` on a column built from
    ``topics``; text is taken as the file holds it, bytes as they are; None never matches.)

    For callers that hold topics rather than a file's columns (a backup's messages, rows from
    SQL, records decoded one by one): pass them all at once, one call per batch."""
    out = topic_mask(*_text_column(topics), filters, exact=exact)
    return _none_fails(out, topics)


def pairs_matching(filters: Sequence[str], topics: Sequence[str | bytes | None], *,
                   exact: bool = False) -> np.ndarray:
    """Per row ``i``: does the filter ``filters[i]`` match ``topics[i]``? (Many subscriptions against
    the topics of their messages: rows are grouped by filter and each group is one :func:`topic_mask`.)"""
    if len(filters) != len(topics):
        raise ValueError(f"{len(filters)} filters for {len(topics)} topics")
    data, starts, sizes = _text_column(topics)
    out = np.zeros(len(topics), dtype=bool)
    groups: dict[str, list[int]] = {}
    for i, flt in enumerate(filters):
        groups.setdefault(flt, []).append(i)
    for flt, where in groups.items():
        rows = np.array(where, dtype=np.int64)
        out[rows] = topic_mask(data, starts[rows], sizes[rows], [flt], exact=exact)
    return _none_fails(out, topics)


def hits_by_filter(filters: Iterable[str], topics: Sequence[str | bytes | None]) -> dict[str, np.ndarray]:
    """Per distinct filter: the indexes (ascending) of the ``topics`` it matches; None never matches.

    A subscription table against the topics of a file's messages: thousands of filters, a million
    topics. The topics are sorted once into one column; each filter is matched by :func:`topic_mask`
    on the topics that start with its literal head only (a binary search), so a filter costs its
    candidates, not the whole column."""
    raw = [b"" if t is None else t if isinstance(t, bytes) else as_bytes(t) for t in topics]
    order = sorted(range(len(raw)), key=raw.__getitem__)
    keys = [raw[i] for i in order]
    data, starts, sizes = _text_column(keys)
    at = np.array(order, dtype=np.int64)
    valid = np.array([topics[i] is not None for i in order], dtype=bool)
    out = {}
    for flt in dict.fromkeys(filters):
        head = _literal_head(as_bytes(flt))
        lo = bisect.bisect_left(keys, head)
        end = _after_prefix(head)
        hi = len(keys) if end is None else bisect.bisect_left(keys, end, lo)
        hit = lo + np.flatnonzero(topic_mask(data, starts[lo:hi], sizes[lo:hi], [flt]) & valid[lo:hi])
        out[flt] = np.sort(at[hit])
    return out


def _literal_head(flt: bytes) -> bytes:
    """The bytes every topic a filter matches starts with: its levels before the first wildcard
    (``a/b/#`` → ``a/b``, which ``a/b`` itself matches)."""
    head: list[bytes] = []
    for level in flt.split(b"/"):
        if level in (b"+", b"#"):
            return b"/".join(head) + (b"/" if head and level == b"+" else b"")
        head.append(level)
    return flt


def _after_prefix(prefix: bytes) -> bytes | None:
    """The least byte string above every string starting with ``prefix`` (None: there is none)."""
    p = prefix.rstrip(b"\xff")
    return None if not p else p[:-1] + bytes([p[-1] + 1])


def _none_fails(out: np.ndarray, values: Sequence[object]) -> np.ndarray:
    for k, v in enumerate(values):
        if v is None:
            out[k] = False
    return out


def _segments(levels: list[bytes]) -> list[bytes | None]:
    """Filter levels with runs of literal levels joined (``a/b/+/#`` → ``[b"a/b", None, b"#"]``):
    a run is one byte comparison, its inner separators checked with it."""
    out: list[bytes | None] = []
    for level in levels:
        if level in (b"+", b"#"):
            out.append(None if level == b"+" else b"#")
        elif out and isinstance(out[-1], bytes) and out[-1] != b"#":
            out[-1] = out[-1] + b"/" + level
        else:
            out.append(level)
    return out


def _filter_hits(data: np.ndarray, s: np.ndarray, e: np.ndarray, levels: list[bytes]) -> np.ndarray:
    """Indexes of the topics ``data[s:e]`` that the filter ``levels`` matches."""
    segments = _segments(levels)
    alive = np.arange(len(s))
    cur = s.copy()
    for i, seg in enumerate(segments):
        if seg == b"#":
            return alive
        c, end = cur[alive], e[alive]
        if seg is None:  # "+": any one level
            lend = _next_slash(data, c, end)
        else:
            width = len(seg)
            sel = np.flatnonzero(c + width <= end)
            sel = sel[literal_at(data, c[sel], seg)]
            lend = c[sel] + width
            bound = lend == end[sel]  # the level ends the topic, or a separator follows it
            inner = np.flatnonzero(~bound)
            bound[inner] = data[lend[inner]] == SLASH
            sel = sel[bound]
            alive, lend, end = alive[sel], lend[bound], end[sel]
        at_end = lend == end
        if i == len(segments) - 1:
            return alive[at_end]
        if segments[i + 1] == b"#":  # "a/#" matches "a" itself as well as everything below it
            return alive
        more = ~at_end
        alive = alive[more]
        cur[alive] = lend[more] + 1
    return alive


def _next_slash(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Position of the first ``/`` at or after ``start`` before ``end`` (else ``end``)."""
    pos = start.copy()
    act = np.flatnonzero(pos < end)
    while len(act):
        act = act[data[pos[act]] != SLASH]
        pos[act] += 1
        act = act[pos[act] < end[act]]
    return pos


_FOLD_TABLE = bytes(range(256)).lower()  # ASCII letters only (bytes.lower is ASCII)


class _Batch:
    """What the ``contains`` tests of one batch share: its bytes as ``bytes``, ASCII-folded, and a
    running count of bytes outside printable ASCII (one of each per batch, whatever the tests)."""

    last: tuple[np.ndarray, _Batch] | None = None

    def __init__(self, data: np.ndarray) -> None:
        self.data = data
        self._raw: bytes | None = None
        self._folded: bytes | None = None
        self._odd: np.ndarray | None = None
        self._found: dict[tuple[bool, bytes], np.ndarray] = {}

    @classmethod
    def of(cls, data: np.ndarray) -> _Batch:
        last = cls.last
        if last is not None and last[0] is data:
            return last[1]
        batch = cls(data)
        cls.last = (data, batch)
        return batch

    def text(self, fold: bool) -> bytes:
        if self._raw is None:
            base = self.data.base
            self._raw = base if isinstance(base, bytes) and len(base) == len(self.data) else self.data.tobytes()
        if fold:
            if self._folded is None:
                self._folded = self._raw.translate(_FOLD_TABLE)
            return self._folded
        return self._raw

    def find(self, value: bytes, fold: bool) -> np.ndarray:
        """Positions of ``value`` in the batch (asked once per batch, whichever fields test for it)."""
        key = (fold, value)
        if key not in self._found:
            self._found[key] = find_all(self.text(fold), value)
        return self._found[key]

    def odd(self) -> np.ndarray:
        """Per byte: outside printable ASCII (with a False after the last, so spans may end there)."""
        if self._odd is None:
            self._odd = np.zeros(len(self.data) + 1, dtype=bool)
            np.logical_or(self.data < 0x20, self.data >= 0x7F, out=self._odd[:-1])
        return self._odd


def any_in_spans(mask: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per span ``[starts[i], ends[i])`` (ascending, not overlapping): does ``mask`` hold a True there?"""
    out = np.zeros(len(starts), dtype=bool)
    full = np.flatnonzero(ends > starts)
    if not len(full):
        return out
    order = full[np.argsort(starts[full], kind="stable")]
    bounds = np.empty(2 * len(order), dtype=np.int64)
    bounds[0::2], bounds[1::2] = starts[order], ends[order]
    out[order] = np.logical_or.reduceat(mask, bounds)[0::2]
    return out


def find_all(buf: bytes, value: bytes, few: int = 4096) -> np.ndarray:
    """Every position of ``value`` in ``buf``: the C search while it is rare, numpy once it is common."""
    out, pos = [], buf.find(value)
    while pos >= 0 and len(out) < few:
        out.append(pos)
        pos = buf.find(value, pos + 1)
    if pos < 0:
        return np.array(out, dtype=np.int64)
    d = np.frombuffer(buf, dtype=np.uint8)
    hits = np.flatnonzero(d[: len(d) - len(value) + 1] == value[0])
    return hits[literal_at(d, hits, value)] if len(value) > 1 else hits


def contains(value: bytes, *, fold: bool = False) -> Test:
    """A test on a text or byte field: does it hold ``value``? ``fold``: ASCII letters compared
    case-insensitively (``value`` given in lower case), and a field holding any byte outside
    printable ASCII passes too, so a caller confirming per record (Unicode case rules,
    replacement characters) never misses one."""

    def test(data: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        n = len(starts)
        out = np.zeros(n, dtype=bool)
        if not n:
            return out
        batch = _Batch.of(data)
        starts = np.asarray(starts, dtype=np.int64)
        ends = starts + np.asarray(sizes, dtype=np.int64)
        if fold:
            out |= any_in_spans(batch.odd(), starts, ends)
        m = len(value)
        if m == 0:
            out[:] = True
            return out
        hits = batch.find(value, fold)
        if not len(hits):
            return out
        order = np.argsort(starts, kind="stable")
        k = np.searchsorted(starts[order], hits, side="right") - 1
        inside = k >= 0
        rows = order[k[inside]]
        rows = rows[hits[inside] + m <= ends[rows]]
        out[rows] = True
        return out

    return test


def _text_column(values: Sequence[str | bytes | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, starts, sizes) of text values (edited records, topics in hand), for the byte matchers."""
    raw = [b"" if v is None else v if isinstance(v, bytes) else as_bytes(v) for v in values]
    sizes = np.array([len(r) for r in raw], dtype=np.int64)
    starts = np.zeros(len(raw), dtype=np.int64)
    if len(raw):
        starts[1:] = np.cumsum(sizes)[:-1]
    return np.frombuffer(b"".join(raw) or b"\0", dtype=np.uint8), starts, sizes


# ---------------------------------------------------------------- gathers over the index
Test = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""What to ask of a text field, on a batch: (data, starts, sizes) → one value per row."""


@dataclass
class TypeColumns:
    """Values of every chunk of one type, in file order: numbers, and per-row answers of tests
    on text fields (asked batch by batch while the batch's bytes are in cache)."""

    rows: np.ndarray
    ints: dict[str, np.ndarray]
    marks: dict[str, np.ndarray]
    bad: np.ndarray  # chunks of this type the per-record decoder refuses


class FileColumns:
    """A db file's index arrays, and gathers of chosen fields of every chunk of a type.

    Each gather reads the chunks' bytes in batches of a few MB (one ``pread``, then every
    field of every chunk in the batch through the layout table at once) so the byte
    comparisons of text tests hit the cache instead of walking the whole file per field.
    """

    batch_bytes = 4 << 20
    window = WINDOW

    def __init__(self, db: DbFile) -> None:
        assert db.version is not None
        self.db = db
        self.index = idx = db.index
        self.count = len(idx)
        self.offsets, self.types = idx.offsets_array(), idx.types_array()  # views: nothing copied
        self.hsize = header_size(db.version)
        self._buffer: bytearray | None = None  # the batches' bytes (one gather at a time: not shared by threads)

    def rows(self, chunk_type: int) -> np.ndarray:
        return np.flatnonzero(self.types == chunk_type)

    def type_counts(self) -> dict[int, int]:
        """Chunks per type, from the scan's tally (no pass over the types)."""
        return self.index.counts()

    def gather(self, chunk_type: int, names: Iterable[str] = (), tests: Mapping[str, Test] | None = None,
               rows: np.ndarray | None = None) -> TypeColumns:
        """Numbers ``names`` and the answers of ``tests`` (text field → test) for the chunks
        ``rows`` (default: every chunk of the type), checked as the per-record decoder checks
        them (``must`` values, property tails) when the layout has such checks."""
        db = self.db
        assert db.version is not None
        tests = dict(tests or {})
        rows = self.rows(chunk_type) if rows is None else np.asarray(rows, dtype=np.int64)
        options = LAYOUTS[(db.version, ChunkType(chunk_type))]
        layout = options[0]
        kinds = {name: f.kind for f in layout.fields for name in f.values}
        absent = [n for n in tests if n not in kinds]  # a field this version does not have: never passes
        tests = {n: t for n, t in tests.items() if n in kinds}
        numbers = set(names) | {f.name for f in layout.fields if f.must is not None}
        wanted = numbers | set(tests) | ({"properties"} if layout.has_tail else set())
        if len(options) > 1:  # ABI variants (v5/v6 cfg, v6 client): the decoder picks one per chunk
            return self._per_record(chunk_type, rows, numbers, tests, kinds, absent)
        ints: dict[str, list[np.ndarray]] = {n: [] for n in numbers}
        marks: dict[str, list[np.ndarray]] = {n: [] for n in tests}
        bad: list[int] = []
        i = 0
        while i < len(rows):  # places of a window of rows at a time: temporaries bounded by BATCH
            window = rows[i:i + BATCH]
            offs, ends = self.offsets[window], self.index.ends_of(window)
            lo = int(offs[0])
            j = min(max(int(np.searchsorted(ends, lo + self.batch_bytes, side="right")), 1), len(window))
            data = self._read(int(ends[j - 1]) - lo, lo)
            part = window[:j]
            got, spans = self._decode(chunk_type, data, lo, part, offs[:j], ends[:j], wanted, kinds, bad)
            for n in numbers:
                ints[n].append(got[n])
            for n, test in tests.items():
                marks[n].append(test(data, *spans[n]))
            if "properties" in spans:
                bad.extend(_bad_properties(data, part, *spans["properties"]))
            i += j
        marks.update({n: [np.zeros(len(rows), dtype=bool)] for n in absent})
        return TypeColumns(rows, {n: _join(v, kinds.get(n)) for n, v in ints.items()},
                           {n: _join(v, "mark") for n, v in marks.items()}, np.unique(np.array(bad, dtype=np.int64)))

    def _read(self, size: int, offset: int) -> np.ndarray:
        """``size`` bytes of the file from ``offset``, read into a buffer the next batch reuses: a fresh
        block per batch is fresh memory to fault in (with glibc's mmap threshold fixed, as the TUI
        sets it, every block is a new mapping), which took longer than the reads themselves."""
        if self._buffer is None or len(self._buffer) < size:
            self._buffer = bytearray(max(size, self.batch_bytes))
        got = os.preadv(self.db.fd, [memoryview(self._buffer)[:size]], offset)
        return np.frombuffer(self._buffer, dtype=np.uint8, count=got)

    def _decode(self, chunk_type: int, data: np.ndarray, base: int, part: np.ndarray, offs: np.ndarray,
                ends: np.ndarray, names: set[str], kinds: dict[str, str], bad: list[int]) -> tuple[dict, dict]:
        """One batch (chunks ``part`` at ``offs`` up to ``ends``) through the layout table; a batch that
        breaks a check is halved until the chunks that break it are found (they become ``bad``, their
        values zero)."""
        assert self.db.version is not None
        got = decode_batch(self.db.version, chunk_type, data, offs - base + self.hsize,
                           self.index.lengths_of(part).astype(np.int64), ends - base, self.db.endian, fields=names)
        if got is not None:
            return got
        if len(part) == 1:
            bad.append(int(part[0]))
            return ({n: np.zeros(1, np.uint64 if kinds.get(n) == "u64h" else np.int64) for n in names},
                    {n: (np.zeros(1, np.int64), np.zeros(1, np.int64)) for n in names})
        half = len(part) // 2
        a = self._decode(chunk_type, data, base, part[:half], offs[:half], ends[:half], names, kinds, bad)
        b = self._decode(chunk_type, data, base, part[half:], offs[half:], ends[half:], names, kinds, bad)
        return ({n: np.concatenate([a[0][n], b[0][n]]) for n in a[0] if n in b[0]},
                {n: (np.concatenate([a[1][n][0], b[1][n][0]]), np.concatenate([a[1][n][1], b[1][n][1]]))
                 for n in a[1] if n in b[1]})

    def _per_record(self, chunk_type: int, rows: np.ndarray, numbers: set[str], tests: Mapping[str, Test],
                    kinds: dict[str, str], absent: list[str]) -> TypeColumns:
        """Chunks decoded one by one (types with ABI variants: v5/v6 cfg and v6 client, few per file)."""
        recs: list[Record | None] = []
        bad = []
        for i in rows.tolist():
            try:
                recs.append(self.db.chunk(i).record)
            except CodecError:
                recs.append(None)
                bad.append(i)
        ints = {n: np.array([int((r.values.get(n) if r is not None else 0) or 0) for r in recs],
                            dtype=np.uint64 if kinds.get(n) == "u64h" else np.int64) for n in numbers}
        marks = {n: answers_for(test, [r.values.get(n) if r is not None else None for r in recs])
                 for n, test in tests.items()}
        marks.update({n: np.zeros(len(rows), dtype=bool) for n in absent})
        return TypeColumns(rows, ints, marks, np.array(bad, dtype=np.int64))

    def windows(self, chunk_type: int, names: Iterable[str] = (),
                tests: Mapping[str, Test] | None = None) -> Iterator[TypeColumns]:
        """:meth:`gather` of every chunk of the type, :attr:`window` chunks of the index at a time, in
        file order: what a whole-file question keeps is its answer, not every chunk's values."""
        size = self.window
        for k in range(0, self.count, size):
            rows = np.flatnonzero(self.types[k:k + size] == chunk_type)
            if len(rows):
                yield self.gather(chunk_type, names, tests, rows=rows + k)

    def undecodable(self) -> np.ndarray:
        """Every chunk the walk passed that the per-record decoder refuses, ascending."""
        assert self.db.version is not None
        bad = [_EMPTY_ROWS] + [cols.bad for t in checked_types(self.db.version) for cols in self.windows(t)]
        return np.unique(np.concatenate(bad))


def checked_types(version: int) -> list[int]:
    """Chunk types whose decoding checks more than the walk does (``must`` values, property tails)."""
    return [int(t) for (v, t), options in LAYOUTS.items()
            if v == version and (options[0].has_tail or any(f.must is not None for f in options[0].fields))]


def answers_for(test: Test, values: list[str | None]) -> np.ndarray:
    """A test's answers for a few text values (edited records, per-record decodes); None never passes."""
    return _none_fails(test(*_text_column(values)) if values else np.zeros(0, dtype=bool), values)


def _join(parts: list[np.ndarray], kind: str | None) -> np.ndarray:
    if parts:
        return np.concatenate(parts)
    return np.zeros(0, dtype=bool if kind == "mark" else np.uint64 if kind == "u64h" else np.int64)


def _bad_properties(data: np.ndarray, rows: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> list[int]:
    """Chunks whose property tail does not parse (tails are rare; each is parsed alone)."""
    out = []
    for k in np.flatnonzero(sizes > 0).tolist():
        s = int(starts[k])
        try:
            decode_properties(data[s:s + int(sizes[k])].tobytes())
        except CodecError:
            out.append(int(rows[k]))
    return out


# ---------------------------------------------------------------- the selection
@dataclass
class Picked:
    """The chunks a selection keeps, and where the per-record decoder would stop."""

    rows: np.ndarray  # selected chunk numbers, ascending (chunks in ``bad`` excluded)
    bad: np.ndarray  # chunks in the index the per-record decoder refuses, ascending
    count: int  # chunks in the index
    added: dict[int, list[int]] = field(default_factory=dict)  # inserted records kept: anchor -> their positions

    @property
    def stop(self) -> int:
        """The first chunk a file-order stream cannot decode (``count`` if none in the index)."""
        return int(self.bad[0]) if len(self.bad) else self.count

    def before_stop(self) -> np.ndarray:
        """The selected chunks a stream prints before it fails."""
        return self.rows[: int(np.searchsorted(self.rows, self.stop))]


def kind_mask(types: np.ndarray, kinds: set[str] | None) -> np.ndarray:
    """Which chunks are of ``kinds`` (None: all). One comparison per type, in place: ``np.isin`` builds
    index-sized integer temporaries (80 MB on 10 M chunks) for the same answer."""
    if kinds is None:
        return np.ones(len(types), dtype=bool)
    codes = [int(t) for t in ChunkType if t.label in kinds]
    keep = np.zeros(len(types), dtype=bool)
    for code in codes:
        keep |= types == code
    if "unknown" in kinds:
        known = np.zeros(len(types), dtype=bool)
        for code in KNOWN.tolist():
            known |= types == code
        keep |= ~known
    return keep


class _Inserted:
    """Records placed between file chunks (``anchor`` → the records right after it, in order), as
    columns beside the file's: their types, their order keys among the file's chunks, and per type
    the same numbers and test answers a gather gives (tests run by :func:`answers_for`)."""

    def __init__(self, inserted: Mapping[int, Sequence[Record]], count: int) -> None:
        items = [(a, j, r) for a in sorted(inserted) if 0 <= a < count for j, r in enumerate(inserted[a])]
        self.scale = 1 + max((len(inserted[a]) for a in inserted), default=0)  # file chunk r has key r * scale
        self.anchors = np.array([a for a, _j, _r in items], dtype=np.int64)
        self.places = [j for _a, j, _r in items]
        self.records = [r for _a, _j, r in items]
        self.types = np.array([r.type for r in self.records], dtype=np.uint32)
        self.keys = self.anchors * self.scale + 1 + np.array(self.places, dtype=np.int64)

    def columns(self, t: int, numbers: Iterable[str], tests: Mapping[str, Test]) -> tuple[np.ndarray, TypeColumns]:
        """(their indexes, their columns) for the inserted records of type ``t``."""
        at = np.flatnonzero(self.types == t)
        recs = [self.records[k] for k in at.tolist()]
        ints = {n: np.array([int(r.get(n) or 0) for r in recs], dtype=np.uint64) for n in numbers}
        marks = {n: answers_for(test, [r.get(n) for r in recs]) for n, test in tests.items()}
        return at, TypeColumns(self.keys[at], ints, marks, _EMPTY_ROWS)

    def kept(self, ok: np.ndarray) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for k in np.flatnonzero(ok).tolist():
            out.setdefault(int(self.anchors[k]), []).append(self.places[k])
        return out


def pick(db: DbFile, sel: Selection, *, replaced: Mapping[int, Record] | None = None,
         inserted: Mapping[int, Sequence[Record]] | None = None,
         bad: np.ndarray | None = None, source: FileColumns | None = None,
         step: Callable[[], None] | None = None) -> Picked:
    """The chunks ``sel`` keeps, decided on columns in file order. ``replaced``: records standing
    in for file chunks (unsaved edits), as if the file held them. ``inserted``: records placed
    right after file chunk ``anchor`` (in list order), as if the file held them there: they are
    decided too (:attr:`Picked.added`), and a store among them counts for the references after
    it. ``bad``: the decoder's refusals if known (:meth:`FileColumns.undecodable`), else found on
    the way. ``step``: called before each window of columns; what it raises stops the work there (a
    cancelled filter lets go of its columns at once, instead of holding them beside its successor's)."""
    if db.empty:
        return Picked(_EMPTY_ROWS, _EMPTY_ROWS, 0)
    src = source or FileColumns(db)
    types = src.types
    keep = kind_mask(types, sel.kinds)
    replaced = {i: r for i, r in (replaced or {}).items() if 0 <= i < src.count}
    extra = _Inserted(inserted or {}, src.count)
    x_keep = kind_mask(extra.types, sel.kinds)
    # what each chunk type must give: numbers, and answers of tests on its text fields
    numbers: dict[int, set[str]] = {} if bad is not None else {t: set() for t in checked_types(db.version or 6)}
    tests: dict[int, dict[str, Test]] = {}
    clients = sorted(as_bytes(c) for c in sel.clients)

    def client_test(data: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        ok = np.zeros(len(starts), dtype=bool)
        for value in clients:
            ok[bytes_equal(data, starts, sizes, value)] = True
        return ok

    def store_topic_test(data: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        return topic_mask(data, starts, sizes, sel.topics)

    def sub_topic_test(data: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        return topic_mask(data, starts, sizes, sel.topics, exact=True)

    counts = src.type_counts()
    present = {t: (counts.get(t, 0) > 0 or bool((extra.types == t).any()))
               and (sel.kinds is None or ChunkType(t).label in sel.kinds)
               for t in (MSG_STORE, CLIENT_MSG, RETAIN, SUB, CLIENT)}
    if sel.by_store:
        numbers.setdefault(MSG_STORE, set()).add("store_id")
        if sel.topics:
            tests.setdefault(MSG_STORE, {})["topic"] = store_topic_test
        for t in (CLIENT_MSG, RETAIN):
            if present[t] and not (sel.clients and t == RETAIN):
                numbers.setdefault(t, set()).add("store_id")
        if sel.topics and present[SUB]:
            tests.setdefault(SUB, {})["topic"] = sub_topic_test
    if sel.clients:
        for t in (CLIENT, CLIENT_MSG, SUB):
            if present[t]:
                tests.setdefault(t, {})["client_id"] = client_test
    found_bad = [_EMPTY_ROWS if bad is None else np.asarray(bad, dtype=np.int64)]

    def windows(t: int) -> Iterator[TypeColumns]:
        """The type's columns a window at a time (edits applied, refusals noted): a type's values are
        not all held at once, only what decides the answer (the matching stores' ids)."""
        for cols in src.windows(t, numbers.get(t, ()), tests.get(t)):
            if step is not None:
                step()
            _apply_edits(cols, replaced, tests.get(t, {}))
            found_bad.append(cols.bad)
            yield cols

    if not (sel.clients or sel.by_store):
        for t in set(numbers) | set(tests):
            for _cols in windows(t):
                pass
        bad = np.unique(np.concatenate(found_bad))
        keep[bad] = False
        return Picked(np.flatnonzero(keep).astype(np.int64, copy=False), bad, src.count, extra.kept(x_keep))

    crit = np.zeros(src.count, dtype=bool)
    crit[types == CFG] = sel.kinds is not None
    x_crit = np.zeros(len(extra.types), dtype=bool)
    x_crit[extra.types == CFG] = sel.kinds is not None
    scale = extra.scale  # order keys: file chunk r is r * scale, inserted records sit between

    def keys_of(rows: np.ndarray) -> np.ndarray:
        return rows if scale == 1 else rows.astype(np.int64) * scale

    def mine(t: int) -> tuple[np.ndarray, TypeColumns]:
        """The inserted records of type ``t``: their indexes and columns (order keys as rows)."""
        return extra.columns(t, numbers.get(t, ()), tests.get(t, {}))

    stores: list[TypeColumns] = []  # the msg_store windows, their store ids only
    closure = None
    if sel.by_store:  # the matching stores first: the other types are decided window by window on them
        matched = []
        for cols in windows(MSG_STORE):
            rows, ids = _matching_stores(sel, cols)
            matched.append((keys_of(rows), ids))
            if present[MSG_STORE]:  # kept to decide the stores themselves (a store may repeat an id)
                rows = cols.rows.astype(np.uint32) if src.count < 1 << 32 else cols.rows  # 4 bytes a row
                stores.append(TypeColumns(rows, {"store_id": cols.ints["store_id"]}, {}, _EMPTY_ROWS))
        if len(extra.types):
            matched.append(_matching_stores(sel, mine(MSG_STORE)[1]))
        closure = _closure(matched, (src.count + 1) * scale)

    def decide(t: int, cols: TypeColumns, keys: np.ndarray) -> np.ndarray:
        ok = np.ones(len(cols.rows), dtype=bool)
        if sel.clients:
            ok &= cols.marks["client_id"] if t in (CLIENT, CLIENT_MSG, SUB) else False
        if sel.by_store and ok.any():
            if t in (MSG_STORE, CLIENT_MSG, RETAIN):
                assert closure is not None
                ok &= closure.references(keys, cols.ints["store_id"])
            elif t == SUB:
                ok &= cols.marks["topic"] if sel.topics else False
            else:
                ok &= bool(sel.clients)
        return ok

    for t in (MSG_STORE, CLIENT_MSG, RETAIN, SUB, CLIENT):
        if present[t]:
            if t == MSG_STORE and sel.by_store:
                parts: Iterable[TypeColumns] = stores
            elif t in numbers or t in tests:
                parts = windows(t)
            else:
                parts = [TypeColumns(src.rows(t), {}, {}, _EMPTY_ROWS)]
            for cols in parts:
                crit[cols.rows] = decide(t, cols, keys_of(cols.rows))
            if len(extra.types):
                at, theirs = mine(t)
                x_crit[at] = decide(t, theirs, theirs.rows)
    del stores
    for t in set(numbers) | set(tests):  # types asked only for the decoder's refusals
        if not (present.get(t) or (t == MSG_STORE and sel.by_store)):
            for _cols in windows(t):
                pass
    bad = np.unique(np.concatenate(found_bad))
    keep &= crit
    keep[bad] = False
    return Picked(np.flatnonzero(keep).astype(np.int64, copy=False), bad, src.count, extra.kept(x_keep & x_crit))


def select_chunks(db: DbFile, sel: Selection, *, replaced: Mapping[int, Record] | None = None) -> np.ndarray:
    """The sorted chunk numbers ``sel`` keeps (chunks the decoder refuses left out)."""
    return pick(db, sel, replaced=replaced).rows


def _apply_edits(cols: TypeColumns, replaced: Mapping[int, Record], tests: Mapping[str, Test]) -> None:
    """Edited chunks among ``cols.rows``: their numbers and test answers as the edited records give them."""
    if not replaced or not len(cols.rows):
        return
    ids = np.array(sorted(replaced), dtype=np.int64)
    at = np.minimum(np.searchsorted(cols.rows, ids), len(cols.rows) - 1)
    hit = cols.rows[at] == ids
    if not hit.any():
        return
    where, recs = at[hit], [replaced[int(i)] for i in ids[hit]]
    for name, values in cols.ints.items():
        values[where] = [int(r.get(name) or 0) for r in recs]
    for name, test in tests.items():
        cols.marks[name][where] = answers_for(test, [r.get(name) for r in recs])


@dataclass
class _Closure:
    """The matching stores: each store id with the first chunk that made it match, packed as one
    sorted uint64 a store id, ``id << bits | chunk`` (``bits`` enough for any chunk number), or,
    when some id is too wide for that, as sorted ids (``keys``) with their chunks beside (``first``)."""

    keys: np.ndarray
    bits: int
    first: np.ndarray | None = None

    def references(self, rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Which chunks (at ``rows``, referencing ``ids``) come at or after a matching store of their id."""
        if not len(self.keys):
            return np.zeros(len(rows), dtype=bool)
        if self.first is not None:
            k = np.minimum(np.searchsorted(self.keys, ids), len(self.keys) - 1)
            return (self.keys[k] == ids) & (self.first[k] <= rows)
        bits = np.uint64(self.bits)
        k = np.minimum(np.searchsorted(self.keys, ids << bits), len(self.keys) - 1)
        found = self.keys[k]
        ok = (found >> bits) == ids  # the whole id: one too wide to pack (shifted past 64 bits) never equals
        ok &= (found & np.uint64((1 << self.bits) - 1)) <= rows
        return ok


def _matching_stores(sel: Selection, stores: TypeColumns) -> tuple[np.ndarray, np.ndarray]:
    """(rows, store ids) of the stores among ``stores`` that the selection's own criteria match."""
    ids = stores.ints["store_id"]
    ok = np.ones(len(ids), dtype=bool)
    if sel.store_ids is not None:
        lo, hi = sel.store_ids
        ok &= (ids >= np.uint64(lo)) & (ids <= np.uint64(hi))
    if sel.topics:
        ok &= stores.marks["topic"]
    ok[np.isin(stores.rows, stores.bad)] = False
    return stores.rows[ok], ids[ok]


def _closure(matched: list[tuple[np.ndarray, np.ndarray]], count: int) -> _Closure:
    """The closure of the matching stores (windows in file order, emptied on the way): every store
    matching, 8 bytes a store id instead of the 16 of an id and a chunk number."""
    bits = max(count.bit_length(), 1)
    if any(len(ids) and int(ids.max()) >> (64 - bits) for _rows, ids in matched):
        rows = np.concatenate([_EMPTY_ROWS, *(r for r, _ids in matched)])
        ids = np.concatenate([np.zeros(0, np.uint64), *(i for _rows, i in matched)])
        matched.clear()
        if len(rows) > 1 and not (rows[1:] >= rows[:-1]).all():  # inserted stores come after the file's
            order = np.argsort(rows, kind="stable")
            rows, ids = rows[order], ids[order]
        uniq, first = np.unique(ids, return_index=True)  # rows ascend: the first index is the earliest store
        return _Closure(uniq, bits, rows[first])
    keys = np.zeros(sum(len(r) for r, _ids in matched), dtype=np.uint64)
    k = 0
    while matched:
        rows, ids = matched.pop()
        keys[k:k + len(rows)] = (ids << np.uint64(bits)) | rows.astype(np.uint64)
        k += len(rows)
    keys.sort()  # in place; a store id's first chunk comes first
    if len(keys) > 1:
        ids = keys >> np.uint64(bits)
        first = np.ones(len(keys), dtype=bool)
        np.not_equal(ids[1:], ids[:-1], out=first[1:])
        del ids
        keys = keys[first]
    return _Closure(keys, bits)


def expiry_sources(db: DbFile, rows: np.ndarray) -> np.ndarray:
    """The msg_store chunks whose expiry the client_msg chunks among ``rows`` inherit (stores that
    expire, before them, with their store ids): what a reader must see besides ``rows`` to annotate
    them as a file-order pass would. The index scan already knows which stores expire (v5/v6)."""
    idx = db.index
    ids, values = idx.times.get("expiry_time", ((), ()))
    if not len(ids) or not len(rows):
        return _EMPTY_ROWS
    src = FileColumns(db)
    queued = rows[src.types[rows] == CLIENT_MSG]
    if not len(queued):
        return _EMPTY_ROWS
    cand = np.frombuffer(ids, dtype=np.int64)
    cand = cand[(np.frombuffer(values, dtype=np.int64) > 0) & (cand < queued[-1])]
    cand = cand[src.types[cand] == MSG_STORE]
    if not len(cand):
        return _EMPTY_ROWS
    wanted = src.gather(CLIENT_MSG, {"store_id"}, rows=queued).ints["store_id"]
    return cand[np.isin(src.gather(MSG_STORE, {"store_id"}, rows=cand).ints["store_id"], wanted)]


def failure(db: DbFile, stop: int) -> CodecError | None:
    """The error a file-order stream raises at chunk ``stop`` (the first it cannot decode, or
    the end of a damaged index), exactly as the stream words it; None if it raises none."""
    idx = db.index
    start = idx.offsets[stop] if stop < len(idx) else idx.end
    try:
        for _ in db.stream(start=start, first_index=stop):
            break
    except CodecError as exc:
        return exc
    return idx.error


__all__ = ["FileColumns", "contains", "expiry_sources", "Picked", "TypeColumns", "bytes_equal", "failure",
           "hits_by_filter", "kind_mask", "pairs_matching", "pick", "select_chunks", "topic_mask", "topics_matching"]
