"""The data source's planning and reading without Spark: partitions carry where their chunks are (no walk of
the range again on the executor), and a projection decodes only what it returns; same rows either way."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from codec import DbFile
from exporters.arrow import iter_batches
from exporters.schema import KINDS, SCHEMAS
from exporters.spark.source import MAX_BATCH_ROWS, batch_rows, plan, read_part

from support.paths import REAL_FILES, V3, V6

AT = 1_900_000_000.0  # one reference time: the expired column must not depend on when the test runs


def walked(part, kind: str) -> pa.Table:  # type: ignore[no-untyped-def]
    with DbFile(part.path) as db:
        return pa.Table.from_batches(list(iter_batches(db, kind, start=part.start, stop=part.stop,
                                                       first_index=part.first_index, at=AT)), schema=SCHEMAS[kind])


def read(part, kind: str, **kw: object) -> pa.Table:  # type: ignore[no-untyped-def]
    schema = SCHEMAS[kind] if kw.get("columns") is None else pa.schema([SCHEMAS[kind].field(c) for c in kw["columns"]])
    with DbFile(part.path) as db:
        st = os.fstat(db.fd)
        span = part.span(st, db.version or 6)
        return pa.Table.from_batches(list(iter_batches(db, kind, start=part.start, stop=part.stop,
                                                       first_index=part.first_index, span=span, at=AT, **kw)),
                                     schema=schema)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_shipped_chunks_read_what_a_walk_reads(path: Path) -> None:
    for kind in KINDS:
        parts, _ = plan([str(path)], kind, partition_rows=4)
        for part in parts:
            assert part.chunks is not None
            assert read(part, kind).equals(walked(part, kind)), (kind, part.start)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_every_column_alone_is_that_column_of_the_whole(path: Path) -> None:
    for kind in KINDS:
        [part] = plan([str(path)], kind)[0] or [None]
        if part is None:
            continue
        whole = read(part, kind)
        for name in SCHEMAS[kind].names:
            assert read(part, kind, columns=[name]).equals(whole.select([name])), (kind, name)
        two = ["retain", "qos"] if {"qos", "retain"} <= set(SCHEMAS[kind].names) else SCHEMAS[kind].names[-2:]
        assert read(part, kind, columns=two).equals(whole.select(two)), kind


def test_a_file_replaced_after_planning_is_walked_again(tmp_path: Path) -> None:
    db = tmp_path / "mosquitto.db"
    shutil.copyfile(V3, db)
    parts, _ = plan([str(db)], "client_msg")
    before = pa.Table.from_batches(list(read_part(parts[0], "client_msg")))
    shutil.copyfile(V3, f"{db}.new")  # saved again (a new file renamed over it): the plan's stat no longer holds
    os.replace(f"{db}.new", db)
    with DbFile(db) as f:
        assert parts[0].span(os.fstat(f.fd), f.version or 6) is None
    again = pa.Table.from_batches(list(read_part(parts[0], "client_msg")))  # the range walked afresh
    assert again.drop_columns(["file"]).equals(before.drop_columns(["file"])) and again.num_rows > 0


def test_contiguous_chunks_ship_four_bytes_each() -> None:
    parts, _ = plan([str(V6)], "msg_store")
    [part] = parts
    c = part.chunks
    assert c is not None and c.count == len(c.lengths) and c.lengths.dtype.itemsize == 4
    with DbFile(V6) as f:
        span = part.span(os.fstat(f.fd), 6)
    assert span is not None and len(span.offsets) == c.count


def test_batches_weigh_about_the_same() -> None:
    assert batch_rows("msg_store", ["qos", "retain"], None) == MAX_BATCH_ROWS  # four bytes a row
    assert batch_rows("msg_store", None, None) < 100_000
    assert 4096 <= batch_rows("msg_store", ["payload"], None) <= MAX_BATCH_ROWS


def test_a_sqlite_store_is_read_as_ranges_of_its_rows() -> None:
    """A Mosquitto 2.1 store's partitions are ranges of its row numbers, read through the store's column batches (the
    storage contract, as the export reads it): every kind's rows, cut into parts of a few rows, planned beside a .db,
    with a topic selection too, are the rows iter_batches reads from the store, in its order."""
    from codec.sources import open_any
    from codec.views.query import Selection
    from exporters.select import pick_file
    from exporters.spark.source import read_part

    from support.paths import SQLITE_STORES

    if not SQLITE_STORES:
        pytest.skip("no sqlite store fixture")
    store = str(SQLITE_STORES[0])

    def no_clock(kind: str) -> list[str]:  # the expired columns depend on when the rows are read
        return [c for c in SCHEMAS[kind].names if c != "expired"]

    def parts_read(parts: list, kind: str, **kw: object) -> pa.Table:  # type: ignore[type-arg]
        cols = no_clock(kind)
        return pa.Table.from_batches([b for p in parts for b in read_part(p, kind, columns=cols, **kw)],
                                     schema=pa.schema([SCHEMAS[kind].field(c) for c in cols]))

    with open_any(store) as db:
        for kind in KINDS:
            whole = pa.Table.from_batches(list(iter_batches(db, kind, columns=no_clock(kind))),
                                          schema=pa.schema([SCHEMAS[kind].field(c) for c in no_clock(kind)]))
            parts, skipped = plan([store, str(V6)], kind, partition_rows=3)
            mine = [p for p in parts if p.path == store]
            assert not skipped and len(mine) == -(-whole.num_rows // 3), kind  # none for a kind it has no rows of
            assert parts_read(mine, kind).equals(whole), kind
        sel = Selection(topics=["corp/retained/#"])
        rows = pick_file(db, sel).rows
        whole = pa.Table.from_batches(list(iter_batches(db, "msg_store", columns=no_clock("msg_store"))))
        chunks = np.asarray(whole.column("chunk_index"))
        kept = whole.filter(pa.array(np.isin(chunks, rows)))
    (whole_part,), _ = plan([store], "msg_store")  # packed with other files by its bytes, not its row count
    assert whole_part.stop - whole_part.start < whole_part.weight <= os.path.getsize(store)
    parts, _ = plan([store], "msg_store", partition_rows=2, selection=sel)
    got = parts_read(parts, "msg_store", selection=sel)
    assert 0 < got.num_rows < whole.num_rows and got.equals(kept)
    assert all(t.startswith("corp/retained/") for t in got.column("topic").to_pylist())
