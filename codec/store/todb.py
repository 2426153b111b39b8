"""A persist-sqlite store written as a v6 mosquitto.db: the way back from Mosquitto 2.1.

The rows come from :class:`codec.store.read.StoreFile` (the one mapping of rows to v6 values) and
go out in the order Mosquitto 2.0 writes a file: cfg, stored messages, each session followed by its
queue, subscriptions, retains. What the broker would drop on load (queue entries and retains whose
``base_msgs`` row is missing) is left out and reported; wills have no place in a .db.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import numpy as np

from codec.engine import Record
from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.migration import MigrationReport
from codec.store.read import StoreFile
from codec.writer import write_records

V6 = 6


def store_records(store: StoreFile, rep: MigrationReport | None = None, *,
                  rows: list[int] | None = None) -> Iterator[Record]:
    """v6 records for a store, in the order Mosquitto 2.0 writes them. ``rows``: gets, per record yielded,
    the store's row number it comes from (-1 for the cfg chunk), so a chunk of the image names its row."""
    def came(row: int) -> None:
        if rows is not None:
            rows.append(row)

    ids = np.concatenate([c.ints["store_id"] for c in store.batches(ChunkType.MSG_STORE, names=("store_id",))]
                         or [np.zeros(0, np.uint64)])
    stored = np.unique(ids)
    came(-1)
    yield Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8,
                                      "last_db_id": int(stored[-1]) if len(stored) else 0}, V6)
    for row in store.rows(ChunkType.MSG_STORE):
        came(row.index)
        yield row.record
        if rep is not None:
            rep.count("messages")

    def known(store_id: int) -> bool:
        k = int(np.searchsorted(stored, np.uint64(store_id)))
        return k < len(stored) and int(stored[k]) == store_id

    queues: dict[str, list[tuple[int, Record]]] = {}
    for row in store.rows(ChunkType.CLIENT_MSG):
        queues.setdefault(row.record["client_id"], []).append((row.index, row.record))

    def queue(cid: str) -> Iterator[Record]:
        for number, rec in queues.pop(cid, []):
            if not known(rec["store_id"]):
                if rep is not None:
                    rep.skip("queue entry whose base_msgs row is missing (Mosquitto would drop it)",
                             f"{cid} store {rec['store_id']}")
                continue
            came(number)
            yield rec
            if rep is not None:
                rep.count("queued")

    for row in store.rows(ChunkType.CLIENT):
        came(row.index)
        yield row.record
        if rep is not None:
            rep.count("clients")
        yield from queue(row.record["client_id"])
    for cid in list(queues):
        if rep is not None:
            rep.skip("queue entries of a client without a session row (written without one)", cid, n=len(queues[cid]))
        yield from queue(cid)
    for row in store.rows(ChunkType.SUB):
        came(row.index)
        yield row.record
        if rep is not None:
            rep.count("subscriptions")
    for row in store.rows(ChunkType.RETAIN):
        if not known(row.record["store_id"]):
            if rep is not None:
                rep.skip("retain whose base_msgs row is missing (Mosquitto would drop it)",
                         f"store {row.record['store_id']}")
            continue
        came(row.index)
        yield row.record
        if rep is not None:
            rep.count("retains")


def sqlite_to_db(src_path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> MigrationReport:
    """Write a v6 mosquitto.db holding everything a 2.1 sqlite store holds that a db can."""
    t0 = time.perf_counter()
    rep = MigrationReport(os.fspath(src_path), os.fspath(out_path))
    with StoreFile(src_path) as store:
        wills = store.figures.tables.get("wills", 0)
        if wills:
            rep.skip("will message (a mosquitto.db has no place for wills)", n=wills)
        rows: list[int] = []
        try:
            write_records(out_path, V6, store_records(store, rep, rows=rows))
        except CodecError as exc:  # a value a v6 chunk cannot hold (a 70,000-byte topic): say which row
            if rows and rows[-1] >= 0 and exc.chunk_type is None:
                table, rowid = store.where(rows[-1])
                field = exc.field
                if field and field.endswith("_len"):  # the length field of a text: the row's column is the text
                    field, exc.reason = field[:-4], f"its length {exc.reason}"
                    exc.args = (exc.reason,)
                exc.field = None
                exc.located(path=store.source_path, chunk_type=table, chunk_index=rowid, field=field)
            raise
    rep.seconds = time.perf_counter() - t0
    return rep


__all__ = ["sqlite_to_db", "store_records"]
