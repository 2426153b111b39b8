"""The store reader's shortcuts give what the full reads give: rowids, expiring messages, kept pages."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from codec.layouts import ChunkType
from codec.store.read import StoreFile, store_expiries

from support.paths import INCOMING

pytestmark = pytest.mark.skipif(not (INCOMING / "2.1.2-a.sqlite3").exists(), reason="no 2.1.2 sqlite fixture")


def _sql(store: Path, *statements: str) -> None:
    con = sqlite3.connect(store)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()


def _rowids(store: Path, table: str) -> list[int]:
    con = sqlite3.connect(store)
    try:
        return [r[0] for r in con.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]
    finally:
        con.close()


def test_rowids_with_and_without_gaps(store: Path) -> None:
    _sql(store, "DELETE FROM base_msgs WHERE rowid = 3", "UPDATE retains SET rowid = rowid + 1000")
    with StoreFile(store) as s:
        for t, table in ((ChunkType.MSG_STORE, "base_msgs"), (ChunkType.RETAIN, "retains"),
                         (ChunkType.CLIENT_MSG, "client_msgs")):
            assert s.rowids(t).tolist() == _rowids(store, table)
            assert s.rowids(t).dtype == np.int64
        assert 3 not in s.rowids(ChunkType.MSG_STORE).tolist() and s.rowids(ChunkType.RETAIN)[0] > 1000


def test_expiring_messages_are_the_rows_read(store: Path) -> None:
    _sql(store, "UPDATE base_msgs SET expiry_time = 1800000000 + rowid WHERE rowid % 3 = 0",
         "UPDATE base_msgs SET expiry_time = '12abc' WHERE rowid = 1",  # text: reads as 12
         "UPDATE base_msgs SET expiry_time = -5 WHERE rowid = 2",
         "UPDATE base_msgs SET expiry_time = 0.0 WHERE rowid = 4")
    with StoreFile(store) as s:
        want: dict[int, int] = {}
        for c in s.batches(ChunkType.MSG_STORE, names=("store_id", "expiry_time")):
            keep = c.ints["expiry_time"] > 0
            want.update(zip(c.ints["store_id"][keep].tolist(), c.ints["expiry_time"][keep].tolist(), strict=True))
        got = store_expiries(s)
    assert got == want and len(got) > 3
    assert all(type(k) is int and type(v) is int for k, v in got.items())


def test_a_page_read_twice_is_read_once(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with StoreFile(store) as s:
        reads: list[ChunkType] = []
        real = s._fetch_columnar

        def counted(t: ChunkType, *a: object, **kw: object) -> object:
            reads.append(t)
            return real(t, *a, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(s, "_fetch_columnar", counted)
        for t in (ChunkType.RETAIN, ChunkType.CLIENT_MSG, ChunkType.MSG_STORE):
            first = list(s.batches(t, size=7))
            second = list(s.batches(t, size=7))
            third = list(s.batches(t, size=7))
            for a, b, c in zip(first, second, third, strict=True):
                assert a.index.tolist() == b.index.tolist() == c.index.tolist()
                assert a.data.tobytes() == b.data.tobytes() == c.data.tobytes()
                assert {k: v.tolist() for k, v in a.ints.items()} == {k: v.tolist() for k, v in c.ints.items()}
            pages = len(first)
            # queue entries and retains: read, kept, taken by the second reader, read again by the third;
            # stored messages (their payloads) are never kept
            assert reads.count(t) == (3 * pages if t == ChunkType.MSG_STORE else 2 * pages)
