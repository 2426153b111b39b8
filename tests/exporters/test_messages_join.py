"""The messages view's numpy join gives what a plain Python join of the records gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from codec import CodecError, DbFile
from codec.engine import Record
from codec.layouts import ChunkType
from codec.writer import write_records
from exporters.schema import SCHEMAS
from exporters.select import FileView

from support.paths import REAL_FILES, UNIT_FILES

FILES = [*REAL_FILES, *UNIT_FILES]


def python_join(path: Path) -> list[tuple[int, bool, int, list[str]]]:
    retained: set[int] = set()
    clients: dict[int, list[str]] = {}
    stores: list[int] = []
    with DbFile(path) as db:
        for rec in db.records():
            if rec.kind == "retain":
                retained.add(rec["store_id"])
            elif rec.kind == "client_msg":
                clients.setdefault(rec["store_id"], []).append(rec["client_id"])
            elif rec.kind == "msg_store":
                stores.append(rec["store_id"])
    wrap = [s - (1 << 64) if s >= 1 << 63 else s for s in stores]
    return [(w, s in retained, len(clients.get(s, [])), clients.get(s, [])) for s, w in zip(stores, wrap)]


def view_join(path: Path, batch_size: int = 32_768) -> list[tuple[int, bool, int, list[str]]]:
    with DbFile(path) as db:
        rows = []
        for batch in FileView(db, batch_size=batch_size).batches("messages"):
            rows += [(r["store_id"], r["retained"], r["queued"], r["clients"]) for r in batch.to_pylist()]
    return rows


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fixtures(path: Path) -> None:
    try:
        want = python_join(path)
    except CodecError:
        pytest.skip("damaged: the view raises before any join")
    assert view_join(path, batch_size=3) == want
    assert view_join(path) == want


def test_duplicates_order_and_big_ids(tmp_path: Path) -> None:
    big = (1 << 64) - 1
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 2}, 6)]
    for sid in (5, big, 1 << 63, 7, 5):
        recs.append(Record(int(ChunkType.MSG_STORE), {"store_id": sid, "expiry_time": 0, "source_mid": 0,
                                                      "source_id": None, "source_username": None, "source_port": 0,
                                                      "topic": "t", "qos": 1, "retain": 0, "payload": b"p",
                                                      "properties": None}, 6))
    for sid, client in ((big, "z"), (5, "b"), (5, "a"), (1 << 63, "c"), (5, "b"), (9, "orphan")):
        recs.append(Record(int(ChunkType.CLIENT_MSG), {"client_id": client, "store_id": sid, "mid": 1, "qos": 1,
                                                       "retain": 0, "direction": 1, "state": 11, "dup": 0,
                                                       "properties": None}, 6))
    for sid in (big, 7, 7, 12):
        recs.append(Record(int(ChunkType.RETAIN), {"store_id": sid}, 6))
    p = tmp_path / "join.db"
    write_records(p, 6, recs)
    want = python_join(p)
    assert want[0] == (5, False, 3, ["b", "a", "b"]) and want[1] == (-1, True, 1, ["z"])
    assert view_join(p, batch_size=2) == want


def test_several_files_at_once_join_each_file_to_its_own_rows(tmp_path: Path) -> None:
    """``messages_table`` (the Spark driver's view of small inputs) joins by (file, store id): the rows
    FileView gives per file, in the same order, with a message's clients in file order."""
    import pyarrow as pa

    from exporters.select import messages_table

    files = [p for p in FILES if _readable(p)]
    assert len(files) > 5
    parts: dict[str, list[pa.RecordBatch]] = {k: [] for k in ("msg_store", "client_msg", "retain", "messages")}
    for path in files:
        with DbFile(path) as db:
            view = FileView(db)
            for kind, batches in parts.items():
                batches.extend(view.batches(kind))
    tables = {k: pa.Table.from_batches(v, schema=SCHEMAS[k]) for k, v in parts.items()}
    got = messages_table(tables["msg_store"], tables["client_msg"], tables["retain"])
    assert got.schema == SCHEMAS["messages"]
    assert got.to_pylist() == tables["messages"].to_pylist()
    assert any(len(r["clients"]) > 1 for r in got.to_pylist())
    none = messages_table(*(t.slice(0, 0) for t in (tables["msg_store"], tables["client_msg"], tables["retain"])))
    assert none.num_rows == 0 and none.schema == SCHEMAS["messages"]


def _readable(path: Path) -> bool:
    try:
        python_join(path)
    except CodecError:
        return False
    return True
