"""A short command's start: small inputs' views made in the driver from Arrow (the same schema and rows, in the
same order, as the data source), the driver JVM's class archive, the workers' daemon with mosqdb imported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.paths import REAL

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

import exporters.spark as xs  # noqa: E402
from exporters.schema import KINDS  # noqa: E402
from exporters.spark.frames import driver_frames  # noqa: E402

FILES = [str(p) for p in sorted(REAL.glob("*.db"))]



def _views(spark, files: list[str], only: list[str], driver_bytes: int) -> dict[str, tuple[Any, list[Any]]]:  # type: ignore[no-untyped-def]
    xs.register_views(spark, files, only=only, driver_bytes=driver_bytes)
    out = {}
    for view in only:
        df = spark.table(view)
        out[view] = (df.schema, df.collect())
    return out


def test_every_kind_same_schema_and_rows_as_the_data_source(spark) -> None:  # type: ignore[no-untyped-def]
    files = [*FILES, FILES[0]]  # several versions, one twice: packing decides the order of the rows
    made = driver_frames(spark, files, list(KINDS))
    assert made is not None and set(made) == set(KINDS)
    for kind in KINDS:
        source = spark.read.format("mosquitto").option("kind", kind).load(",".join(files))
        assert made[kind].schema == source.schema, kind
        got, want = made[kind].collect(), source.collect()
        assert want and got == want, kind


def test_register_views_messages_view_same_either_way(spark) -> None:  # type: ignore[no-untyped-def]
    only = ["messages", "client", "retain"]
    small = _views(spark, FILES, only, xs.frames.DRIVER_BYTES)
    plans = {v: spark.table(v)._jdf.queryExecution().analyzed().toString() for v in only}
    assert not any("RelationV2" in p for p in plans.values()), plans  # no scan of the data source
    forced = _views(spark, FILES, only, 0)  # every input over the limit: the data source
    plans = {v: spark.table(v)._jdf.queryExecution().analyzed().toString() for v in only}
    assert all("RelationV2" in p and " mosquitto" in p for p in plans.values()), plans
    for view in only:
        assert small[view][0] == forced[view][0], view
        assert sorted(map(str, small[view][1])) == sorted(map(str, forced[view][1])), view
        assert small[view][1], view


def test_a_chunk_that_does_not_decode_leaves_it_to_the_data_source(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from codec import DbFile

    src = REAL / "2.0.20-a.db"
    with DbFile(src) as db:  # a store's first property id made unknown: the header walk passes, decoding fails
        target = next(c for c in db.stream(spans=True) if c.kind == "msg_store" and c.record["properties"])
        props = next(s for s in target.spans if s.name == "properties")
    bad = tmp_path / "bad-props.db"
    data = bytearray(src.read_bytes())
    data[target.body_offset + props.offset + 1] = 0x7F
    bad.write_bytes(bytes(data))
    assert driver_frames(spark, [str(bad)], ["msg_store"]) is None
    xs.register_views(spark, [str(bad)], only=["msg_store"])
    with pytest.raises(Exception, match="properties"):  # the data source's error, at query time as before
        spark.table("msg_store").collect()


def test_class_archive_saved_once_then_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import tempfile

    sess = importlib.import_module("exporters.spark.session")  # the module (exporters.spark.session is also a function)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("MOSQDB_SPARK_CDS", raising=False)
    opts, part = sess._class_archive()
    assert part is not None and f"-XX:ArchiveClassesAtExit={part}" in opts and part.startswith(str(tmp_path))
    assert "-Xlog:disable" in opts  # the JVM's own warnings never reach the command's stdout
    final = part.rsplit(".", 2)[0]
    Path(final).write_bytes(b"\0" * 16)  # what the first run leaves
    opts, part = sess._class_archive()
    assert part is None and f"-XX:SharedArchiveFile={final}" in opts and "-Xshare:auto" in opts
    monkeypatch.setenv("MOSQDB_SPARK_CDS", "off")
    assert sess._class_archive() == ("", None)


def test_worker_daemon_only_when_the_workers_import_this_code(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import os
    import sys

    import exporters

    sess = importlib.import_module("exporters.spark.session")
    root = os.path.dirname(os.path.dirname(os.path.abspath(exporters.__file__)))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/nonexistent", root]))
    assert sess._workers_import_us()
    monkeypatch.setenv("PYTHONPATH", "/nonexistent")  # only this process's sys.path has it: a worker would not
    assert not sess._workers_import_us()  # (a checkout, not installed into site-packages)
    monkeypatch.setenv("PYTHONPATH", root)
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/false")  # another Python
    assert not sess._workers_import_us()


def test_spark_schemas_made_in_python_are_the_ddl_parsed_by_spark(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql.types import _parse_datatype_string

    from exporters.schema import SCHEMAS, spark_ddl
    from exporters.spark.cache import stored_schema
    from exporters.spark.structs import spark_struct

    schemas = {**SCHEMAS, **{f"stored {k}": stored_schema(k) for k in KINDS}}
    for name, schema in schemas.items():
        assert spark_struct(schema) == _parse_datatype_string(spark_ddl(schema)), name


@pytest.mark.parametrize("selection", [{}, {"topic": "corp/#"}, {"store_ids": (0, 40)}, {"client": "a-sub-q1"}],
                         ids=lambda s: ",".join(s) or "all")
def test_messages_joined_in_the_driver_equal_the_spark_join(spark, selection) -> None:  # type: ignore[no-untyped-def]
    """Small inputs' ``messages`` view is one Arrow table joined in the driver; the data source's is Spark's join
    of three kinds: the same schema, and the same rows with every message's clients in file order."""
    auto = xs.to_dataframe(spark, FILES, "messages", cache="auto", **selection)
    plan = auto._jdf.queryExecution().analyzed().toString()
    assert "RelationV2" not in plan, plan  # no scan of the data source
    assert "client" in selection or "Join" not in plan, plan  # (a client's messages: one semi-join on top)
    off = xs.to_dataframe(spark, FILES, "messages", cache="off", **selection)
    assert auto.schema == off.schema
    got, want = auto.collect(), off.collect()
    assert want and sorted(map(str, got)) == sorted(map(str, want))
    assert any(len(r["clients"]) > 1 for r in got) or selection


def test_the_first_run_saves_the_class_archive_and_no_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine's first ``mosqdb sql`` ends its JVM at exit while it writes the class archive: Spark is stopped
    first, so the accumulator server's reader (connected once Python tasks ran: decoded payloads) does not meet the
    closed socket and print an EOFError traceback after the output."""
    from support.cli import run

    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a fresh cache directory: the archive is made on this run
    monkeypatch.delenv("MOSQDB_SPARK_CDS", raising=False)
    r = run("sql", "SELECT count(*) AS n FROM msg_store", FILES[-1], "--decode", "auto", "--json", ok=True)
    assert r.stdout.strip().startswith('{"n":') and "Traceback" not in r.stderr, r.stderr
    assert list(tmp_path.glob("mosqdb-*/mosqdb-spark-cds-*.jsa"))  # saved, whole, under its final name
