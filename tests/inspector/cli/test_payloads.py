"""Payload decoding in ``dump --json`` and ``export`` on a file Debian's Mosquitto wrote: Sparkplug B
payloads made by pysparkplug, CBOR by cbor2, a protobuf message by the protobuf runtime, JSON and
gzip-wrapped JSON, retained and queued. Every decoded value is compared with what the independent
library reads from the same bytes."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pyarrow.parquet as pq
import pytest

from support.brokers import have_mosquitto
from support.cli import run
from support.payload_traffic import Made, independent_sparkplug, make_payload_db

pytestmark = [pytest.mark.broker, pytest.mark.skipif(not have_mosquitto(), reason="mosquitto not installed")]
pytest.importorskip("pysparkplug")
pytest.importorskip("cbor2")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    return make_payload_db(tmp_path_factory.mktemp("payloads"))


def decode_args(made: Made) -> list[str]:
    return ["--proto", str(made.desc), "--decode", "sensors/proto/#=demo.Reading", "--decode", "auto"]


def same_type(a: str | None, b: str) -> bool:
    return a is not None and a.replace("_", "").lower() == b.replace("_", "").lower()


def independent(made: Made, sent: Any) -> Any:
    """The value a reference library reads from the payload (in our JSON conventions: bytes as base64)."""
    if sent.kind == "cbor":
        import cbor2

        v = cbor2.loads(sent.payload)
        return {k: base64.b64encode(x).decode() if isinstance(x, bytes) else x for k, x in v.items()}
    if sent.kind == "json":
        return json.loads(sent.payload)
    if sent.kind == "gzip-json":
        return json.loads(gzip.decompress(sent.payload))
    if sent.kind == "protobuf":
        from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

        pool = descriptor_pool.DescriptorPool()
        for f in descriptor_pb2.FileDescriptorSet.FromString(made.desc.read_bytes()).file:
            pool.Add(f)
        msg = message_factory.GetMessageClass(pool.FindMessageTypeByName("demo.Reading")).FromString(sent.payload)
        return json_format.MessageToDict(msg, preserving_proto_field_name=True)
    raise AssertionError(sent.kind)


def test_dump_json_decodes_every_format_as_the_reference_libraries_do(made: Made) -> None:
    out = run("dump", made.db, "--json", "--type", "msg_store", *decode_args(made), ok=True).stdout
    rows = {(r["topic"], base64.b64decode(r["payload_b64"])): r for r in map(json.loads, out.splitlines())}
    assert len(rows) == len(made.sent)  # every publish is a stored message the broker persisted
    births: dict[tuple[str, ...], Any] = {}
    formats = {}
    for sent in made.sent:
        row = rows[(sent.topic, sent.payload)]
        assert row["payload_error"] is None, row
        formats[sent.kind] = row["payload_format"]
        if sent.kind != "sparkplug":
            assert row["payload_decoded"] == independent(made, sent), sent.topic
            continue
        theirs = independent_sparkplug(sent.topic, sent.payload, births)
        ours = row["payload_decoded"]["metrics"]
        assert row["payload_decoded"]["seq"] == theirs[0]["seq"]
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs, strict=True):
            assert o["alias"] == t["metric_alias"] and o["timestamp"] == t["timestamp"]
            if o["datatype"] is not None:  # a data message may leave names and datatypes to its birth
                assert same_type(o["datatype"], t["datatype"]) and o["value"] == t["value"], (sent.topic, o, t)
                assert o["name"] == t["metric_name"]
    assert formats == {"sparkplug": "sparkplug", "cbor": "cbor", "protobuf": "protobuf:demo.Reading",
                       "json": "json", "gzip-json": "gzip+json"}
    assert rows[("sensors/proto/1", next(
        s.payload for s in made.sent if s.kind == "protobuf"))]["payload_rule"] == "--decode sensors/proto/#=demo.Reading"


def test_dump_without_decoding_is_unchanged(made: Made) -> None:
    plain = run("dump", made.db, "--json", ok=True).stdout
    assert "payload_format" not in plain
    decoded = run("dump", made.db, "--json", "--decode", "auto", ok=True).stdout
    for a, b in zip(plain.splitlines(), decoded.splitlines(), strict=True):
        ra, rb = json.loads(a), json.loads(b)
        extra = {k: rb.pop(k) for k in list(rb) if k.startswith("payload_") and k != "payload_b64"}
        assert ra == rb
        assert set(extra) == (set() if ra["type"] != "msg_store" else
                              {"payload_format", "payload_rule", "payload_decoded", "payload_error"})


def metric_rows_by_independent_library(made: Made) -> list[dict[str, Any]]:
    births: dict[tuple[str, ...], Any] = {}
    out = []
    for sent in made.sent:
        if sent.kind == "sparkplug":
            for r in independent_sparkplug(sent.topic, sent.payload, births):
                out.append({"topic": sent.topic, **r})
    return out


def comparable(rows: list[dict[str, Any]], ours: bool = True) -> list[tuple[Any, ...]]:
    """Rows as sortable tuples; ours hold the value as JSON text."""
    out = []
    for r in rows:
        value = json.loads(r["value"]) if ours else r["value"]
        out.append((r["topic"], r["seq"], r["metric_name"], r["metric_alias"], r["datatype"].replace("_", "").lower(),
                    json.dumps(value), r["timestamp"]))
    return sorted(out)


def test_export_parquet_sparkplug_metrics_equal_the_independent_decoding(made: Made, tmp_path) -> None:
    out = tmp_path / "ds"
    run("export", made.db, "--to", "parquet", "-o", out, *decode_args(made), "-q", ok=True)
    metrics = pq.read_table(out / "sparkplug_metrics.parquet").to_pylist()
    assert comparable(metrics) == comparable(metric_rows_by_independent_library(made), ours=False)
    assert {r["group_id"] for r in metrics} == {"plant-7"} and {r["edge_node_id"] for r in metrics} == {"edge-α"}
    assert {r["message_type"] for r in metrics} == {"NBIRTH", "DBIRTH", "NDATA", "DDATA"}
    assert any(r["name_from_birth"] for r in metrics)
    stores = pq.read_table(out / "msg_store.parquet").to_pylist()
    by_id = {r["store_id"]: r for r in stores}
    assert {r["store_id"] for r in metrics} <= set(by_id)
    for sent in made.sent:
        row = next(r for r in stores if r["topic"] == sent.topic and r["payload"] == sent.payload)
        if sent.kind != "sparkplug":
            assert json.loads(row["payload_json"]) == independent(made, sent)
    messages = pq.read_table(out / "messages.parquet")
    assert messages.schema.names[-2:] == ["payload_format", "payload_json"]
    # a payload's metrics share its topic row after row: plain pages (half a dictionary's size), a dictionary for
    # the handful of message types and payload formats
    meta = pq.ParquetFile(out / "sparkplug_metrics.parquet").metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert "RLE_DICTIONARY" not in encodings["topic"] and "RLE_DICTIONARY" in encodings["message_type"]
    meta = pq.ParquetFile(out / "msg_store.parquet").metadata.row_group(0)
    assert "RLE_DICTIONARY" in next(meta.column(i).encodings for i in range(meta.num_columns)
                                    if meta.column(i).path_in_schema == "payload_format")


def test_a_sqlite_stores_metrics_take_names_from_its_births_as_the_dbs_do(made: Made, tmp_path) -> None:
    """Mosquitto 2.1's store reads back newest first (the data before its births): the export reads the births
    first there too, so the metrics rows equal the .db's."""
    store = tmp_path / "mosquitto.sqlite3"
    run("migrate", made.db, "--to", f"sqlite:{store}", "-q", ok=True)
    rows = {}
    for name, src in (("db", made.db), ("store", store)):
        run("export", src, "--to", "parquet", "-o", tmp_path / name, *decode_args(made), "-q", ok=True)
        got = pq.read_table(tmp_path / name / "sparkplug_metrics.parquet").drop(["file", "chunk_index", "chunk_offset"])
        rows[name] = sorted(got.to_pylist(), key=lambda r: (r["store_id"], str(r["metric_alias"]), str(r["metric_name"])))
    assert any(r["name_from_birth"] for r in rows["store"])
    assert rows["store"] == rows["db"]


def test_the_metrics_table_alone(made: Made, tmp_path) -> None:
    """``--kind sparkplug_metrics``: the metrics rows alone, as one Parquet file or JSON Lines, the dataset's table; a
    selection keeps the metrics of the stored messages it keeps; without --decode, one line and nothing written."""
    run("export", made.db, "--to", "parquet", "-o", tmp_path / "ds", *decode_args(made), "-q", ok=True)
    want = pq.read_table(tmp_path / "ds" / "sparkplug_metrics.parquet")
    alone = tmp_path / "m.parquet"
    run("export", made.db, "--to", "parquet", "-o", alone, "--kind", "sparkplug_metrics", *decode_args(made), "-q",
        ok=True)
    assert want.num_rows and pq.read_table(alone).equals(want)
    lines = tmp_path / "m.jsonl"
    run("export", made.db, "--to", "jsonl", "-o", lines, "--kind", "sparkplug_metrics", *decode_args(made), "-q",
        ok=True)
    rows = [json.loads(line) for line in lines.read_text().splitlines()]
    assert {r["type"] for r in rows} == {"sparkplug_metrics"} and len(rows) == want.num_rows
    some = tmp_path / "d.parquet"
    run("export", made.db, "--to", "parquet", "-o", some, "--kind", "sparkplug_metrics", "--topic", "spBv1.0/+/DDATA/#",
        *decode_args(made), "-q", ok=True)
    got = pq.read_table(some)
    assert got.num_rows and set(got.column("message_type").to_pylist()) == {"DDATA"}
    r = run("export", made.db, "--to", "parquet", "-o", tmp_path / "x.parquet", "--kind", "sparkplug_metrics")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--decode" in r.stderr, r.stderr
    assert not (tmp_path / "x.parquet").exists()


def test_export_jsonl_has_the_same_columns_and_metrics(made: Made, tmp_path) -> None:
    out = tmp_path / "x.jsonl"
    run("export", made.db, "--to", "jsonl", "-o", out, *decode_args(made), "-q", ok=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    metrics = [r for r in rows if r["type"] == "sparkplug_metrics"]
    assert comparable(metrics) == comparable(metric_rows_by_independent_library(made), ours=False)
    stores = [r for r in rows if r["type"] == "msg_store"]
    assert all(r["payload_format"] is not None and r["payload_json"] is not None for r in stores)


def test_plain_export_has_no_payload_columns(made: Made, tmp_path) -> None:
    run("export", made.db, "--to", "parquet", "-o", tmp_path / "ds", "-q", ok=True)
    assert not (tmp_path / "ds" / "sparkplug_metrics.parquet").exists()
    assert "payload_json" not in pq.read_schema(tmp_path / "ds" / "msg_store.parquet").names


def test_a_payload_that_is_not_as_declared_is_a_finding_not_an_error(made: Made, tmp_path) -> None:
    r = run("export", made.db, "--to", "parquet", "-o", tmp_path / "ds", "--decode", "sensors/#=msgpack",
            "--decode", "spBv1.0/#=json", "-q")
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert any("topic 'spBv1.0/plant-7/NBIRTH/edge-α': payload is not json" in w and "store " in w
               and "chunk at offset" in w for w in warnings), r.stderr
    stores = pq.read_table(tmp_path / "ds" / "msg_store.parquet").to_pylist()
    spb_rows = [s for s in stores if s["topic"].startswith("spBv1.0/")]
    assert spb_rows and all(s["payload_format"] == "json" and s["payload_json"] is None for s in spb_rows)


def test_bad_decode_options_are_one_line(made: Made) -> None:
    r = run("dump", made.db, "--json", "--decode", "a/#=nosuch")
    assert r.returncode == 2 and "unknown payload format 'nosuch'" in r.stderr and "Traceback" not in r.stderr
    r = run("dump", made.db, "--json", "--proto", made.db, "--decode", "a/#=demo.X")  # the file named as given
    assert r.returncode == 2 and f"{made.db}: not a protobuf descriptor set" in r.stderr
    r = run("dump", made.db, "--json", "--proto", made.desc, "--decode", "a/#=demo.Nope")
    assert r.returncode == 2 and f"{made.desc}: no message 'demo.Nope'" in r.stderr and "demo.Reading" in r.stderr
    r = run("inspect", made.db, "--decode", "a/#=bogus")  # refused before the screen opens
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run("dump", made.db, "--decode", "auto")
    assert r.returncode == 2 and "--json" in r.stderr


def test_the_births_an_export_reads_first_are_the_engines(made: Made) -> None:
    """prime() finds the births of a whole .db on their topic bytes alone: the same stored messages the columnar
    engine picks by their topic filters."""
    from codec.payloads.sparkplug import BIRTH_TOPICS
    from codec.sources import open_any
    from codec.views.query import Selection
    from codec.views.select import pick
    from exporters.payloads import _birth_rows

    with open_any(str(made.db)) as db:
        rows = _birth_rows(db)
        if rows is None:
            pytest.skip("the native Sparkplug reader is not built (setup.py build_ext --inplace, with protoc)")
        want = pick(db, Selection(kinds={"msg_store"}, topics=list(BIRTH_TOPICS))).before_stop()
    assert len(want) > 0
    assert rows.tolist() == want.tolist()
