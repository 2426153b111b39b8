"""Decoded payloads through Spark: the data source's payload columns and sparkplug_metrics kind, the
views `mosqdb sql --decode` registers, on a file Debian's Mosquitto wrote from pysparkplug's payloads."""

from __future__ import annotations

import json

import pytest

from support.brokers import have_mosquitto
from support.cli import run
from support.payload_traffic import Made, independent_sparkplug, make_payload_db

pytest.importorskip("pyspark")
pytest.importorskip("pysparkplug")
pytestmark = [pytest.mark.spark, pytest.mark.broker,
              pytest.mark.skipif(not have_mosquitto(), reason="mosquitto not installed")]

import exporters.spark as xs  # noqa: E402


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    return make_payload_db(tmp_path_factory.mktemp("spark-payloads"))


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    session = xs.local_session("local[2]", app="mosqdb-payload-tests")
    yield session
    session.stop()


def expected_metrics(made: Made) -> list[tuple]:  # type: ignore[type-arg]
    births: dict = {}  # type: ignore[type-arg]
    out = []
    for sent in made.sent:
        if sent.kind == "sparkplug":
            for r in independent_sparkplug(sent.topic, sent.payload, births):
                out.append((sent.topic, r["metric_name"], r["metric_alias"], r["datatype"].replace("_", "").lower(),
                            json.dumps(r["value"]), r["timestamp"]))
    return sorted(out)


def got_metrics(rows) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    return sorted((r["topic"], r["metric_name"], r["metric_alias"], r["datatype"].lower(),
                   json.dumps(json.loads(r["value"])), r["timestamp"]) for r in rows)


def test_data_source_sparkplug_metrics_and_payload_columns(spark, made: Made) -> None:  # type: ignore[no-untyped-def]
    df = spark.read.format("mosquitto").option("kind", "sparkplug_metrics").load(str(made.db))
    assert got_metrics(df.collect()) == expected_metrics(made)
    stores = (spark.read.format("mosquitto").option("kind", "msg_store").option("decode", "auto")
              .load(str(made.db)).collect())
    formats = {r["topic"]: r["payload_format"] for r in stores}
    assert formats.pop("sensors/proto/1") is None  # auto never guesses a protobuf message
    assert set(formats.values()) == {"sparkplug", "cbor", "json", "gzip+json"}
    by_topic = {r["topic"]: r for r in stores}
    assert json.loads(by_topic["sensors/json/1"]["payload_json"]) == {"id": 7, "temp": 21.5, "tags": ["a", "b"],
                                                                      "ok": True}
    plain = spark.read.format("mosquitto").option("kind", "msg_store").load(str(made.db))
    assert "payload_json" not in plain.columns


def test_register_views_has_the_sparkplug_metrics_view(spark, made: Made) -> None:  # type: ignore[no-untyped-def]
    from exporters.spark.frames import decode_options

    xs.register_views(spark, [str(made.db)], decode=decode_options(["auto"]))
    rows = spark.sql("SELECT * FROM sparkplug_metrics").collect()
    assert got_metrics(rows) == expected_metrics(made)
    joined = spark.sql("SELECT topic, payload_format FROM messages WHERE payload_format = 'sparkplug'").collect()
    assert len(joined) == sum(s.kind == "sparkplug" for s in made.sent)


def test_mosqdb_sql_decode(made: Made) -> None:
    r = run("sql", "SELECT metric_name, value FROM sparkplug_metrics WHERE message_type = 'NDATA' ORDER BY value",
            made.db, "--json", "--decode", "auto", timeout=600)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert {x["metric_name"] for x in rows} == {"temperature", "offset"}
    assert sorted(json.loads(x["value"]) for x in rows if x["metric_name"] == "offset") == [-4, -3, -2, -1]


def test_a_sqlite_store_reads_as_its_db(spark, made: Made, tmp_path_factory: pytest.TempPathFactory) -> None:  # type: ignore[no-untyped-def]
    """The data source reads a Mosquitto 2.1 store (the .db migrated) in parts of a few rows as it reads the .db:
    its sparkplug_metrics rows name the metrics as the independent library does (births read first: a store reads
    back newest first), its stored messages decode alike."""
    store = tmp_path_factory.mktemp("spark-store") / "mosquitto.sqlite3"
    run("migrate", made.db, "--to", f"sqlite:{store}", "-q", ok=True)
    df = spark.read.format("mosquitto").option("kind", "sparkplug_metrics").option("partitionRows", "3").load(str(store))
    assert df.rdd.getNumPartitions() > 1 and got_metrics(df.collect()) == expected_metrics(made)

    def decoded(path: object) -> list[tuple]:  # type: ignore[type-arg]
        rows = (spark.read.format("mosquitto").option("kind", "msg_store").option("decode", "auto")
                .option("partitionRows", "3").load(str(path))
                .select("store_id", "topic", "payload", "payload_format", "payload_json").collect())
        return sorted(tuple(r) for r in rows)

    assert decoded(store) == decoded(made.db) and len(decoded(store)) == len(made.sent)
