"""Arrow batches: the manifests' counts, the codec's exact values, bounded batches, damage."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from codec import DbFile, Record
from codec.errors import CodecError
from codec.views.jsonview import record_fields
from codec.writer import write_records
from exporters.arrow import iter_batches, kind_span, read_table
from exporters.schema import KINDS, SCHEMAS, spark_ddl

from support.dbfiles import not_utf8_db
from support.paths import REAL_FILES, UNIT_FILES, manifest


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_counts_match_manifest(path: Path) -> None:
    counts = manifest(path)["chunk_counts"]
    for kind in KINDS:
        table = read_table(str(path), kind)
        assert table.schema == SCHEMAS[kind]
        assert table.num_rows == counts[f"DB_CHUNK_{kind.upper()}"]
        assert set(table.column("file").to_pylist()) == {os.path.abspath(path)}
        assert set(table.column("db_version").to_pylist()) == {manifest(path)["db_version"]}


def _expected(rec: Record) -> dict:
    out = record_fields(rec)
    if "payload_b64" in out:
        out["payload"] = out.pop("payload_b64")
    return out


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_values_equal_dump_json(path: Path) -> None:
    """Every column value is the codec's (as `mosqdb dump --json` shows it)."""
    with DbFile(path) as db:
        chunks = {c.index: c for c in db.stream()}
    for kind in KINDS:
        for row in read_table(str(path), kind).to_pylist():
            chunk = chunks[row["chunk_index"]]
            assert chunk.kind == kind and chunk.offset == row["chunk_offset"]
            for name, want in _expected(chunk.record).items():
                got = row[name]
                if name == "payload":
                    got = base64.b64encode(got).decode()
                elif name == "properties" and got is not None:
                    got = [(p["id"], p["name"], p["value"] if p["key"] is None else [p["key"], p["value"]])
                           for p in got]
                    want = [(p["id"], p["name"], p["value"] if p["type"] not in ("byte", "u16", "u32", "vbi")
                             else str(p["value"])) for p in want]
                assert got == want, (kind, row["chunk_index"], name)


@pytest.mark.parametrize("path", REAL_FILES + UNIT_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_vectorised_equals_codec_records(path: Path) -> None:
    """The column-wise path and the record-by-record path agree on values and on errors."""
    for kind in KINDS:
        try:
            fast = read_table(str(path), kind, batch_size=7)
        except CodecError as exc:
            fast = str(exc)
        try:
            slow = read_table(str(path), kind, vectorised=False)
        except CodecError as exc:
            slow = str(exc)
        if isinstance(fast, str) or isinstance(slow, str):
            assert fast == slow
        else:
            assert fast.equals(slow), kind


@pytest.mark.parametrize("path", REAL_FILES + UNIT_FILES[::3], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_gathered_text_equals_the_view_cast(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Text and payload columns gathered in C (codec.index.gather_ranges) equal the binary-view
    arrays cast by Arrow, the path taken without the C accelerator."""
    from exporters import arrow_columns

    if arrow_columns.gather_ranges is None:
        pytest.skip("the C extension is not built")
    for kind in KINDS:
        try:
            gathered = read_table(str(path), kind, batch_size=5)
        except CodecError as exc:
            gathered = str(exc)
        with monkeypatch.context() as m:
            m.setattr(arrow_columns, "gather_ranges", None)
            try:
                cast = read_table(str(path), kind, batch_size=5)
            except CodecError as exc:
                cast = str(exc)
        assert gathered == cast if isinstance(cast, str) else gathered.equals(cast), kind


def test_v5_properties_typed_rows() -> None:
    path = next(p for p in REAL_FILES if p.name.startswith("2.0.20"))
    rows = {r["topic"]: r for r in read_table(str(path), "msg_store").to_pylist()}
    props = rows["corp/retained/v5props"]["properties"]
    assert [(p["name"], p["type"], p["key"], p["value"]) for p in props] == [
        ("payload_format_indicator", "byte", None, "1"),
        ("content_type", "str", None, "application/json"),
        ("response_topic", "str", None, "corp/reply/a"),
        ("correlation_data", "bin", None, "000102ff61"),
        ("user_property", "pair", "k1", "v1"),
        ("user_property", "pair", "ключ", "значение"),
        ("user_property", "pair", "k1", "dup"),
    ]
    assert rows["corp/plain/q1"]["properties"] is None
    # message expiry is stored as an absolute time, with its timestamp column
    v5a = rows["corp/v5/a"]
    assert v5a["expiry_time"] > 0 and int(v5a["expiry_ts"].timestamp()) == v5a["expiry_time"]
    assert rows["corp/plain/q1"]["expiry_time"] == 0 and rows["corp/plain/q1"]["expiry_ts"] is None


def test_small_batches_and_blocks_lose_nothing() -> None:
    path = next(p for p in REAL_FILES if p.name.startswith("2.0.20"))
    with DbFile(path) as db:
        whole = pa.Table.from_batches(list(iter_batches(db, "msg_store")))
        parts = list(iter_batches(db, "msg_store", batch_size=4, max_block=4096))
    assert max(b.num_rows for b in parts) <= 4
    assert pa.Table.from_batches(parts).equals(whole)
    # the 100 KiB payload is a batch of its own (a block never splits a chunk)
    big = [b for b in parts if any(len(p) == 102400 for p in b.column("payload").to_pylist())]
    assert len(big) == 1 and big[0].num_rows == 1


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_byte_ranges_at_chunk_boundaries_cover_the_file(path: Path) -> None:
    """Partitions as Spark gets them: (start, stop, first chunk index), one per row."""
    for kind in ("msg_store", "client_msg", "sub"):
        with DbFile(path) as db:
            whole = pa.Table.from_batches(list(iter_batches(db, kind)))
            span = kind_span(db, kind)
            end = db.index.end
            pieces = []
            for i in range(len(span.positions)):
                stop = int(span.offsets[i + 1]) if i + 1 < len(span.positions) else end
                pieces += iter_batches(db, kind, start=int(span.offsets[i]), stop=stop,
                                       first_index=int(span.positions[i]))
        assert pa.Table.from_batches(pieces, schema=SCHEMAS[kind]).equals(whole)


def test_store_ids_above_2_63_come_out_negative(tmp_path: Path) -> None:
    src = next(p for p in REAL_FILES if p.name.startswith("2.0.20"))
    with DbFile(src) as db:
        records = [c.record for c in db.stream()]
    records = [r.with_values(store_id=(1 << 64) - 1) if r.kind in ("msg_store", "retain") and r["store_id"] == 56
               else r for r in records]
    out = tmp_path / "big-ids.db"
    write_records(out, 6, records)
    ids = read_table(str(out), "retain").column("store_id").to_pylist()
    assert -1 in ids and all(i >= 0 or i == -1 for i in ids)
    assert (-1) & ((1 << 64) - 1) == (1 << 64) - 1  # the documented way back
    slow = read_table(str(out), "msg_store", vectorised=False)
    assert slow.equals(read_table(str(out), "msg_store"))


def test_invalid_utf8_topic_is_replaced(tmp_path: Path) -> None:
    src = next(p for p in REAL_FILES if p.name.startswith("1.6.10"))
    with DbFile(src) as db:
        records = [c.record for c in db.stream()]
    bad = "corp/\udcff\udcfe"  # bytes ff fe, kept by the codec via surrogateescape
    records = [r.with_values(topic=bad) if r.kind == "msg_store" and r["topic"] == "corp/plain/q0" else r
               for r in records]
    out = tmp_path / "bad-utf8.db"
    write_records(out, 5, records)
    topics = read_table(str(out), "msg_store").column("topic").to_pylist()
    assert "corp/\ufffd\ufffd" in topics and "corp/plain/q0" not in topics


def test_damage_yields_good_rows_then_a_located_error(tmp_path: Path) -> None:
    src = next(p for p in REAL_FILES if p.name.startswith("2.0.20"))
    with DbFile(src) as db:
        big = next(c for c in db.stream() if c.kind == "msg_store" and len(c.record["payload"]) == 102400)
    cut = tmp_path / "cut.db"
    shutil.copyfile(src, cut)
    with open(cut, "r+b") as fh:
        fh.truncate(big.offset + 5000)
    rows = 0
    with DbFile(cut) as db, pytest.raises(CodecError) as err:
        for batch in iter_batches(db, "msg_store"):
            rows += batch.num_rows
    assert rows == big.index - 1  # every stored message before the cut one (chunk 0 is cfg)
    msg = str(err.value)
    assert str(cut) in msg and f"offset {big.offset}" in msg and f"msg_store[{big.index}]" in msg
    assert "\n" not in msg


def test_schema_ddl_for_spark() -> None:
    ddl = spark_ddl(SCHEMAS["msg_store"])
    assert "`store_id` BIGINT" in ddl and "`payload` BINARY" in ddl and "`expiry_ts` TIMESTAMP" in ddl
    assert "`properties` ARRAY<STRUCT<`id`: INT, `name`: STRING" in ddl


def test_bad_property_tail_in_a_partition(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Damage only decoding sees (the header walk is fine): a located error, or a skipped rest."""
    from exporters.spark import Part, plan, read_part

    src = next(p for p in REAL_FILES if p.name.startswith("2.0.20"))
    with DbFile(src) as db:
        target = next(c for c in db.stream(spans=True) if c.kind == "msg_store" and c.record["properties"])
        props = next(s for s in target.spans if s.name == "properties")
    bad = tmp_path / "bad-props.db"
    data = bytearray(src.read_bytes())
    data[target.body_offset + props.offset + 1] = 0x7F  # the first property id: unknown
    bad.write_bytes(bytes(data))
    parts, skipped = plan([str(bad)], "msg_store")
    assert skipped == [] and len(parts) == 1
    with pytest.raises(CodecError) as err:
        list(read_part(parts[0], "msg_store"))
    assert str(bad) in str(err.value) and f"msg_store[{target.index}].properties" in str(err.value)
    rows = sum(b.num_rows for b in read_part(Part(str(bad), parts[0].start, parts[0].stop, parts[0].first_index),
                                             "msg_store", batch_size=1, on_error="skip"))
    assert rows == target.index - 1  # the stored messages before the damaged one
    line = capsys.readouterr().err.strip()  # one line naming the file once, where reading stopped, what was skipped
    assert "\n" not in line and line.count(str(bad)) == 1 and f"msg_store[{target.index}]" in line
    assert line.endswith(f"(the rest of the part from offset {parts[0].start} skipped)"), line


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_column_projection_equals_selecting_from_all(path: Path) -> None:
    cols = ["topic", "store_id", "file", "properties"]
    with DbFile(path) as db:
        whole = pa.Table.from_batches(list(iter_batches(db, "msg_store")))
        some = pa.Table.from_batches(list(iter_batches(db, "msg_store", columns=cols)))
        assert some.column_names == cols
        assert some.equals(whole.select(cols))
        with pytest.raises(ValueError, match="no column 'nope'"):
            list(iter_batches(db, "msg_store", columns=["nope"]))


def test_plan_follows_a_changed_file(tmp_path: Path) -> None:
    """The planner caches chunk tables per file version; a rewritten file is planned anew."""
    from exporters.spark import plan

    path = tmp_path / "m.db"
    v6 = next(p for p in REAL_FILES if p.name.startswith("2.0.20"))
    v3 = next(p for p in REAL_FILES if p.name.startswith("1.4.15"))
    shutil.copyfile(v6, path)
    first, _ = plan([str(path)], "retain", partition_rows=4)
    assert plan([str(path)], "retain", partition_rows=4)[0] == first
    shutil.copyfile(v3, tmp_path / "new.db")
    (tmp_path / "new.db").replace(path)
    second, _ = plan([str(path)], "retain", partition_rows=4)
    assert len(first) == 3 and len(second) == 2  # 10 retains, then 8
    with DbFile(path) as db:
        span = kind_span(db, "retain")
        assert [p.first_index for p in second] == [int(span.positions[0]), int(span.positions[4])]


def test_plan_shares_rows_evenly_between_cores() -> None:
    """With fewer parts than cores, parts shrink to equal shares; every row is in exactly one part."""
    from exporters.spark import plan, read_part

    path = next(p for p in REAL_FILES if p.name.startswith("2.0.20"))
    with DbFile(path) as db:
        n = len(kind_span(db, "client_msg").positions)
    one, _ = plan([str(path)], "client_msg", partition_rows=1000)
    assert len(one) == 1
    parts, _ = plan([str(path)], "client_msg", partition_rows=1000, min_partitions=3, min_rows=1)
    sizes = [sum(b.num_rows for b in read_part(p, "client_msg")) for p in parts]
    assert len(parts) == 3 and sum(sizes) == n and max(sizes) - min(sizes) <= 1, sizes
    floor, _ = plan([str(path)], "client_msg", partition_rows=1000, min_partitions=3, min_rows=n)
    assert len(floor) == 1  # never finer than min_rows
    every = pa.concat_tables(pa.Table.from_batches(list(read_part(p, "client_msg"))) for p in parts)
    assert every.equals(pa.Table.from_batches(list(read_part(one[0], "client_msg"))))


@pytest.mark.parametrize("vectorised", [True, False], ids=["columnar", "per-chunk"])
@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_a_subset_of_rows_equals_taking_them_from_all(path: Path, vectorised: bool) -> None:
    """``rows=`` decodes only the chosen chunks, and gives exactly those rows of the whole table."""
    with DbFile(path) as db:
        whole = pa.Table.from_batches(list(iter_batches(db, "msg_store", at=0)))
        pick = np.arange(whole.num_rows)[1::3]
        some = pa.Table.from_batches(list(iter_batches(db, "msg_store", rows=pick, batch_size=2, at=0,
                                                       vectorised=vectorised)), schema=whole.schema)
        assert some.equals(whole.take(pa.array(pick)))


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_conform_relabels_like_a_cast(path: Path) -> None:
    """The Spark reader's relabelling equals Arrow's cast to the schema PySpark expects (list field
    named ``element``, columns nullable), without copying."""
    from exporters.spark import conform

    with DbFile(path) as db:
        batch = next(iter_batches(db, "msg_store", at=0))
    target = pa.schema([pa.field(f.name, pa.list_(pa.field("element", f.type.value_type)) if f.name == "properties"
                                 else f.type, nullable=True) for f in batch.schema])
    got = conform(batch, target)
    assert got.schema.equals(target) and got.equals(batch.cast(target))
    assert got.column("payload").buffers()[2].address == batch.column("payload").buffers()[2].address
    odd = pa.schema([pa.field("file", pa.large_string()), *list(target)[1:]])  # a real type change: cast
    assert conform(batch, odd).equals(batch.cast(odd))


@pytest.mark.parametrize("vectorised", [True, False], ids=["columnar", "per-chunk"])
@pytest.mark.parametrize("gather", [True, False], ids=["gathered", "views"])
def test_text_that_is_not_utf8_keeps_its_bytes(tmp_path: Path, vectorised: bool, gather: bool,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow strings must be UTF-8: they show U+FFFD, and `invalid_utf8` holds the exact bytes."""
    from exporters import arrow_columns

    if not gather:
        monkeypatch.setattr(arrow_columns, "gather_ranges", None)
    path = not_utf8_db(tmp_path / "bad.db")
    with DbFile(path) as db:
        t = pa.Table.from_batches(list(iter_batches(db, "msg_store", vectorised=vectorised, at=0)))
    assert t.column("topic").to_pylist() == ["fine", "t/\ufffd\ufffdok"]
    assert t.column("invalid_utf8").to_pylist() == [None, [
        {"field": "topic", "bytes": b"t/\xff\xfeok"},
        {"field": "properties[0].key", "bytes": b"k\xc3"},
        {"field": "properties[1].value", "bytes": b"t/\xff\xfeok"}]]
    assert t.column("properties")[1].as_py()[0]["key"] == "k\ufffd"


def test_messages_jsonl_carries_the_bytes_in_base64(tmp_path: Path) -> None:
    import base64
    import json

    from exporters.files import export_jsonl

    path = not_utf8_db(tmp_path / "bad.db")
    out = tmp_path / "m.jsonl"
    export_jsonl([str(path)], str(out), kinds=["messages"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    bad = next(r for r in rows if r["store_id"] == 2)
    assert bad["retained"] and base64.b64decode(bad["invalid_utf8"][0]["bytes"]) == b"t/\xff\xfeok"
