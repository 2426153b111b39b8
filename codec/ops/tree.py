"""What fills a file, by topic level: a tree of the stored messages' topics, opened a level at a time.

Each node is a topic level (``fleet``, ``fleet/site000``, …) with, for the messages stored under it
(its own topic and deeper): stored messages, retained messages (RETAIN chunks referencing them),
queued references (CLIENT_MSG chunks referencing them), their chunk bytes and payload bytes. The
numbers are ``stats --by topic``'s, counted the same way (a store's bytes are its chunk's, header
included; a reference counts for the first store of its id), so a node at depth N is the sum of
``stats --depth N``'s rows ``TOPIC`` and ``TOPIC/#``.

Built on the column engine: a .db file's topics are read where they are, in the read-only map of the
file (a 2.1 store's are gathered into one byte buffer; no string per message), the references counted
per store with numpy. The first two levels are cut while the stores are read; a deeper node's children
are computed when asked (:meth:`TopicTree.children`): its members' next level is cut through two words
or a window matrix a row, grouped by a hash checked byte for byte, so opening a node costs one pass over
the messages under it, however many levels the file has.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.columnar import GATHER, batches
from codec.layouts import ChunkType
from codec.sources import column_reader, is_store
from codec.textscan import position_weights
from codec.values import column

WINDOW = 48
"""Bytes of a level cut with numpy; a longer level is cut in Python (rare: topic levels are short)."""

ROWS = GATHER
"""Stores gathered, and members cut, at once. A batch's arrays stay under 256 KiB, the TUI's mmap threshold
(inspector.tui.model.memory): they come from the heap and are reused, where 2^16-row batches had every temporary
mapped and faulted in afresh (on 1.2 M stores: 360,000 page faults, a second of system time)."""

SORTS = ("size", "name")

_SLASHES = np.uint64(0x2F2F2F2F2F2F2F2F)
_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_MASKS = np.array([(1 << (8 * c)) - 1 for c in range(9)], dtype=np.uint64)  # the low c bytes of a word


def _first_slash(w: np.ndarray) -> np.ndarray:
    """Per little-endian word: the place (0-7) of its first "/" byte, 8 if none. The zero-byte trick marks
    the first "/" exactly by the lowest high bit it sets; the bits below that one, counted, give its place."""
    x = w ^ _SLASHES
    z = (x - _ONES) & ~x & _HIGHS
    return np.bitwise_count((z & (~z + np.uint64(1))) - np.uint64(1)) >> np.uint8(3)  # (no "/": 64 bits, 8)


@dataclass
class Totals:
    """What a set of stored messages holds."""

    stores: int = 0
    retained: int = 0
    queued: int = 0
    bytes: int = 0
    payload_bytes: int = 0

    def to_json(self) -> dict[str, int]:
        return {"stores": self.stores, "retained": self.retained, "queued": self.queued, "bytes": self.bytes,
                "payload_bytes": self.payload_bytes}


@dataclass(eq=False)
class Node:
    """One topic level: its totals (itself and below), its own topic's, and its children once opened."""

    name: str  # the level ("" for the root)
    topic: str  # the levels from the root, joined by "/" ("" for the root)
    depth: int  # 0: the root
    total: Totals
    own: Totals  # messages whose topic is exactly this node's
    members: np.ndarray = field(repr=False)  # positions among the tree's stores
    has_children: bool = True
    children: list[Node] | None = None  # None until opened

    @property
    def filter(self) -> str:
        """The MQTT filter of this subtree: ``topic/#`` (which matches ``topic`` itself too)."""
        return f"{self.topic}/#" if self.depth else "#"


class _Cutter:
    """Cuts a level out of chosen stores' topics (``buf``, ``starts``, ``sizes``; see :class:`TopicTree`)."""

    buf: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray

    def __init__(self, buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> None:
        self.buf, self.starts, self.sizes = buf, starts, sizes

    def _cut(self, rows: np.ndarray, skip: int, names: dict[bytes, int]) -> tuple[np.ndarray, np.ndarray]:
        """Each row's level starting ``skip`` bytes into its topic: (its number in ``names``, whether the
        topic goes on after it). Levels of up to 16 bytes are cut from two words a row (:meth:`_words`),
        longer ones through a WINDOW-byte matrix (:meth:`_group`), the rare rest in Python; grouped by a
        hash checked byte for byte."""
        k = len(rows)
        start = self.starts[rows].astype(np.int64) + skip
        left = self.sizes[rows].astype(np.int64) - skip  # bytes from the level's start to the topic's end
        codes = np.empty(k, np.int64)
        deeper = np.zeros(k, bool)
        todo = self._words(np.arange(k), start, left, names, codes, deeper)
        width = int(min(int(left[todo].max()), WINDOW)) if len(todo) else 0
        if width:
            _done, todo = self._group(todo, start, left, width, names, codes, deeper)
        buf = self.buf
        for r in todo.tolist():
            a = int(start[r])
            level = buf[a:a + int(left[r])].tobytes()
            cut_at = level.find(b"/")
            deeper[r] = cut_at >= 0
            codes[r] = names.setdefault(level if cut_at < 0 else level[:cut_at], len(names))
        return codes, deeper

    def _words(self, todo: np.ndarray, start: np.ndarray, left: np.ndarray, names: dict[bytes, int],
               codes: np.ndarray, deeper: np.ndarray) -> np.ndarray:
        """Group the rows whose level ends within 16 bytes, reading two 8-byte words a row (the first
        "/" found in a word with the zero-byte trick); the rest are returned."""
        buf = self.buf
        words = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))
        near = start[todo] + 16 > len(buf)  # (only in a map: a store's buf ends in WINDOW zero bytes)
        if near.any():
            todo, rest = todo[~near], todo[near]
            return np.concatenate([self._words(todo, start, left, names, codes, deeper), rest])
        at = start[todo]
        lt = left[todo]
        w0, w1 = words[at], words[at + 8]
        f0 = _first_slash(w0)
        first = np.where(f0 < 8, f0, _first_slash(w1) + np.uint8(8)).astype(np.int64)
        found = (first < 16) & (first < lt)
        cut = np.minimum(first, lt)
        fits = found | (lt <= 16)
        sel = np.flatnonzero(fits)
        rest = todo[~fits]
        if not len(sel):
            return rest
        rows, cut, w0, w1 = todo[sel], cut[sel], w0[sel], w1[sel]
        deeper[rows] = found[sel]
        m0 = w0 & _MASKS[np.minimum(cut, 8)]
        m1 = w1 & _MASKS[np.clip(cut - 8, 0, 8)]
        h = m0 * np.uint64(0x9E3779B97F4A7C15) + m1 * np.uint64(0xC2B2AE3D27D4EB4F) + cut.astype(np.uint64)
        if h[0] == h.min() == h.max():  # one level in the whole batch (a file's first levels often)
            one, inv = np.zeros(1, np.int64), np.zeros(len(h), np.int64)
            same = (m0 == m0[0]) & (m1 == m1[0]) & (cut == cut[0])
        else:
            _u, one, inv = np.unique(h, return_index=True, return_inverse=True)
            inv = inv.ravel()
            rep = one[inv]
            same = (m0 == m0[rep]) & (m1 == m1[rep]) & (cut == cut[rep])
        group = np.empty(len(one), np.int64)
        for u, f in enumerate(one.tolist()):
            a = int(start[rows[f]])
            group[u] = names.setdefault(buf[a:a + int(cut[f])].tobytes(), len(names))
        codes[rows] = group[inv]
        for r in rows[~same].tolist():  # a hash shared by different levels
            a = int(start[r])
            level = buf[a:a + int(left[r])].tobytes()
            cut_at = level.find(b"/")
            codes[r] = names.setdefault(level if cut_at < 0 else level[:cut_at], len(names))
        return rest

    def _group(self, todo: np.ndarray, start: np.ndarray, left: np.ndarray, width: int, names: dict[bytes, int],
               codes: np.ndarray, deeper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Group the rows ``todo`` whose level ends inside a ``width``-byte window; (those done, the rest)."""
        near = start[todo] + width > len(self.buf)  # the last bytes of a map: cut in Python
        if near.any():
            done, rest = self._group(todo[~near], start, left, width, names, codes, deeper)
            return done, np.concatenate([rest, todo[near]])
        view = np.ndarray((len(self.buf) - width + 1,), dtype=np.dtype((np.void, width)), buffer=self.buf,
                          strides=(1,))
        win = view[start[todo]].view(np.uint8).reshape(len(todo), width)
        lt = left[todo]
        slash = (win == 0x2F) & (np.arange(width)[None, :] < lt[:, None])
        found = slash.any(axis=1)
        cut = np.where(found, np.argmax(slash, axis=1), lt)
        fits = found | (lt <= width)
        sel = np.flatnonzero(fits)
        rest = todo[~fits]
        if not len(sel):
            return sel, rest
        win, cut, rows = win[sel], cut[sel], todo[sel]
        deeper[rows] = found[sel]
        widest = int(cut.max())
        if widest <= 7:  # exact: the level's bytes and its length in one word
            word = np.zeros((len(sel), 8), np.uint8)
            word[:, :widest] = win[:, :widest]
            word[np.arange(8)[None, :] >= cut[:, None]] = 0
            word[:, 7] = cut
            key = word.view("<u8").ravel()
            _u, first, inv = np.unique(key, return_index=True, return_inverse=True)
            inv = inv.ravel()
            for u, f in enumerate(first.tolist()):
                first[u] = names.setdefault(win[f, :cut[f]].tobytes(), len(names))
            codes[rows] = first[inv]
            return rows, rest
        w = position_weights(widest)
        h = cut.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        for j in range(widest):
            v = (win[:, j].astype(np.uint64) + np.uint64(1)) * w[j]
            v[cut <= j] = 0
            h += v
        _u, first, inv = np.unique(h, return_index=True, return_inverse=True)
        inv = inv.ravel()
        rep = first[inv]
        mine = np.arange(widest)[None, :] < cut[:, None]
        same = (cut == cut[rep]) & np.all((win[:, :widest] == win[rep, :widest]) | ~mine, axis=1)
        group = np.empty(len(first), np.int64)
        for u, f in enumerate(first.tolist()):
            group[u] = names.setdefault(win[f, :cut[f]].tobytes(), len(names))
        codes[rows] = group[inv]
        odd = rows[~same]  # a hash shared by different levels: cut those in Python
        for r in odd.tolist():
            a = int(start[r])
            level = self.buf[a:a + int(left[r])].tobytes()
            cut_at = level.find(b"/")
            codes[r] = names.setdefault(level if cut_at < 0 else level[:cut_at], len(names))
        return rows, rest


@dataclass
class TopicTree(_Cutter):
    """The stored messages of one file (a .db or a 2.1 sqlite store) as a lazily opened topic tree."""

    path: str
    size: int
    store: bool
    buf: np.ndarray = field(repr=False)  # where the topics are: the map of a .db file, or a store's topics back to back
    starts: np.ndarray = field(repr=False)  # per store: where its topic starts in buf
    sizes: np.ndarray = field(repr=False)
    chunk_bytes: np.ndarray = field(repr=False)  # per store: its chunk's (row's) bytes
    payload: np.ndarray = field(repr=False)
    retained: np.ndarray = field(repr=False)  # per store: RETAIN chunks referencing it
    queued: np.ndarray = field(repr=False)  # per store: CLIENT_MSG chunks referencing it
    root: Node = field(init=False)
    release: Callable[[], None] | None = field(default=None, repr=False)  # hands back the map's pages read
    # the second level, cut while the stores were read: per store its number in second_names (-1: its topic
    # has one level) and whether its topic goes on past it; opening a first-level node reads no topic
    second: np.ndarray | None = field(default=None, repr=False)
    second_deeper: np.ndarray | None = field(default=None, repr=False)
    second_names: list[bytes] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        everyone = np.arange(len(self.sizes), dtype=np.int32 if len(self.sizes) < 1 << 31 else np.int64)
        self.root = Node("", "", 0, self._totals(everyone), Totals(), everyone, bool(len(everyone)))

    def share(self, node: Node) -> float:
        """The node's chunk bytes as a share of the file (0..1)."""
        return node.total.bytes / self.size if self.size else 0.0

    def _totals(self, rows: np.ndarray) -> Totals:
        return Totals(*self._sums(np.zeros(len(rows), np.int32), rows, 1)[0])

    def find(self, topic: str) -> Node | None:
        """The node of ``topic`` (levels joined by "/"; "" the root), opening the levels on the way."""
        node = self.root
        if topic == "":
            return node
        for level in topic.split("/"):
            node = next((c for c in self.children(node) if c.name == level), None)  # type: ignore[assignment]
            if node is None:
                return None
        return node

    def children(self, node: Node, sort: str = "size") -> list[Node]:
        """The node's children (computed on the first call), biggest first or by name."""
        if node.children is None:
            node.children = self._open(node)
        if sort == "name":
            return sorted(node.children, key=lambda c: c.name)
        return sorted(node.children, key=lambda c: (-c.total.bytes, -c.total.stores, c.name))

    # ------------------------------------------------------------ opening a node
    def _open(self, node: Node) -> list[Node]:
        m = node.members
        if node.depth == 1 and self.second is not None and self.second_names is not None:
            codes = self.second[m]
            rows = m[codes >= 0]  # the node's own topic stays with it
            if not len(rows):
                return []
            codes = codes[codes >= 0]
            used = np.zeros(len(self.second_names), bool)
            used[codes] = True
            which = np.flatnonzero(used)
            local = np.zeros(len(used), np.int32)
            local[which] = np.arange(len(which), dtype=np.int32)
            return self._children(node, rows, local[codes], self.second_deeper[rows],  # type: ignore[index]
                                  [self.second_names[k] for k in which.tolist()])
        skip = len(node.topic.encode("utf-8", "surrogateescape")) + 1 if node.depth else 0
        rows = m[self.sizes[m] >= skip] if node.depth else m  # the node's own topic stays with it
        names: dict[bytes, int] = {}
        codes = np.empty(len(rows), np.int64 if len(rows) >= 1 << 31 else np.int32)
        deeper = np.zeros(len(rows), bool)  # the row's topic goes on past the child's level
        for s in batches(len(rows), ROWS):
            codes[s], deeper[s] = self._cut(rows[s], skip, names)
            if self.release is not None:
                self.release()  # the file's pages just read: RSS stays flat however big the node
        return self._children(node, rows, codes, deeper, list(names))

    def _children(self, node: Node, rows: np.ndarray, codes: np.ndarray, deeper: np.ndarray,
                  names: list[bytes]) -> list[Node]:
        """The nodes under ``node``: ``rows`` (stores) grouped by ``codes`` (numbers in ``names``), ``deeper``
        telling the rows whose topic goes on past that level."""
        n = len(names)
        if not n:
            return []
        sorted_rows = rows if n == 1 else rows[np.argsort(codes, kind="stable")]  # (one child: the same rows)
        bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=n))]).tolist()
        more = (np.bincount(codes[deeper], minlength=n) > 0).tolist()
        total = self._sums(codes, rows, n)
        own = self._sums(codes[~deeper], rows[~deeper], n)
        out = []
        for k, name in enumerate(names):
            text = name.decode("utf-8", "surrogateescape")
            out.append(Node(text, f"{node.topic}/{text}" if node.depth else text, node.depth + 1,
                            Totals(*total[k]), Totals(*own[k]), sorted_rows[bounds[k]:bounds[k + 1]], more[k]))
        return out

    def _sums(self, codes: np.ndarray, rows: np.ndarray, n: int) -> list[list[int]]:
        """Per code: [stores, retained, queued, bytes, payload bytes] of its rows."""
        if n == 1:  # one child (the first level of most files): plain sums, of the columns themselves for all
            every = len(rows) == len(self.sizes)  # (a node's rows are distinct stores)
            return [[len(rows)] + [int((v if every else v[rows]).sum(dtype=np.int64))
                                   for v in (self.retained, self.queued, self.chunk_bytes, self.payload)]]
        cols = [np.bincount(codes, minlength=n)]
        for per_store in (self.retained, self.queued, self.chunk_bytes, self.payload):
            v = per_store[rows]
            if not len(v) or int(v.max()) * len(v) < 1 << 53:  # float64 sums stay exact
                cols.append(np.bincount(codes, weights=v, minlength=n).astype(np.int64))
            else:
                acc = np.zeros(n, np.int64)
                np.add.at(acc, codes, v)
                cols.append(acc)
        return np.stack(cols, axis=1).tolist()

    # ------------------------------------------------------------ reports
    def to_json(self, depth: int, sort: str = "size", node: Node | None = None) -> dict[str, Any]:
        node = node or self.root
        out: dict[str, Any] = {"topic": node.topic, "level": node.name, "depth": node.depth,
                               **node.total.to_json(), "share": round(self.share(node), 6),
                               "own": node.own.to_json()}
        if node.has_children and depth > 0:
            out["children"] = [self.to_json(depth - 1, sort, c) for c in self.children(node, sort)]
        elif node.has_children:
            out["children_not_shown"] = True
        return out


def _topics(g: Any) -> tuple[np.ndarray, np.ndarray]:
    """A batch's topics back to back and their offsets (as ``Columns.blob``), copied through a window
    matrix: one short copy a row instead of a gather a byte."""
    starts, sizes = g.spans["topic"]
    data = g.data
    width = int(sizes.max()) if len(sizes) else 0
    if not width or width > 4 * WINDOW or int(starts.max()) + width > len(data):
        return g.blob("topic")
    view = np.ndarray((len(data) - width + 1,), dtype=np.dtype((np.void, width)), buffer=data, strides=(1,))
    win = view[starts].view(np.uint8).reshape(len(starts), width)
    offs = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offs[1:])
    return win[np.arange(width)[None, :] < sizes[:, None]], offs


def build(db: Any, *, progress: Callable[[int, int], None] | None = None) -> TopicTree:
    """The topic tree of ``db`` (a DbFile or a 2.1 sqlite store): every store's topic, chunk bytes, payload
    bytes, and how many RETAIN and CLIENT_MSG chunks reference it — the first level is opened on demand.

    A .db file's topics are read where they are, in the read-only map of the file (the tree keeps their
    offsets, and hands the pages it read back after each batch); a store's are copied into one buffer."""
    size = db.size
    empty = np.zeros(0, np.int64)
    if db.empty:
        return TopicTree(db.path, size, False, np.zeros(WINDOW, np.uint8), empty, empty, empty, empty, empty, empty)
    cols: Any = column_reader(db)
    store = is_store(db)
    types = db.types if store else cols.types
    s_idx = _where(types, ChunkType.MSG_STORE)
    n = len(s_idx)
    if store:
        chunk_bytes = db.row_sizes()[s_idx]
    else:
        # as stats counts a chunk: from its offset to the next one's (not its header + stored length: v2-v4
        # chunks differ), for the stores only; none is longer than the file
        chunk_bytes = np.zeros(n, _narrow(size))
        for s in batches(n, ROWS):
            chunk_bytes[s] = db.index.ends_of(s_idx[s]) - cols.offsets[s_idx[s]]
    room = int(chunk_bytes.sum(dtype=np.int64)) + WINDOW
    chunk_bytes = chunk_bytes.astype(_narrow(int(chunk_bytes.max()) if n else 0), copy=False)
    mapped = None if store else cols.mm  # a .db file: its topics stay in the map
    ids = np.zeros(n, np.uint64)
    plen = np.zeros(n, np.uint32)  # (a payload length is a 4-byte field in every format)
    starts = np.zeros(n, _narrow(len(mapped) if mapped is not None else room))
    tlen = np.zeros(n, np.uint16 if mapped is not None else np.uint32)  # (2 bytes in every .db version)
    if mapped is None:
        # room for every topic at once: no store's topic is longer than its row. Only the pages written are
        # ever resident (a zeroed block this size is mapped lazily), so the unused room costs address space
        # only, where growing the buffer or joining a list of batches would hold the topics twice at the peak
        buf = np.zeros(room, np.uint8)
    at = 0
    levels = _Levels(mapped, starts, tlen, n) if mapped is not None else None
    for s in batches(n, ROWS):
        g = cols.gather(s_idx[s], int(ChunkType.MSG_STORE), ("store_id", "topic", "payload"))
        ids[s] = g.ints["store_id"]
        plen[s] = g.spans["payload"][1]
        if mapped is not None:
            starts[s], tlen[s] = g.spans["topic"]
        else:
            blob, offs = _topics(g)
            buf[at:at + len(blob)] = blob
            starts[s] = offs[:-1] + at
            tlen[s] = np.diff(offs)
            at += len(blob)
        if levels is not None:
            levels.batch(s)
        cols.release()
        if progress is not None:
            progress(s.stop, n)
    del s_idx
    if mapped is None:
        buf = buf[:at + WINDOW]  # (a view: the room never written stays unmapped) ending in WINDOW zero bytes
    if mapped is None:
        tlen = tlen.astype(_narrow(int(tlen.max()) if n else 0, 16))
    first = _first_stores(ids)
    del ids

    def referencing(t: ChunkType) -> np.ndarray:
        """Per store: the chunks of type ``t`` referencing it (the first store of an id, as stats counts)."""
        where = _where(types, t)
        hits = np.zeros(len(where), where.dtype)  # per reference: its store's position (those found)
        k = 0
        for s in batches(len(where), ROWS):
            refs = cols.gather(where[s], int(t), ("store_id",)).ints["store_id"]
            cols.release()
            if n:
                got = first(refs)
                hits[k:k + len(got)] = got
                k += len(got)
        del where
        return np.bincount(hits[:k], minlength=n)  # (one count at the end: np.add.at per batch took 0.1 s)

    retained = referencing(ChunkType.RETAIN)
    retained = retained.astype(_narrow(int(retained.max()) if n else 0, 16))
    queued = referencing(ChunkType.CLIENT_MSG)
    queued = queued.astype(_narrow(int(queued.max()) if n else 0, 16))
    tree = TopicTree(db.path, size, store, buf if mapped is None else mapped, starts, tlen, chunk_bytes, plen,
                     retained, queued, release=None if mapped is None else cols.release)
    if levels is not None:
        levels.fill(tree)
    return tree


class _Levels:
    """The first two levels of every store's topic, cut batch by batch as the stores are read (their pages
    are mapped then): the first level is then grouped without reading a topic again, and so is the second
    under any first-level node, unless the second level has too many names to be worth holding."""

    MOST = 1 << 16
    """Distinct first-level names, and second-level ones, past which the second level is left to be cut
    when a node opens (a name per store would cost more than it saves)."""

    def __init__(self, buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, n: int) -> None:
        self.cutter = _Cutter(buf, starts, sizes)
        self.first = np.zeros(n, np.int32 if n < 1 << 31 else np.int64)
        self.first_deeper = np.zeros(n, bool)
        self.names: dict[bytes, int] = {}
        self.lengths = np.zeros(0, np.int64)  # per first-level name: its bytes
        self.second: np.ndarray | None = np.full(n, -1, self.first.dtype)
        self.second_deeper: np.ndarray | None = np.zeros(n, bool)
        self.second_names: dict[bytes, int] = {}

    def batch(self, s: slice) -> None:
        """Cut the stores of ``s`` (their topics just read)."""
        rows = np.arange(s.start, s.stop, dtype=self.first.dtype)
        self.first[s], self.first_deeper[s] = self.cutter._cut(rows, 0, self.names)
        if self.second is None or self.second_deeper is None:
            return
        if len(self.names) > self.MOST or len(self.second_names) > self.MOST:
            self.second = self.second_deeper = None
            return
        new = len(self.names) - len(self.lengths)
        if new:
            added = [len(k) for k in itertools.islice(reversed(self.names), new)][::-1]
            self.lengths = np.concatenate([self.lengths, np.array(added, np.int64)])
        deep = np.flatnonzero(self.first_deeper[s])
        if len(deep):
            skip = self.lengths[self.first[s][deep]] + 1
            codes, deeper = self.cutter._cut(rows[deep], skip, self.second_names)
            self.second[s.start + deep] = codes
            self.second_deeper[s.start + deep] = deeper

    def fill(self, tree: TopicTree) -> None:
        """Give ``tree`` its first level (and the second level's numbers, if kept)."""
        root = tree.root
        root.children = tree._children(root, root.members, self.first, self.first_deeper, list(self.names))
        if self.second is not None and len(self.second_names) <= self.MOST:
            tree.second, tree.second_deeper, tree.second_names = (self.second, self.second_deeper,
                                                                  list(self.second_names))


def _where(types: np.ndarray, t: ChunkType) -> np.ndarray:
    """The chunk numbers of type ``t``, in 4 bytes each where they fit (found a window at a time: no 8-byte
    number per chunk of the file on the way)."""
    dtype = np.int32 if len(types) < 1 << 31 else np.int64
    parts = [np.flatnonzero(types[w] == int(t)).astype(dtype) + dtype(w.start) for w in batches(len(types), 1 << 20)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _first_stores(ids: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A function giving, for referenced store ids, the position of the first store of each id (ids no
    store has are left out). Ids within a few times the stores' number of each other (a broker numbers
    them from 1) are looked up in a table, one read a reference; others through a sort."""
    n = len(ids)
    pos_type = np.int32 if n < 1 << 31 else np.int64
    if not n:
        return lambda refs: np.zeros(0, pos_type)
    lo, hi = int(ids.min()), int(ids.max())
    if hi - lo < 4 * n + (1 << 16):
        table = np.full(hi - lo + 1, n, pos_type)  # n: no store has the id
        table[ids - np.uint64(lo)] = np.arange(n, dtype=pos_type)
        if int(np.count_nonzero(table != n)) == n:  # every id once (else which position won is not defined)

            def lookup(refs: np.ndarray) -> np.ndarray:
                inside = refs[(refs >= np.uint64(lo)) & (refs <= np.uint64(hi))]
                got = table[inside - np.uint64(lo)]
                return got[got != n]

            return lookup
        del table
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    order = order.astype(pos_type)

    def search(refs: np.ndarray) -> np.ndarray:
        w = np.searchsorted(sorted_ids, refs)
        wc = np.minimum(w, n - 1)
        return order[wc[(w < n) & (sorted_ids[wc] == refs)]]

    return search


def _narrow(largest: int, bits: int = 32) -> type:
    """The smallest of uint16 (from ``bits`` 16), uint32 and int64 that holds ``largest``: a store's columns
    of a big file in 2 or 4 bytes, not 8."""
    if bits <= 16 and largest < 1 << 16:
        return np.uint16
    return np.uint32 if largest < 1 << 32 else np.int64


def retained_under(db: Any, tree: TopicTree, node: Node) -> tuple[np.ndarray, int, int]:
    """What ``rm-retained 'NODE/#'`` removes from ``db`` (the file the tree was built from): the chunk
    numbers of the RETAIN chunks whose stored message lies under ``node`` and of those stored messages
    no other reference keeps (sorted), the number of retained messages and of stores among them."""
    from codec.ops.surgery import store_ids_of

    cols: Any = column_reader(db)
    s_idx, s_ids = store_ids_of(cols, ChunkType.MSG_STORE)  # in the order the tree numbers its stores
    m_idx, m_ids = s_idx[node.members], s_ids[node.members]
    if not len(m_ids):
        return np.zeros(0, np.int64), 0, 0
    ret_idx, ret_ids = store_ids_of(cols, ChunkType.RETAIN)
    ret_hit = np.isin(ret_ids, m_ids)
    _cm_idx, cm_ids = store_ids_of(cols, ChunkType.CLIENT_MSG)
    kept = np.concatenate([cm_ids, ret_ids[~ret_hit]])
    orphans = m_idx[np.isin(m_ids, ret_ids[ret_hit]) & ~np.isin(m_ids, kept)]
    items = np.sort(np.concatenate([ret_idx[ret_hit], orphans]).astype(np.int64))
    return items, int(ret_hit.sum()), len(orphans)


def lines(tree: TopicTree, depth: int, sort: str = "size", node: Node | None = None, limit: int = 30) -> list[str]:
    """The tree as text, ``depth`` levels under ``node`` (default the root), at most ``limit`` children a node."""
    node = node or tree.root
    out = [f"{'topic':<44}{'share':>7}{'bytes':>15}{'stored':>11}{'retained':>10}{'queued':>9}{'payload':>15}"]

    def row(n: Node, indent: int) -> None:
        label = ("  " * indent + (n.name if n.depth else (n.topic or "(all topics)")) +
                 ("/" if n.has_children and n.depth else ""))
        t = n.total
        out.append(f"{column(label, 44)}{100 * tree.share(n):>6.1f}%{t.bytes:>15,}{t.stores:>11,}{t.retained:>10,}"
                   f"{t.queued:>9,}{t.payload_bytes:>15,}")

    def walk(n: Node, indent: int, left: int) -> None:
        row(n, indent)
        if left <= 0 or not n.has_children:
            return
        kids = tree.children(n, sort)
        for c in kids[:limit]:
            walk(c, indent + 1, left - 1)
        if len(kids) > limit:
            rest = kids[limit:]
            out.append(f"{'  ' * (indent + 1)}… {len(rest):,} more levels "
                       f"({sum(c.total.bytes for c in rest):,} bytes, {sum(c.total.stores for c in rest):,} stored)")

    walk(node, 0, depth)
    return out


__all__ = ["SORTS", "Node", "TopicTree", "Totals", "build", "lines", "retained_under"]
