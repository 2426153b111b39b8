"""The Parquet cache of the Spark side: entries keyed by the file's identity in the private cache directory, stale
or damaged ones rebuilt, and DataFrames read through it (Spark's Parquet reader) equal to the data source's; small
inputs read in the driver as a snapshot."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support.paths import REAL, V3, V5, V6

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

import exporters.spark as xs  # noqa: E402
from codec import DbFile, safefile  # noqa: E402
from exporters.arrow import iter_batches  # noqa: E402
from exporters.schema import KINDS  # noqa: E402
from exporters.spark import cache  # noqa: E402

FILES = [str(p) for p in sorted(REAL.glob("*.db"))]



@pytest.fixture
def private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache directory of this test's own (``$TMPDIR/mosqdb-<uid>`` under a temp TMPDIR)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return Path(safefile.user_cache_dir())


def _copy(tmp_path: Path, src: Path, name: str = "copy.db") -> str:
    dst = tmp_path / name
    shutil.copyfile(src, dst)
    return str(dst)


def _stores(path: Path) -> int:
    with DbFile(path) as db:
        return sum(b.num_rows for b in iter_batches(db, "msg_store"))


def _entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(cache.PREFIX))


# ---------------------------------------------------------------- entries


def test_an_entry_is_made_once_and_holds_its_key(tmp_path: Path, private: Path) -> None:
    db = _copy(tmp_path, V6)
    first = cache.entry(db, "msg_store")
    assert first is not None and os.path.dirname(first) == str(private)
    ino = os.stat(first).st_ino
    assert cache.entry(db, "msg_store") == first and os.stat(first).st_ino == ino  # reused, not rewritten
    schema = pq.read_schema(first)
    assert schema.metadata[cache.KEY] == cache.entry_key(db, "msg_store", cache.identities(db)).encode()
    assert "expired" not in schema.names and pq.read_metadata(first).num_rows == 31
    assert os.stat(first).st_mode & 0o777 == 0o600
    assert not any(p.name.endswith(".tmp") for p in private.iterdir())
    assert set(os.listdir(tmp_path)) == {"copy.db", "tmp"}  # nothing beside the user's file


def test_a_changed_file_gets_a_new_entry(tmp_path: Path, private: Path) -> None:
    db = _copy(tmp_path, V6)
    old = cache.entry(db, "msg_store")
    shutil.copyfile(V3, db)  # same path and inode, other contents
    new = cache.entry(db, "msg_store")
    assert new is not None and new != old
    assert pq.read_metadata(new).num_rows == _stores(V3) != _stores(V6)
    st = os.stat(db)
    os.utime(db, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # a touch only: still another version
    assert cache.entry(db, "msg_store") not in (old, new)


@pytest.mark.parametrize("damage", ["truncated", "foreign", "link", "garbage"])
def test_a_damaged_or_foreign_entry_is_rebuilt(tmp_path: Path, private: Path, damage: str) -> None:
    db = _copy(tmp_path, V6)
    path = cache.entry(db, "client_msg")
    assert path is not None
    good = pq.read_table(path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"not yours")
    if damage == "truncated":
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    elif damage == "foreign":  # a valid Parquet of the right schema with another key
        other = good.replace_schema_metadata({cache.KEY: b"{}"})
        os.unlink(path)
        pq.write_table(other, path)
        os.chmod(path, 0o600)
    elif damage == "link":
        os.unlink(path)
        os.symlink(victim, path)
    else:
        Path(path).write_bytes(b"PAR1" * 10)
    assert not cache.valid(path, cache.entry_key(db, "client_msg", cache.identities(db)), "client_msg")
    again = cache.entry(db, "client_msg")
    assert again == path and not os.path.islink(path)
    assert pq.read_table(path).equals(good)
    assert victim.read_bytes() == b"not yours"


def test_a_file_that_does_not_decode_or_changes_while_copied_has_no_entry(tmp_path: Path, private: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    torn = tmp_path / "torn.db"
    data = V6.read_bytes()
    torn.write_bytes(data[: len(data) - 7])
    assert cache.entry(str(torn), "msg_store") is None
    db = _copy(tmp_path, V6)
    real = cache._write

    def write_then_touch(*args: Any) -> int:
        rows = real(*args)
        with open(db, "ab") as f:  # the broker saves meanwhile
            f.write(b"\0")
        return rows

    monkeypatch.setattr(cache, "_write", write_then_touch)
    assert cache.entry(db, "msg_store") is None
    assert _entries(private) == [] and not any(p.name.endswith(".tmp") for p in private.iterdir())


def test_least_recently_used_entries_go_past_the_limit(tmp_path: Path, private: Path) -> None:
    dbs = [_copy(tmp_path, V6, f"{i}.db") for i in range(3)]
    made = [cache.entry(db, "msg_store") for db in dbs]
    size = os.path.getsize(made[0])  # same contents, same path length: about the same size
    for n, path in enumerate(made):
        os.utime(path, (1000 + n, 1000 + n))
    cache.entry(dbs[1], "msg_store")  # used again: now the most recent
    fourth = cache.entry(_copy(tmp_path, V6, "3.db"), "msg_store", limit=int(size * 2.5))
    assert fourth is not None
    assert _entries(private) == sorted(os.path.basename(p) for p in (made[1], fourth))


def _store_with_wal(tmp_path: Path) -> tuple[str, int]:
    """A copy of the 2.1.2 store whose ``-wal`` holds a committed delete (as a broker killed before its checkpoint
    leaves it), and the stored messages left."""
    import sqlite3

    from support.paths import INCOMING

    live = _copy(tmp_path, INCOMING / "2.1.2-a.sqlite3", "live.sqlite3")
    con = sqlite3.connect(live)
    try:
        con.execute("PRAGMA wal_autocheckpoint=0")
        con.execute("DELETE FROM base_msgs WHERE rowid = (SELECT max(rowid) FROM base_msgs)")
        con.commit()
        left = con.execute("SELECT count(*) FROM base_msgs").fetchone()[0]
        crashed = _copy(tmp_path, Path(live), "crashed.sqlite3")
        shutil.copyfile(f"{live}-wal", f"{crashed}-wal")
    finally:
        con.close()
    return crashed, left


def test_a_store_has_entries_and_its_wal_is_part_of_their_key(tmp_path: Path, private: Path) -> None:
    from codec.sources import open_any

    from support.paths import INCOMING

    store, left = _store_with_wal(tmp_path)
    with_wal = cache.entry(store, "msg_store")
    assert with_wal is not None and pq.read_metadata(with_wal).num_rows == left  # the -wal's delete is in it
    with open_any(store) as db:
        assert pq.read_table(with_wal).equals(pa.Table.from_batches(
            [b.select(cache.stored_schema("msg_store").names) for b in iter_batches(db, "msg_store")]).replace_schema_metadata(
            pq.read_schema(with_wal).metadata))
    assert cache.entry(store, "msg_store") == with_wal  # reused
    os.unlink(f"{store}-wal")  # the log gone (or checkpointed elsewhere): another version of the store
    without = cache.entry(store, "msg_store")
    assert without not in (None, with_wal) and pq.read_metadata(without).num_rows == left + 1
    with open_any(INCOMING / "2.1.2-a.sqlite3") as db:
        assert left + 1 == sum(b.num_rows for b in iter_batches(db, "msg_store"))
    assert sorted(os.listdir(tmp_path)) == ["crashed.sqlite3", "live.sqlite3", "tmp"]  # nothing beside them


def test_a_store_whose_wal_changes_while_copied_has_no_entry(tmp_path: Path, private: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store, _left = _store_with_wal(tmp_path)
    real = cache._write

    def write_then_log(*args: Any) -> int:
        rows = real(*args)
        with open(f"{store}-wal", "ab") as f:  # the broker commits meanwhile: only the -wal changes
            f.write(b"\0" * 8)
        return rows

    monkeypatch.setattr(cache, "_write", write_then_log)
    assert cache.entry(store, "msg_store") is None
    assert _entries(private) == []


# ---------------------------------------------------------------- DataFrames through the cache


def _rows(df: Any) -> list[str]:
    return sorted(repr(r) for r in df.collect())


def _types(df: Any) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in df.schema]


@pytest.mark.parametrize("kind", [*KINDS, "messages"])
def test_parquet_frames_equal_the_data_source(spark, private: Path, kind: str) -> None:  # type: ignore[no-untyped-def]
    source = xs.to_dataframe(spark, FILES, kind, cache="off")
    cached = xs.to_dataframe(spark, FILES, kind, cache="parquet")
    assert _types(cached) == _types(source)
    assert _rows(cached) == _rows(source)
    plan = spark.sparkContext._jvm.PythonSQLUtils.explainString(cached._jdf.queryExecution(), "simple")
    assert "parquet" in plan.lower() and "mosquitto" not in plan.lower()  # Spark's own reader, no Python source
    assert len(_entries(private)) == len(FILES) * (3 if kind == "messages" else 1)


@pytest.mark.parametrize("kind", ["msg_store", "client", "messages"])
def test_a_stores_parquet_frames_equal_the_data_source(spark, tmp_path: Path, private: Path,  # type: ignore[no-untyped-def]
                                                       kind: str) -> None:
    store, _left = _store_with_wal(tmp_path)
    source = xs.to_dataframe(spark, store, kind, cache="off")
    cached = xs.to_dataframe(spark, store, kind, cache="parquet")
    assert _types(cached) == _types(source) and _rows(cached) == _rows(source)
    plan = spark.sparkContext._jvm.PythonSQLUtils.explainString(cached._jdf.queryExecution(), "simple")
    assert "parquet" in plan.lower() and "mosquitto" not in plan.lower()


def test_expired_is_computed_when_the_query_runs(spark, private: Path) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    df = xs.to_dataframe(spark, str(V6), "msg_store", cache="parquet")
    rows = df.where("expires_at IS NOT NULL").select("expires_at", "expired").collect()
    assert rows, "the v6 fixture has messages with an expiry"
    now = spark.range(1).select(F.current_timestamp()).collect()[0][0]
    assert all(r["expired"] == (r["expires_at"] <= now) for r in rows)
    assert df.where("expires_at IS NULL AND expired").count() == 0


def test_sql_views_through_the_cache(spark, private: Path) -> None:  # type: ignore[no-untyped-def]
    query = "SELECT file, count(*) AS n, sum(length(payload)) AS b FROM msg_store GROUP BY file"
    xs.register_views(spark, FILES, only=["msg_store"], driver_bytes=0, cache=False)
    want = _rows(spark.sql(query))
    xs.register_views(spark, FILES, only=["msg_store"], driver_bytes=0, cache=True)
    assert _rows(spark.sql(query)) == want
    assert len(_entries(private)) == len(FILES)


def test_a_file_the_cache_cannot_take_is_read_by_the_data_source(spark, tmp_path: Path, private: Path) -> None:  # type: ignore[no-untyped-def]
    torn = tmp_path / "torn.db"
    data = V6.read_bytes()
    torn.write_bytes(data[: len(data) - 7])  # the index stops short: the data source skips the rest
    df = xs.to_dataframe(spark, [str(V5), str(torn)], "msg_store", cache="parquet", on_error="skip")
    want = xs.to_dataframe(spark, [str(V5), str(torn)], "msg_store", cache="off", on_error="skip")
    assert _rows(df) == _rows(want)
    assert len(_entries(private)) == 1


def test_bad_cache_mode(spark) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="cache='memory'"):
        xs.to_dataframe(spark, FILES, cache="memory")
    assert cache.applies("local[2]") and cache.applies("local-cluster[2,1,512]")
    assert not cache.applies("spark://127.0.0.1:7077")


# ---------------------------------------------------------------- small inputs in the driver


def test_small_inputs_are_a_snapshot_read_in_the_driver(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = _copy(tmp_path, V6)
    snap = xs.to_dataframe(spark, db, "msg_store")
    live = xs.to_dataframe(spark, db, "msg_store", cache="off")
    plan = spark.sparkContext._jvm.PythonSQLUtils.explainString(snap._jdf.queryExecution(), "simple")
    assert "mosquitto" not in plan.lower()  # no Python data source scan: no Python worker for its queries
    assert _rows(snap) == _rows(live)
    n = snap.count()
    shutil.copyfile(V3, db)
    assert snap.count() == n  # as it was when made
    assert xs.to_dataframe(spark, db, "msg_store").count() == _stores(V3) != n  # a new one reads it as it is now


def test_small_inputs_with_a_selection(spark) -> None:  # type: ignore[no-untyped-def]
    for kind, kw in (("msg_store", {"topic": "corp/plain/#"}), ("client_msg", {"client": "a-sub-q1"}),
                     ("retain", {"store_ids": (0, 60)}), ("messages", {"client": "a-sub-q1", "topic": "corp/#"})):
        snap = xs.to_dataframe(spark, FILES, kind, **kw)
        live = xs.to_dataframe(spark, FILES, kind, cache="off", **kw)
        assert _rows(snap) == _rows(live)


def test_mosqdb_sql_reads_large_inputs_through_the_cache(spark, private: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from inspector.cli import main

    q = "SELECT file, count(*) AS n, max(length(payload)) AS b FROM msg_store GROUP BY file ORDER BY file"
    small = ["--conf", "spark.mosqdb.driverBytes=0", "--json"]  # every input counts as large here
    try:
        assert main(["sql", q, *FILES, *small, "--no-cache"]) == 0
        want = capsys.readouterr().out
        assert _entries(private) == []
        assert main(["sql", q, *FILES, *small]) == 0
        assert capsys.readouterr().out == want
        assert len(_entries(private)) == len(FILES)
    finally:
        spark.conf.unset("spark.mosqdb.driverBytes")
