"""What fills a db: bytes and counts per chunk type, per client, per topic level; biggest payloads.

Computed from the chunk index and columns gathered with numpy (:class:`codec.columnar.ColumnReader`),
so a file of millions of chunks is summarised without a Python object per chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.columnar import ColumnReader, batches
from codec.layouts import ChunkType
from codec.reader import DbFile
from codec.sources import column_reader
from codec.textscan import TextColumn, position_weights
from codec.values import column

BY = ("type", "client", "topic")


@dataclass
class Stats:
    file: str
    version: int | None
    size: int
    by_type: dict[str, dict[str, int]] = field(default_factory=dict)
    by_client: list[dict[str, Any]] = field(default_factory=list)
    by_topic: list[dict[str, Any]] = field(default_factory=list)
    biggest: list[dict[str, Any]] = field(default_factory=list)
    depth: int = 2
    store: bool = False  # a Mosquitto 2.1 sqlite store: bytes are its values', "offset" is a rowid

    def to_json(self) -> dict[str, Any]:
        out = {"file": self.file, "version": self.version, "size": self.size, "by_type": self.by_type,
               "by_client": self.by_client, "by_topic": self.by_topic, "topic_depth": self.depth,
               "biggest_payloads": self.biggest}
        if self.store:
            out["format"] = "sqlite"
            for b in self.biggest:
                b["rowid"] = b.pop("offset")
        return out


def _prefix(topic: str, depth: int) -> str:
    parts = topic.split("/")
    return "/".join(parts[:depth]) + ("/#" if len(parts) > depth else "")


def compute(db: DbFile, *, top: int = 10, depth: int = 2, progress: Callable[[int, int], None] | None = None) -> Stats:
    """Sizes include each chunk's header; payload bytes are the stored payloads alone.

    ``progress(done, size)`` is called after each of the five passes (``done``: that share of the size).
    """
    st = Stats(db.path, db.version, db.size, depth=depth)
    if db.empty:
        return st

    def step(k: int) -> None:
        if progress is not None:
            progress(db.size * k // 5, db.size)

    cols: Any = column_reader(db)
    if getattr(db, "is_store", False):  # a sqlite store: rows for chunks, their values' bytes for sizes
        st.version, st.store = None, True
        # the stores' sizes are read in _stores' scan of them (filled in there), the other rows' here
        offsets, types, sizes = cols.offsets, db.types, cols.row_sizes_except(int(ChunkType.MSG_STORE))
        stores = _stores(cols, types, sizes, top, depth)
        st.by_type = _by_type(types, sizes)
        step(1)
    else:
        offsets, types, ends = db.index.intact_arrays(db.path)
        sizes = ends - offsets
        st.by_type = _by_type(types, sizes)
        step(1)
        stores = _stores(cols, types, sizes, top, depth)
    step(2)
    st.by_topic = _by_topic(cols, types, stores, top)
    step(3)
    st.by_client = _by_client(db, cols, types, sizes, stores, top)
    step(4)
    st.biggest = _biggest(cols, offsets, stores)
    step(5)
    return st


def by_type(db: DbFile) -> dict[str, dict[str, int]]:
    """Chunks and bytes per type (``stats``' first table) from the index alone, without the other passes."""
    if db.empty:
        return {}
    if getattr(db, "is_store", False):
        return compute(db, top=1, depth=1).by_type
    offsets, types, ends = db.index.intact_arrays(db.path)
    return _by_type(types, ends - offsets)


def _by_type(types: np.ndarray, sizes: np.ndarray) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    small = np.minimum(types, 7)  # known types 1-6; 0 and >= 7 are looked at one by one
    counts = np.bincount(small, minlength=8).tolist()
    total = _sums(small.astype(np.int64), sizes, 8).tolist()
    odd = np.unique(types[(small == 0) | (small == 7)]).tolist() if counts[0] or counts[7] else []
    for t in sorted(set(range(1, 7)) | set(odd)):
        if 1 <= t <= 6:
            if not counts[t]:
                continue
            out[ChunkType(t).label] = {"count": counts[t], "bytes": total[t]}
        else:
            m = types == t
            out[f"unknown({t})"] = {"count": int(m.sum()), "bytes": int(sizes[m].sum())}
    return out


@dataclass
class _Stores:
    """Every store's id, payload length and topic prefix, by position among the stores."""

    idx: np.ndarray  # chunk numbers
    ids: np.ndarray
    plen: np.ndarray
    topic_code: np.ndarray  # per store: its prefix's number in ``prefixes``
    prefixes: dict[str, int]  # prefix -> number
    acc: np.ndarray  # per prefix number: [stores, bytes, payload bytes, retained]
    biggest: list[tuple[int, int]]  # (payload len, position) of the ``top`` largest, biggest first
    order: np.ndarray = field(init=False)
    sorted_ids: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.order = np.argsort(self.ids, kind="stable")
        self.sorted_ids = self.ids[self.order]

    def position(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position of each referenced store, whether it is in the file)."""
        sorted_ids, order = self.sorted_ids, self.order
        w = np.searchsorted(sorted_ids, ids)
        wc = np.minimum(w, max(len(sorted_ids) - 1, 0))
        if not len(sorted_ids):  # references but no stores at all: nothing to point at
            return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
        ok = (w < len(sorted_ids)) & (sorted_ids[wc] == ids)
        return order[wc], ok


def _prefix_codes(tx: TextColumn, depth: int, prefixes: dict[str, int]) -> np.ndarray:
    """Each topic's prefix number (:func:`_prefix` on bytes: "/" is one byte in UTF-8 and nothing else
    contains it). Topics in the scan window are cut with numpy and grouped by a hash of their prefix,
    each group checked byte for byte against its first member; Python cuts the others."""
    n = len(tx.sizes)
    codes = np.empty(n, np.int64)
    # every row is cut by numpy (short) or by Python (slow); with no window (every topic empty) all go to Python
    slow = np.arange(n) if depth < 1 or not tx.width else tx.long
    short = tx.short if depth >= 1 and tx.width else np.zeros(0, np.int64)
    if len(short):
        win, valid, width = tx.win, tx.valid, tx.width
        levels = np.cumsum((win == 0x2F) & valid, axis=1, dtype=np.int32)
        more = levels[:, -1] >= depth
        cut = np.where(more, np.argmax(levels >= depth, axis=1), tx.sizes[short])
        del levels
        width = int(cut.max()) if len(cut) else 0  # only the prefixes matter from here on
        win = win[:, :width]
        w = position_weights(width)
        h = cut.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ more.astype(np.uint64)
        total = np.zeros(len(short), np.uint64)
        for k in range(width):
            v = (win[:, k].astype(np.uint64) + np.uint64(1)) * w[k]
            v[cut <= k] = 0
            total += v
        h ^= total
        _uniq, first, inv = np.unique(h, return_index=True, return_inverse=True)
        inv = inv.ravel()
        rep = first[inv]
        inside = np.arange(width)[None, :] < cut[:, None]
        same = (cut == cut[rep]) & (more == more[rep]) & np.all((win == win[rep]) | ~inside, axis=1)
        group = np.empty(len(first), np.int64)
        for u, f in enumerate(first.tolist()):
            key = win[f, :cut[f]].tobytes().decode("utf-8", "surrogateescape") + ("/#" if more[f] else "")
            group[u] = prefixes.setdefault(key, len(prefixes))
        codes[short] = group[inv]
        slow = np.concatenate([slow, short[~same]])
    for r in slow.tolist():
        key = _prefix(tx.value(r).decode("utf-8", "surrogateescape"), depth)
        codes[r] = prefixes.setdefault(key, len(prefixes))
    return codes


def _sums(codes: np.ndarray, values: np.ndarray | None, n: int) -> np.ndarray:
    """Per code: how many rows (``values`` None) or the sum of their values, as int64."""
    if values is None:
        return np.bincount(codes, minlength=n)
    if not len(values) or int(values.max()) * len(values) < 1 << 53:  # float64 sums stay exact
        return np.bincount(codes, weights=values, minlength=n).astype(np.int64)
    out = np.zeros(n, np.int64)
    np.add.at(out, codes, values)
    return out


def _stores(cols: ColumnReader, types: np.ndarray, sizes: np.ndarray, top: int, depth: int) -> _Stores:
    """Stores: id, topic, payload length, chunk size; bytes per topic prefix; the biggest payloads.

    A store's reader (``gather_measured``) reads the payloads' lengths alone and each row's size with them,
    into ``sizes``."""
    measured = getattr(cols, "gather_measured", None)
    s_idx = np.flatnonzero(types == int(ChunkType.MSG_STORE))
    s_ids = np.zeros(len(s_idx), np.uint64)
    s_plen = np.zeros(len(s_idx), np.int64)
    s_code = np.zeros(len(s_idx), np.int64)
    prefixes: dict[str, int] = {}
    acc = np.zeros((0, 4), np.int64)
    for s in batches(len(s_idx)):
        if measured is not None:
            g, sizes[s_idx[s]] = measured(s_idx[s], int(ChunkType.MSG_STORE), ("store_id", "topic", "payload"),
                                          ("payload",))
        else:
            g = cols.gather(s_idx[s], int(ChunkType.MSG_STORE), ("store_id", "topic", "payload"))
        plens = g.spans["payload"][1]
        s_ids[s] = g.ints["store_id"]
        s_plen[s] = plens
        codes = _prefix_codes(TextColumn(g, "topic"), depth, prefixes)
        s_code[s] = codes
        if len(prefixes) > len(acc):
            acc = np.concatenate([acc, np.zeros((len(prefixes) - len(acc), 4), np.int64)])
        acc[:, 0] += _sums(codes, None, len(acc))
        acc[:, 1] += _sums(codes, sizes[s_idx[s]], len(acc))
        acc[:, 2] += _sums(codes, plens, len(acc))
        cols.release()
    return _Stores(s_idx, s_ids, s_plen, s_code, prefixes, acc, _largest(s_plen, top))


def _largest(plen: np.ndarray, top: int) -> list[tuple[int, int]]:
    """(payload length, position) of the ``top`` largest payloads, biggest first; ties go to the later store."""
    k = min(top, len(plen))
    if k <= 0:
        return []
    key = (plen.astype(np.uint64) << np.uint64(32)) | np.arange(len(plen), dtype=np.uint64)
    chosen = np.argpartition(key, len(key) - k)[len(key) - k:]
    chosen = chosen[np.argsort(key[chosen])[::-1]]
    return list(zip(plen[chosen].tolist(), chosen.tolist(), strict=True))


def _by_topic(cols: ColumnReader, types: np.ndarray, stores: _Stores, top: int) -> list[dict[str, Any]]:
    """Per topic prefix: stores, bytes, payload bytes, and the retained messages among them."""
    r_idx = np.flatnonzero(types == int(ChunkType.RETAIN))
    for s in batches(len(r_idx)):
        ids = cols.gather(r_idx[s], int(ChunkType.RETAIN), ("store_id",)).ints["store_id"]
        pos, ok = stores.position(ids)
        stores.acc[:, 3] += _sums(stores.topic_code[pos[ok]], None, len(stores.acc))
    acc = stores.acc.tolist()
    return sorted(({"topic": k, "stores": acc[v][0], "bytes": acc[v][1], "payload_bytes": acc[v][2],
                    "retained": acc[v][3]} for k, v in stores.prefixes.items()),
                  key=lambda d: (-d["bytes"], d["topic"]))[:top]


def _by_client(db: DbFile, cols: ColumnReader, types: np.ndarray, sizes: np.ndarray, stores: _Stores,
               top: int) -> list[dict[str, Any]]:
    """Clients: sessions, subscriptions, queued messages and the payload bytes they hold."""
    ids: dict[bytes, int] = {}  # client id -> number
    acc = np.zeros((0, 5), np.int64)  # per number: session, subscriptions, queued, queued payload bytes, bytes
    for t, col in ((ChunkType.CLIENT, 0), (ChunkType.SUB, 1), (ChunkType.CLIENT_MSG, 2)):
        idx = np.flatnonzero(types == int(t))
        for s in batches(len(idx)):
            if t == ChunkType.CLIENT and not getattr(db, "is_store", False):
                # decoded one by one: the v6 CLIENT layout depends on the writer's ABI (a store's rows do not)
                g = None
                codes = np.array([ids.setdefault(db.chunk(i).record["client_id"].encode("utf-8", "surrogateescape"),
                                                 len(ids)) for i in idx[s].tolist()], np.int64)
            else:
                names = ("client_id", "store_id") if t == ChunkType.CLIENT_MSG else ("client_id",)
                g = cols.gather(idx[s], int(t), names)
                codes = TextColumn(g, "client_id").codes(ids)
            if len(ids) > len(acc):
                acc = np.concatenate([acc, np.zeros((len(ids) - len(acc), 5), np.int64)])
            if col == 0:
                acc[codes, 0] = 1
            else:
                acc[:, col] += _sums(codes, None, len(acc))
            acc[:, 4] += _sums(codes, sizes[idx[s]], len(acc))
            if g is not None and t == ChunkType.CLIENT_MSG:
                pos, ok = stores.position(g.ints["store_id"])
                acc[:, 3] += _sums(codes, np.where(ok, stores.plen[pos] if len(stores.plen) else 0, 0), len(acc))
            cols.release()
    values = acc.tolist()
    clients = [{"client_id": cid.decode("utf-8", "surrogateescape"), "session": bool(values[n][0]),
                "subscriptions": values[n][1], "queued": values[n][2], "queued_payload_bytes": values[n][3],
                "bytes": values[n][4]} for cid, n in ids.items()]
    return sorted(clients, key=lambda d: (-d["bytes"] - d["queued_payload_bytes"], d["client_id"]))[:top]


def _biggest(cols: ColumnReader, offsets: np.ndarray, stores: _Stores) -> list[dict[str, Any]]:
    """The largest payloads, biggest first, with their store id, topic and offset (their topics gathered in file
    order, a batch at a time: ``--top`` may ask for every store)."""
    at = np.array([p for _plen, p in stores.biggest], np.int64)
    in_file = np.argsort(at, kind="stable")
    topics: list[str] = [""] * len(at)
    for s in batches(len(at)):
        rows = in_file[s]
        g = cols.gather(stores.idx[at[rows]], int(ChunkType.MSG_STORE), ("topic",))
        for j, row in enumerate(rows.tolist()):
            topics[row] = g.text("topic", j)
        cols.release()
    return [{"store_id": int(stores.ids[p]), "topic": topics[j], "payload_bytes": plen,
             "offset": int(offsets[stores.idx[p]])} for j, (plen, p) in enumerate(stores.biggest)]


def lines(st: Stats, by: str) -> list[str]:
    version = f"db version {st.version}" if st.version else "empty file (no saved state)"
    if st.store:
        version = "Mosquitto 2.1 sqlite store (bytes: the rows' values)"
    out = [f"{st.file}: {version}, {st.size:,} bytes"]
    if by == "type":
        out.append(f"{'type':<14}{'count':>12}{'bytes':>16}{'share':>8}")
        for k, v in sorted(st.by_type.items(), key=lambda kv: -kv[1]["bytes"]):
            share = 100 * v["bytes"] / st.size if st.size else 0
            out.append(f"{k:<14}{v['count']:>12,}{v['bytes']:>16,}{share:>7.1f}%")
    elif by == "client":
        out.append(f"{'client':<32}{'session':>8}{'subs':>7}{'queued':>9}{'chunk bytes':>14}{'payload bytes':>15}")
        for c in st.by_client:
            out.append(f"{column(c['client_id'], 32)}{'yes' if c['session'] else 'no':>8}{c['subscriptions']:>7,}"
                       f"{c['queued']:>9,}{c['bytes']:>14,}{c['queued_payload_bytes']:>15,}")
    else:
        out.append(f"{'topic (depth ' + str(st.depth) + ')':<40}{'stores':>10}{'retained':>10}{'bytes':>14}{'payload':>14}")
        for t in st.by_topic:
            out.append(f"{column(t['topic'], 40)}{t['stores']:>10,}{t['retained']:>10,}{t['bytes']:>14,}{t['payload_bytes']:>14,}")
    if st.biggest:
        out.append("biggest payloads:")
        for b in st.biggest:
            where = f"base_msgs rowid {b['offset']}" if st.store else f"offset {b['offset']}"
            out.append(f"  {b['payload_bytes']:>12,} bytes  store {b['store_id']}  {b['topic']}  ({where})")
    return out


__all__ = ["BY", "Stats", "by_type", "compute", "lines"]
