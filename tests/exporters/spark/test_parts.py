"""The data source's planning and reading without Spark: partitions carry where their chunks are (no walk of
the range again on the executor), and a projection decodes only what it returns; same rows either way."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

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


def test_a_sqlite_store_is_refused_by_name(capsys: pytest.CaptureFixture) -> None:
    """A Mosquitto 2.1 store given to the data source (its partitions are byte ranges of a .db) or to `mosqdb sql`
    is named as a store in one line, before Spark starts; under onError=skip it is a skipped file."""
    from codec.errors import CodecError

    from support.paths import INCOMING

    store = INCOMING / "2.1.2-a.sqlite3"
    if not store.exists():
        pytest.skip("no 2.1.2 sqlite fixture")
    with pytest.raises(CodecError, match="is a Mosquitto 2.1 sqlite store") as got:
        plan([str(store)], "msg_store")
    assert got.value.path == str(store)
    parts, skipped = plan([str(store), str(V6)], "msg_store", on_error="skip")
    assert {p.path for p in parts} == {str(V6)} and len(skipped) == 1 and "sqlite store" in skipped[0]
    pytest.importorskip("pyspark")
    from inspector.cli import main

    assert main(["sql", "SELECT count(*) FROM msg_store", str(store)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(store) in err[0] and "sqlite store" in err[0] and "mosqdb export" in err[0]
