"""The fleet on Spark: the ``verdicts`` kind and view, and ``mosqdb fleet`` on a real standalone cluster (a master
and two workers), every row equal to the broker model's prediction for that file and release computed here,
in this process, without Spark; and the packing of files into tasks by bytes, as Spark's file sources pack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.cli import run
from support.fleetfiles import make_fleet

AT = 1_800_000_000.0  # the model's "now", the same here and on the executors
RELEASES = ((2, 0, 18), (2, 1, 2))


def expected(path: Path, version: tuple[int, int, int], baseline: tuple[int, int, int] | None) -> dict[str, Any]:
    """What the model says of one file for one release, from its own entry points (``check --broker``'s)."""
    from codec.broker.findings import broker_findings
    from codec.broker.model import predict
    from codec.broker.upgrade import compare
    from codec.errors import CodecError
    from codec.ops.check import check_file
    from codec.reader import DbFile

    try:
        pred = predict(path, version, at=AT)
    except CodecError as exc:  # the model cannot say: the row says so (it does not stop the fleet)
        return {"file": str(path), "release": ".".join(map(str, version)), "verdict": "unreadable",
                "reason": "unreadable", "detail": exc.reason, "errors": 1}
    try:
        with DbFile(path) as db:
            plain = list(check_file(db, at=AT))
    except CodecError:
        plain = []
    findings = broker_findings(plain, pred)
    errors = sum(1 for f in findings if f.severity == "error")
    row = {"file": str(path), "release": ".".join(map(str, version)), "verdict": pred.verdict,
           "starts": pred.starts, "sessions_kept": len(pred.kept), "sessions_dropped": len(pred.dropped),
           "queued": sum(pred.queued.values()), "retained": pred.retained_count, "errors": errors,
           "warnings": len(findings) - errors, "load_seconds": None, "memory_bytes": None,
           # why it fails: the stop rule, else the first error's rule
           "reason": (pred.stop.rule if pred.stop is not None else pred.ignored
                      or next((f.rule for f in findings if f.severity == "error"), None))}
    try:
        from codec.broker import cost
    except ImportError:
        cost = None  # type: ignore[assignment]
    if cost is not None and cost.MODEL.get(cost.line_of(version)):
        c = cost.predict(cost.features_of(path), version)
        row["load_seconds"], row["memory_bytes"] = c.load_seconds, c.memory_bytes
    if baseline is not None and version != baseline:
        plan = compare(predict(path, baseline, at=AT), pred)
        row |= {"loses_data": plan.loses_data, "sessions_lost": len(plan.sessions_lost),
                "retained_lost": len(plan.retained_lost)}
    return row


def check_rows(rows: list[dict[str, Any]], files: list[Path], baseline: tuple[int, int, int] | None) -> None:
    assert len(rows) == len(files) * len(RELEASES)
    got = {(r["file"], r["release"]): r for r in rows}
    assert len(got) == len(rows)  # one row per file × release
    for f in files:
        for v in RELEASES:
            want = expected(f, v, baseline)
            row = got[(str(f), want["release"])]
            assert {k: row[k] for k in want} == want, f


def test_pack_is_sparks_file_packing() -> None:
    from exporters.spark.verdicts import pack

    mib = 1 << 20
    # Spark's example: 128 MiB target, 4 MiB open cost; biggest first, a file that would overflow starts a new one
    sizes = [("a", 100 * mib), ("b", 30 * mib), ("c", 20 * mib), ("d", 2 * mib)]
    assert pack(sizes, max_bytes=128 * mib, open_cost=4 * mib) == [["a"], ["b", "c", "d"]]
    # thousands of small files: few tasks, each under the target; every file once
    small = [(f"f{i}", 50_000) for i in range(2000)]
    groups = pack(small, max_bytes=128 * mib, open_cost=4 * mib, min_partitions=2)
    assert sorted(p for g in groups for p in g) == sorted(p for p, _ in small)
    assert 60 <= len(groups) <= 70  # 2000 × (4 MiB + 50 kB) / 128 MiB
    # few files, many cores: the target shrinks so each core gets some
    assert len(pack([(f"g{i}", 1000) for i in range(20)], min_partitions=4)) == 4
    # a file bigger than the target is alone
    assert ["big"] in pack([("big", 300 * mib), ("s", 1)], max_bytes=128 * mib)


def test_pack_parts_keeps_split_files_apart() -> None:
    from exporters.spark.source import Part, pack_parts

    parts = [Part("/x/big.db", 0, 10 << 20, 0), Part("/x/big.db", 10 << 20, 20 << 20, 5)]
    parts += [Part(f"/x/s{i}.db", 0, 5000, 0) for i in range(30)]
    groups = pack_parts(parts, min_partitions=2)
    assert [parts[0]] in groups and [parts[1]] in groups
    assert len(groups) == 4 and sorted(len(g) for g in groups)[-2:] == [15, 15]
    # a store's part (a range of rows) weighs its rows at the store's bytes a row: 100 MiB here, alone in its task
    store = Part("/x/st.sqlite3", 0, 100, 0, per_row=float(1 << 20))
    groups = pack_parts([store] + parts[2:], max_bytes=64 << 20)
    assert [store] in groups


@pytest.fixture(scope="module")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_fleet(tmp_path_factory.mktemp("small-fleet"), 24, seed=3)


@pytest.mark.spark
def test_sql_verdicts_view_is_the_model(small_fleet: list[Path]) -> None:
    d = small_fleet[0].parent
    r = run("sql", "SELECT * FROM verdicts", d, "--releases", "2.0.18,2.1.2", "--at", str(int(AT)), "--json",
            "--limit", "100000", timeout=900)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    check_rows(rows, small_fleet, None)
    assert {r["verdict"] for r in rows} >= {"loads", "refuses"}  # the fleet has both


@pytest.mark.spark
def test_sql_releases_refused_in_one_line(small_fleet: list[Path]) -> None:
    r = run("sql", "SELECT * FROM verdicts", small_fleet[0], "--releases", "2.0.18,9.9.9")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "9.9.9" in r.stderr, r.stderr


@pytest.mark.spark
def test_fleet_on_the_standalone_cluster(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from support.spark_cluster import StandaloneCluster

    files = make_fleet(tmp_path / "devices", 300, seed=11)
    with StandaloneCluster(tmp_path / "standalone", workers=2, cores=1) as cluster:
        conf = [a for k, v in cluster.driver_conf().items() for a in ("--conf", f"{k}={v}")]
        # a small target so that the 300 files make tasks for both workers
        conf += ["--conf", "spark.sql.files.openCostInBytes=1048576",
                 "--conf", "spark.sql.files.maxPartitionBytes=16777216"]
        r = run("fleet", tmp_path / "devices", "--broker", "2.0.18", "--to", "2.1.2", "--master", cluster.url,
                *conf, "--at", str(int(AT)), "-o", tmp_path / "report", timeout=1800)
        ran = cluster.tasks_by_worker(set(range(100)))
    assert r.returncode == 1, r.stderr  # some devices' files fail
    assert all(ran.values()), ran  # both workers ran tasks
    rows = pq.read_table(tmp_path / "report" / "verdicts.parquet").to_pylist()
    check_rows(rows, files, (2, 0, 18))
    summary = (tmp_path / "report" / "summary.txt").read_text()
    assert summary == r.stdout
    assert summary.startswith("300 file(s), release(s) 2.0.18 and 2.1.2")
    refused = sorted(row["file"] for row in rows if row["release"] == "2.1.2" and row["verdict"] == "refuses")
    assert refused and "Mosquitto 2.1.2: " in summary and f"{len(refused)} refuses" in summary
    assert "Upgrade 2.0.18 → 2.1.2:" in summary


def test_fleet_usage_errors(tmp_path: Path) -> None:
    r = run("fleet", tmp_path, "--broker", "2.0.18")
    assert r.returncode == 2 and "no *.db or *.sqlite3 files" in r.stderr and r.stderr.count("\n") == 1
    (tmp_path / "a.db").write_bytes(b"")
    r = run("fleet", tmp_path, "--broker", "2.0.18", "--to", "7.0.0")
    assert r.returncode == 2 and "--to" in r.stderr and r.stderr.count("\n") == 1


def test_a_directorys_stores_are_in_the_fleet(tmp_path: Path) -> None:
    """Devices on Mosquitto 2.1 with the persist-sqlite plugin keep mosquitto.sqlite3: a directory's stores, at any
    depth, are in the fleet, judged by the model of the plugin's restore (codec.broker.storemodel)."""
    import shutil

    from codec.broker.verdicts import verdict_rows
    from inspector.commands.fleet import find_files, summary

    from support.paths import INCOMING, REAL

    devices = tmp_path / "devices"
    db, store = devices / "a" / "mosquitto.db", devices / "b" / "deep" / "mosquitto.sqlite3"
    for src, dst in ((REAL / "2.0.20-a.db", db), (INCOMING / "2.1.2-a.sqlite3", store)):
        dst.parent.mkdir(parents=True)
        shutil.copyfile(src, dst)
    (devices / "b" / "notes.txt").write_text("not a persistence file")
    files = find_files([str(devices)])
    assert files == [str(db), str(store)]
    from codec.broker.storemodel import predict_store

    rows = [r for f in files for r in verdict_rows(f, [(2, 1, 2)], at=AT)]
    assert [r["verdict"] for r in rows] == ["loads", "loads"]
    pred = predict_store(str(store), (2, 1, 2), at=AT)
    assert (rows[1]["sessions_kept"], rows[1]["sessions_dropped"], rows[1]["queued"], rows[1]["retained"]) == \
        (len(pred.kept), len(pred.dropped), sum(pred.queued.values()), pred.retained_count)
    text, bad = summary(rows, len(files), "2.1.2", None)
    assert not bad and "Mosquitto 2.1.2: 2 loads; 0 fail" in text
    cut = devices / "c" / "mosquitto.sqlite3"  # a store the plugin cannot open fails the fleet
    cut.parent.mkdir()
    cut.write_bytes(store.read_bytes()[:100_000])
    rows = [r for f in find_files([str(devices)]) for r in verdict_rows(f, [(2, 1, 2)], at=AT)]
    text, bad = summary(rows, 3, "2.1.2", None)
    assert bad and "2 loads, 1 refuses; 1 fail" in text and str(cut) in text


@pytest.mark.spark
def test_sql_of_a_store_is_answered() -> None:
    """The verdicts view is the broker model's, which takes a 2.1 store too; the other views read the store's rows
    (the storage contract) as they read a .db's chunks."""
    from support.paths import INCOMING

    store = INCOMING / "2.1.2-a.sqlite3"
    if not store.exists():
        pytest.skip("no 2.1.2 sqlite fixture")
    r = run("sql", "SELECT release, verdict FROM verdicts", store, "--at", str(int(AT)), "--json", timeout=900)
    assert r.returncode == 0, r.stderr
    assert sorted(json.loads(line)["release"] for line in r.stdout.splitlines()) == ["2.0.18", "2.1.2"]
    r = run("sql", "SELECT count(*) AS n FROM msg_store", store, "--json", timeout=900)
    assert r.returncode == 0, r.stderr
    from codec.layouts import ChunkType
    from codec.sources import open_any

    with open_any(store) as db:
        assert json.loads(r.stdout) == {"n": db.counts()[ChunkType.MSG_STORE]}
