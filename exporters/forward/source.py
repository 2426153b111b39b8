"""Forward messages of a db file (docs/forward-packet.md B.2) and stream files.

:class:`MessageSource` turns a db's stored messages (store mode) or queued deliveries
(delivery mode) into message maps with the doc's id and timestamp rules;
:func:`write_stream` writes batches as a stream file (handshake, then forward packets).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from codec import ChunkType, CodecError, DbFile
from codec.values import U64_MAX, is_utf8
from codec.views.query import Selection
from exporters.forward.content import FLAGS, Batch, Report, make_id, message_map, no_report
from exporters.forward.frames import HANDSHAKE, forward_prefix

# Mosquitto 2.1 clock-based store ids (doc B.2 rule 1)
MOSQ_EPOCH = 1_637_168_273
# A 2.0 store id is a counter; below 86400 << 23 it decodes to within a day of the epoch
# base, so "plausible" starts one day after it (the doc's "2021-11-17" taken strictly).
PLAUSIBLE_FROM_S = MOSQ_EPOCH + 86_400
DAY_MS = 86_400_000
ROWS_PER_BATCH = 4096  # record-at-a-time reading: rows per selection batch

def clock_time_ms(store_id: int) -> int:
    """Publish time a Mosquitto 2.1 (clock-based) store id encodes, in ms."""
    sec = ((store_id >> 23) & 0x7FFFFFFF) + MOSQ_EPOCH
    return sec * 1000 + ((store_id & 0x7FFFFF) << 7) // 1_000_000


def file_time_ms(path: str) -> int:
    return os.stat(path).st_mtime_ns // 1_000_000


@dataclass
class Options:
    """What to export and how to derive ids and timestamps (doc B.2)."""

    mode: str = "store"  # or "delivery"
    incoming: bool = False  # delivery mode: also direction=in entries
    topics: list[str] = field(default_factory=list)
    clients: set[str] = field(default_factory=set)
    retained_only: bool = False
    store_ids: tuple[int, int] | None = None
    reference_ms: int | None = None  # export reference time; default: the file's mtime
    salt: int = 0


@dataclass
class Stats:
    messages: int = 0
    skipped: int = 0


Row = tuple[int, int, int, int, int, "str | None", str, bytes, bool]
# chunk index, offset, store_id, qos, retain, source_id, topic, payload, strings need a UTF-8 check


class MessageSource:
    """Message maps of one db file in file order, with the doc's id and timestamp rules.

    Stored messages are read column-wise by :mod:`exporters.arrow` (several times faster
    than a record at a time; ``columnar=False`` reads records through the codec); a string
    it had to repair (U+FFFD) is read again through the codec, so invalid UTF-8 is still
    found and reported.
    """

    def __init__(self, db: DbFile, opts: Options, report: Report = no_report, *, columnar: bool = True) -> None:
        self.db = db
        self.opts = opts
        self.report = report
        self.stats = Stats()
        self.columnar = columnar
        self.position = 0  # file offset reached (progress)
        mtime = file_time_ms(db.path)
        self.reference_ms = opts.reference_ms if opts.reference_ms is not None else mtime
        self.clock_until_ms = mtime + DAY_MS  # a decoded 2.1 time after this is not plausible

    def timestamp(self, store_id: int) -> int:
        if (store_id >> 23) & 0x7FFFFFFF >= PLAUSIBLE_FROM_S - MOSQ_EPOCH:
            t = clock_time_ms(store_id)
            if t <= self.clock_until_ms:
                return t
        return self.reference_ms

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.db.empty:
            return iter(())
        return self._deliveries() if self.opts.mode == "delivery" else self._stores()

    def _at(self, kind: str, index: int, offset: int) -> str:
        """Where a chunk is, as the user can find it: ``msg_store[3] at offset 120``; a 2.1 store's record is read
        through a temporary .db whose chunk numbers and offsets are nowhere in the store: its kind alone."""
        if self.db.source_path != self.db.path:
            return {"msg_store": "a stored message", "client_msg": "a queued message"}[kind]
        return f"{kind}[{index}] at offset {offset}"

    def _skip(self, why: str) -> None:
        self.stats.skipped += 1
        self.report(f"{self.db.source_path}: skipped {why}")

    def _ids_of(self, chunk_type: ChunkType, keep: Callable[[Any], bool]) -> set[int]:
        return {c.record["store_id"] for c in self.db.stream(types=[chunk_type]) if keep(c.record)}

    def _wanted_directions(self) -> set[int]:
        return {0, 1} if self.opts.incoming else {1}

    # ------------------------------------------------------------ stored messages
    def _store_batches(self) -> Iterator[list[Row]]:
        """The stored messages' rows in file order, a batch at a time (selections decide per batch)."""
        if self.columnar:
            yield from self._store_batches_columnar()
            return
        rows: list[Row] = []
        try:
            for c in self.db.stream(types=[ChunkType.MSG_STORE]):
                v = c.record.values
                self.position = c.offset
                rows.append((c.index, c.offset, v["store_id"], v["qos"], v["retain"], v.get("source_id"), v["topic"],
                             v["payload"], True))
                if len(rows) >= ROWS_PER_BATCH:
                    yield rows
                    rows = []
        except CodecError:
            if rows:
                yield rows  # what came before the damage goes out first, as a record at a time would
            raise
        if rows:
            yield rows

    def _store_batches_columnar(self) -> Iterator[list[Row]]:
        # imported here, not at the top: the CLI imports this module to build its parser, and
        # pyarrow (~0.3 s) is only wanted once messages are read
        from exporters.arrow import iter_batches
        from exporters.schema import unsigned_ids

        for b in iter_batches(self.db, "msg_store"):
            ids = unsigned_ids(b.column("store_id")).tolist()
            cols = [b.column(n).to_pylist() for n in ("chunk_index", "chunk_offset", "qos", "retain", "source_id",
                                                      "topic", "payload")]
            self.position = cols[1][-1] if cols[1] else self.position
            rows: list[Row] = []
            for index, offset, sid, qos, retain, frm, topic, payload in zip(cols[0], cols[1], ids, *cols[2:]):
                if "\ufffd" in topic or (frm and "\ufffd" in frm):  # maybe repaired: take the codec's strings
                    v = self.db.chunk(index).record.values
                    rows.append((index, offset, sid, qos, retain, v.get("source_id"), v["topic"], v["payload"], True))
                else:
                    rows.append((index, offset, sid, qos, retain, frm, topic, payload, False))
            yield rows

    def _chooser(self) -> Callable[[list[Row]], list[Row]] | None:
        """The topic / store-id part of the selection, decided a batch of rows at a time by the column
        engine (codec.views.select), or None for all."""
        sel = Selection(kinds={"msg_store"}, topics=list(self.opts.topics), store_ids=self.opts.store_ids)
        if not sel.by_store:
            return None
        import numpy as np

        from codec.views.select import topics_matching

        lo, hi = sel.store_ids if sel.store_ids is not None else (0, U64_MAX)
        topics = sel.topics

        def choose(rows: list[Row]) -> list[Row]:
            ids = np.fromiter((r[2] for r in rows), dtype=np.uint64, count=len(rows))
            ok = (ids >= np.uint64(lo)) & (ids <= np.uint64(hi))
            if topics:
                ok &= topics_matching(topics, [r[6] for r in rows])
            return [rows[k] for k in np.flatnonzero(ok).tolist()]

        return choose

    def _chosen(self, choose: Callable[[list[Row]], list[Row]] | None) -> Iterator[Row]:
        for rows in self._store_batches():
            yield from (rows if choose is None else choose(rows))

    def _bad_text(self, index: int, offset: int, sid: int, frm: str | None, topic: str) -> bool:
        for name, text in (("topic", topic), ("source id", frm or "")):
            if not is_utf8(text):
                self._skip(f"{self._at('msg_store', index, offset)} (store {sid}): {name} is not valid UTF-8")
                return True
        return False

    def _stores(self) -> Iterator[dict[str, Any]]:
        opts = self.opts
        only: set[int] | None = None
        if opts.retained_only:
            only = self._ids_of(ChunkType.RETAIN, lambda r: True)
        if opts.clients:
            dirs = self._wanted_directions()
            queued = self._ids_of(ChunkType.CLIENT_MSG,
                                  lambda r: r["client_id"] in opts.clients and r.get("direction", 1) in dirs)
            only = queued if only is None else only & queued
        choose = self._chooser()
        salt = opts.salt
        stats = self.stats
        timestamp = self.timestamp
        for index, offset, sid, qos, retain, frm, topic, payload, check in self._chosen(choose):
            if only is not None and sid not in only:
                continue
            if not 0 <= qos <= 2:
                self._skip(f"{self._at('msg_store', index, offset)} (store {sid}): qos {qos} is not 0-2")
                continue
            if check and self._bad_text(index, offset, sid, frm, topic):
                continue
            ts = timestamp(sid)
            stats.messages += 1
            yield {"id": make_id(ts, sid, salt), "qos": qos, "flags": FLAGS[False, retain != 0], "from": frm or "",
                   "topic": topic, "payload": payload, "timestamp": ts}

    # ------------------------------------------------------------ queued deliveries
    def _deliveries(self) -> Iterator[dict[str, Any]]:
        opts = self.opts
        dirs = self._wanted_directions()
        retained = self._ids_of(ChunkType.RETAIN, lambda r: True) if opts.retained_only else None
        queue: list[tuple[int, int, int, int, int, int]] = []  # store_id, qos, dup, retain, index, offset
        for c in self.db.stream(types=[ChunkType.CLIENT_MSG]):
            v = c.record.values
            if v.get("direction", 1) not in dirs or (opts.clients and v["client_id"] not in opts.clients):
                continue
            if retained is not None and v["store_id"] not in retained:
                continue
            queue.append((v["store_id"], v["qos"], v.get("dup", 0), v.get("retain", 0), c.index, c.offset))
        needed = {q[0] for q in queue}
        choose = self._chooser()
        stores: dict[int, tuple[str, str, bytes, int]] = {}
        unusable: set[int] = set()
        for index, offset, sid, _qos, _retain, frm, topic, payload, check in self._chosen(choose):
            if sid not in needed:
                continue
            if check and self._bad_text(index, offset, sid, frm, topic):
                unusable.add(sid)
            else:
                stores[sid] = (frm or "", topic, payload, self.timestamp(sid))
        for sid, qos, dup, retain, index, offset in queue:
            f = stores.get(sid)
            if f is None:
                if sid in unusable:
                    self.stats.skipped += 1  # its store was reported once
                elif choose is None:
                    self._skip(f"{self._at('client_msg', index, offset)}: store {sid} is not in the file")
                continue
            if not 0 <= qos <= 2:
                self._skip(f"{self._at('client_msg', index, offset)} (store {sid}): qos {qos} is not 0-2")
                continue
            frm, topic, payload, ts = f
            self.stats.messages += 1
            yield message_map(make_id(ts, sid, opts.salt), qos, dup != 0, retain != 0, frm, topic, payload, ts)


# ---------------------------------------------------------------- stream files


@dataclass
class WriteSummary:
    packets: int = 0
    messages: int = 0
    bytes: int = 0


def write_stream(out: Any, contents: Iterable[Batch], *, ack: bool = False,
                 progress: Callable[[int], None] | None = None) -> WriteSummary:
    """A stream file: the handshake, then one forward packet per batch (no ACK flag)."""
    s = WriteSummary()
    out.write(HANDSHAKE)
    s.bytes += len(HANDSHAKE)
    write = out.write
    for b in contents:
        prefix = forward_prefix(len(b.content), ack)
        write(prefix)
        write(b.content)
        s.packets += 1
        s.messages += b.count
        s.bytes += len(prefix) + len(b.content)
        if progress is not None:
            progress(b.count)
    return s
