"""The `mosquitto` Spark data source on the real files (one local session for the module)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from support.paths import REAL, manifest

DIR_FILES = sorted(REAL.glob("*.db"))  # what the data source reads from the directory REAL

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

import exporters.spark as xs  # noqa: E402
from codec import DbFile  # noqa: E402
from codec.errors import CodecError  # noqa: E402
from codec.views.query import Selection  # noqa: E402
from exporters.select import FileView  # noqa: E402


def load(spark, kind: str, path: str | Path, **options: object):  # type: ignore[no-untyped-def]
    r = spark.read.format("mosquitto").option("kind", kind)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(str(path))


def test_directory_of_all_versions_counts(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    kinds = ("msg_store", "client_msg", "client")  # every kind's counts: test_arrow / test_export_cli
    frames = [load(spark, kind, REAL).select("file", "db_version", F.lit(kind).alias("kind")) for kind in kinds]
    union = frames[0]
    for df in frames[1:]:
        union = union.unionAll(df)
    got = Counter((r["file"], r["db_version"], r["kind"]) for r in union.collect())  # one job for every kind
    want = {(os.path.abspath(p), manifest(p)["db_version"], kind): manifest(p)["chunk_counts"][f"DB_CHUNK_{kind.upper()}"]
            for p in DIR_FILES for kind in kinds}
    assert got == want


def test_retained_payload_hashes_by_join(spark) -> None:  # type: ignore[no-untyped-def]
    stores = load(spark, "msg_store", REAL)
    retain = load(spark, "retain", REAL).select("file", "store_id")
    rows = retain.join(stores, ["file", "store_id"]).select("file", "topic", "qos", "payload").collect()
    for path in DIR_FILES:
        got = {r["topic"]: (hashlib.sha256(r["payload"]).hexdigest(), r["qos"])
               for r in rows if r["file"] == os.path.abspath(path)}
        want = {r["topic"]: (r["payload_sha256"], r["qos"]) for r in manifest(path)["workload"]["retained"]}
        assert got == want


def test_queued_per_client_and_v5_properties(spark) -> None:  # type: ignore[no-untyped-def]
    rows = load(spark, "client_msg", REAL).select("file", "client_id").collect()
    for path in DIR_FILES:
        got = Counter(r["client_id"] for r in rows if r["file"] == os.path.abspath(path))
        want = {c: v["queued_or_inflight_messages"] for c, v in manifest(path)["clients_observed"].items()
                if v["queued_or_inflight_messages"]}
        assert got == want
    v6 = next(p for p in DIR_FILES if manifest(p)["db_version"] == 6)
    row = load(spark, "msg_store", v6).where("topic = 'corp/retained/v5props'").collect()[0]
    want = next(r for r in manifest(v6)["workload"]["retained"] if r["topic"] == "corp/retained/v5props")
    props = row["properties"]
    assert [[p["key"], p["value"]] for p in props if p["name"] == "user_property"] == want["properties"]["UserProperty"]
    assert {p["name"]: p["value"] for p in props}["correlation_data"] == want["properties"]["CorrelationData"]
    assert row["expiry_ts"] is not None and int(row["expiry_ts"].timestamp()) == row["expiry_time"]


def test_tiny_partitions_split_at_chunk_boundaries(spark) -> None:  # type: ignore[no-untyped-def]
    kind = "msg_store"
    df = load(spark, kind, REAL, partitionRows=10, batchSize=3)
    total = sum(manifest(p)["chunk_counts"][f"DB_CHUNK_{kind.upper()}"] for p in DIR_FILES)
    assert df.rdd.getNumPartitions() == sum(-(-manifest(p)["chunk_counts"][f"DB_CHUNK_{kind.upper()}"] // 10)
                                            for p in DIR_FILES)
    rows = df.collect()
    keys = [(r["file"], r["chunk_index"]) for r in rows]
    assert len(keys) == total == len(set(keys))
    whole = {(r["file"], r["chunk_index"]): r for r in load(spark, kind, REAL).collect()}
    assert {(r["file"], r["chunk_index"]): r for r in rows} == whole


def test_bad_file_in_directory(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for p in DIR_FILES:
        shutil.copyfile(p, tmp_path / p.name)
    (tmp_path / "zz-not-a-db.db").write_bytes(b"this is not a mosquitto database at all")
    cut = tmp_path / "cut.db"
    data = (DIR_FILES[-1]).read_bytes()
    cut.write_bytes(data[:4000])
    with pytest.raises(Exception) as err:
        load(spark, "msg_store", tmp_path).count()
    assert "cut.db" in str(err.value) or "zz-not-a-db.db" in str(err.value)
    # skip: the good files only, and the plan reports each bad one in one line
    assert load(spark, "msg_store", tmp_path, onError="skip").count() == sum(
        manifest(p)["chunk_counts"]["DB_CHUNK_MSG_STORE"] for p in DIR_FILES)
    _, skipped = xs.plan(xs.db_files(str(tmp_path)), "msg_store", on_error="skip")
    assert len(skipped) == 2
    assert any(s.count(str(cut)) == 1 and "offset" in s for s in skipped)  # the file named once
    assert any("zz-not-a-db.db" in s and "not a mosquitto db" in s for s in skipped)
    with pytest.raises(CodecError) as direct:
        xs.plan([str(cut)], "msg_store")
    assert str(cut) in str(direct.value)


def test_to_dataframe_selections_match_arrow(spark) -> None:  # type: ignore[no-untyped-def]
    v6 = str(next(p for p in DIR_FILES if manifest(p)["db_version"] == 6))
    with DbFile(v6) as db:
        sel = Selection(topics=["corp/plain/#"])
        view = FileView(db, sel)
        want = {k: sum(b.num_rows for b in view.batches(k)) for k in ("client_msg", "sub")}
        want_msgs = {r["store_id"]: (r["queued"], sorted(r["clients"]), r["retained"])
                     for b in FileView(db).batches("messages") for r in b.to_pylist()}
    for kind, n in want.items():
        assert xs.to_dataframe(spark, v6, kind, topic="corp/plain/#").count() == n, kind
    msgs = xs.to_dataframe(spark, v6, "messages").collect()
    assert {r["store_id"]: (r["queued"], sorted(r["clients"]), r["retained"]) for r in msgs} == want_msgs
    assert xs.to_dataframe(spark, v6, "messages", client="a-sub-v5").count() == 4
    with DbFile(v6) as db:
        ids = sorted(c.record["store_id"] for c in db.stream(types=[2]))
        in_range = sum(b.num_rows for b in FileView(db, Selection(store_ids=(ids[-8], ids[-2]))).batches("client_msg"))
    assert xs.to_dataframe(spark, v6, "client_msg", store_ids=(ids[-8], ids[-2])).count() == in_range > 0
    with pytest.raises(ValueError):
        xs.to_dataframe(spark, v6, "msg_store", topic="a/#/b")


def test_sql_command_uses_views(spark, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from inspector.cli import main

    q = ("SELECT m.file, count(*) AS n FROM msg_store m JOIN retain r USING (file, store_id) "
         "GROUP BY m.file ORDER BY m.file")
    assert main(["sql", q, str(REAL), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows == [{"file": os.path.abspath(p), "n": len(manifest(p)["workload"]["retained"])} for p in DIR_FILES]
    assert main(["sql", "SELECT topic, queued, clients FROM messages WHERE queued > 1 ORDER BY topic LIMIT 3",
                 str(DIR_FILES[0])]) == 0
    out = capsys.readouterr().out
    assert "corp/plain/q1" in out and "a-sub-q1" in out
    assert main(["sql", "SELEC nonsense", str(DIR_FILES[0])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mosqdb sql: SQL error") and err.count("\n") == 1


def test_schema_types_in_spark(spark) -> None:  # type: ignore[no-untyped-def]
    df = load(spark, "msg_store", DIR_FILES[0])
    types = dict(df.dtypes)
    assert types["store_id"] == "bigint" and types["payload"] == "binary" and types["expiry_ts"] == "timestamp"
    assert types["properties"].startswith("array<struct<id:int,name:string")
    assert Counter(r["db_version"] for r in df.select("db_version").collect()) == {3: 26}
    narrow = load(spark, "msg_store", DIR_FILES[0], columns="topic,qos")
    assert narrow.columns == ["topic", "qos"]
    assert sorted(tuple(r) for r in narrow.collect()) == sorted(tuple(r) for r in df.select("topic", "qos").collect())


def test_text_that_is_not_utf8_reaches_spark_with_its_bytes(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from support.dbfiles import not_utf8_db

    path = not_utf8_db(tmp_path / "bad.db")
    rows = {r["store_id"]: r for r in load(spark, "msg_store", path).collect()}
    assert rows[1]["invalid_utf8"] is None
    assert rows[2]["topic"] == "t/\ufffd\ufffdok"
    assert [(i["field"], bytes(i["bytes"])) for i in rows[2]["invalid_utf8"]] == [
        ("topic", b"t/\xff\xfeok"), ("properties[0].key", b"k\xc3"), ("properties[1].value", b"t/\xff\xfeok")]


def test_a_user_schema_is_a_projection(spark) -> None:  # type: ignore[no-untyped-def]
    """PySpark's Python data source API tells a source no required columns: a schema given by the user says them."""
    full = load(spark, "msg_store", REAL).select("file", "chunk_index", "qos", "retain", "expiry_ts")
    narrow = spark.read.format("mosquitto").option("kind", "msg_store") \
        .schema("file string, chunk_index bigint, qos smallint, retain smallint, expiry_ts timestamp").load(str(REAL))
    assert narrow.columns == ["file", "chunk_index", "qos", "retain", "expiry_ts"]
    assert sorted(tuple(r) for r in narrow.collect()) == sorted(tuple(r) for r in full.collect())
    assert narrow.groupBy("qos", "retain").count().collect() != []
    bad = spark.read.format("mosquitto").option("kind", "msg_store").schema("qos smallint, colour string").load(str(REAL))
    with pytest.raises(Exception, match="the schema names 'colour', which msg_store has not"):
        bad.collect()
