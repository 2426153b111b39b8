"""codec.store.rowedit: an edited v6 record written into its row reads back as that record (the store's
reader, ROWS, is the other direction), other columns keep their values, and values the store cannot hold
are refused with the row and value named."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.properties import Property
from codec.store.read import StoreFile
from codec.store.rowedit import RowChange, apply_changes, assignments, read_stored

from support.paths import INCOMING, SQLITE_STORES

STORE = INCOMING / "2.1.2-a.sqlite3"
pytestmark = pytest.mark.skipif(not SQLITE_STORES, reason="no 2.1 sqlite fixture")

EDITS = {
    ChunkType.MSG_STORE: {"qos": 2, "retain": 1, "expiry_time": 4_102_444_800, "topic": "x/ÿ/y", "payload": b"\0\xffbin",
                          "source_id": "me", "source_username": None, "source_mid": 65535, "source_port": 1884,
                          "properties": [Property.make(3, "text/plain"), Property.make(38, ("k", "v")),
                                         Property.make(9, b"\x01\x02")]},
    ChunkType.CLIENT_MSG: {"mid": 77, "state": 3, "dup": 1, "qos": 2, "properties": [Property.make(11, 42)]},
    ChunkType.SUB: {"qos": 1, "options": 4 | 8, "identifier": 9, "topic": "new/+/filter"},
    ChunkType.CLIENT: {"session_expiry_interval": 0xFFFF_FFFF, "session_expiry_time": 0, "listener_port": 1884,
                       "username": "someone"},
    ChunkType.RETAIN: {"store_id": None},  # (set below: another stored message's id)
}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    out = tmp_path / "mosquitto.sqlite3"
    shutil.copyfile(STORE, out)
    return out


def columns_of(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]


@pytest.mark.parametrize("kind", list(EDITS), ids=lambda k: k.label)
def test_an_edited_record_reads_back_from_its_row(store: Path, kind: ChunkType) -> None:
    with StoreFile(store) as sf:
        rows = [sf.chunk(int(i)) for i in sf.rows_of(kind)]
        sids = [sf.chunk(int(i)).record["store_id"] for i in sf.rows_of(ChunkType.MSG_STORE)]
    edits = dict(EDITS[kind])
    if kind == ChunkType.RETAIN:
        edits["store_id"] = next(s for s in sids if s != rows[-1].record["store_id"])
    row = rows[-1]
    new = row.record.with_values(**edits)
    con = sqlite3.connect(store, isolation_level=None)
    names = columns_of(con, row.table)
    before = read_stored(con, row.table, names, row.offset)
    cols = assignments(row.record, new, f"{row.table}[rowid {row.offset}]")
    con.execute("BEGIN")
    done = apply_changes(con, [RowChange(row.table, row.offset, before, cols)], str(store))
    con.execute("COMMIT")
    after = read_stored(con, row.table, names, row.offset)
    con.close()
    assert done.updated == {row.table: 1}
    with StoreFile(store) as sf:
        assert sf.chunk(row.index).record.values == new.values
    # the columns the record has no value for keep theirs
    untouched = {n for n in names if n not in cols}
    assert untouched and [c for c in after if c[0] in untouched] == [c for c in before if c[0] in untouched]


@pytest.mark.parametrize(("kind", "name", "value", "why"), [
    (ChunkType.CLIENT, "last_mid", 9, "clients[x].last_mid: not a column of the store"),
    (ChunkType.SUB, "options", 1, "qos and options in one byte"),
    (ChunkType.MSG_STORE, "topic", "a/\udcff", "clients[x].topic: not valid UTF-8"),
    (ChunkType.MSG_STORE, "properties", [Property.make(2, 60)], "keeps only payload-format-indicator"),
    (ChunkType.CLIENT_MSG, "properties", [Property.make(3, "x")], "one subscription identifier, nothing else"),
])
def test_what_the_store_cannot_hold_is_refused(kind: ChunkType, name: str, value: object, why: str) -> None:
    with StoreFile(STORE) as sf:
        rec = sf.chunk(int(sf.rows_of(kind)[0])).record
    with pytest.raises(CodecError) as err:
        assignments(rec, rec.with_values(**{name: value}), "clients[x]")
    assert why in str(err.value)


def test_a_row_changed_since_it_was_read_is_refused_and_nothing_is_written(store: Path) -> None:
    con = sqlite3.connect(store, isolation_level=None)
    names = columns_of(con, "retains")
    first = read_stored(con, "retains", names, 1)
    second = read_stored(con, "retains", names, 2)
    con.execute("UPDATE retains SET store_id = 1 WHERE rowid = 2")  # someone else's change
    con.execute("BEGIN")
    with pytest.raises(CodecError, match="retains rowid 2 changed since it was read"):
        apply_changes(con, [RowChange("retains", 1, first, delete=True), RowChange("retains", 2, second, delete=True)],
                      str(store))
    con.execute("ROLLBACK")
    assert read_stored(con, "retains", names, 1) == first  # the first delete was rolled back with the rest
    con.close()
