"""The data source on a real Spark standalone cluster: a master and two workers (separate JVMs started from
the installed PySpark), the driver on ``spark://127.0.0.1:PORT``, a directory of 54 real-workload files whose
partitions run on both workers, every row equal to a local run's; executors whose Python lacks mosqdb get it
from the code archive."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from support.brokers import have_mosquitto
from support.cli import run
from support.paths import REAL_FILES

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

import exporters.spark as xs  # noqa: E402
from exporters.schema import KINDS  # noqa: E402

from support.spark_cluster import (  # noqa: E402
    StandaloneCluster,
    build_fleet,
    make_workload_db,
    wait_for_executors,
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not have_mosquitto():
        pytest.skip("needs Debian's mosquitto for make-big-db.sh")
    root = tmp_path_factory.mktemp("fleet")
    bases = list(REAL_FILES)
    bases.append(make_workload_db(root / "workload-1.db", retained=3000, clients=20, queued=400, seed=1))
    bases.append(make_workload_db(root / "workload-2.db", retained=2000, clients=12, queued=300, seed=2))
    files = build_fleet(root / "fleet", bases)
    assert len(files) >= 50 and len(set(files)) == len(files)
    return root / "fleet"


def read_all(spark, path: Path) -> dict[str, list[tuple]]:  # type: ignore[no-untyped-def]
    """Every kind's rows, ordered by (file, chunk index): what "row for row" compares."""
    out: dict = {"columns": {}}
    for kind in KINDS:
        df = spark.read.format("mosquitto").option("kind", kind).load(str(path))
        rows = [tuple(r) for r in df.collect()]
        names = df.columns
        f, c = names.index("file"), names.index("chunk_index")
        out[kind] = sorted(rows, key=lambda r: (r[f], r[c]))
        out["columns"][kind] = names
    return out


@pytest.fixture(scope="module")
def local_rows(fleet: Path) -> dict[str, list[tuple]]:
    spark = xs.session("local[2]", app="mosqdb-local-reference")
    try:
        return read_all(spark, fleet)
    finally:
        spark.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2, cores=1) as c:
        yield c


def test_both_workers_read_the_fleet_like_a_local_run(fleet: Path, local_rows: dict, cluster) -> None:  # type: ignore[no-untyped-def]
    spark = xs.session(cluster.url, app="mosqdb-standalone-test", conf=cluster.driver_conf())
    try:
        sc = spark.sparkContext
        assert sc.master == cluster.url
        wait_for_executors(spark, 2)
        # the executors import this checkout's code from the shipped archive, not whatever their Python has
        where = set(sc.parallelize(range(8), 8).map(lambda _: __import__("exporters.spark").__file__).collect())
        assert where and all("mosqdb-code-" in w for w in where), where
        sc.setJobGroup("scan", "the data source over the fleet")
        got = read_all(spark, fleet)
        stages = {s for j in sc.statusTracker().getJobIdsForGroup("scan")
                  for s in sc.statusTracker().getJobInfo(j).stageIds}
        # the partitions the source planned: small files are packed into tasks by bytes, as Spark's file
        # sources do (maxPartitionBytes, openCostInBytes, at least the cluster's parallelism per kind)
        planned = sum(spark.read.format("mosquitto").option("kind", k).load(str(fleet)).rdd.getNumPartitions()
                      for k in KINDS)
    finally:
        spark.stop()
    for kind in KINDS:
        assert len(got[kind]) == len(local_rows[kind]), kind
        assert got[kind] == local_rows[kind], kind
    assert sum(len(got[k]) for k in KINDS) > 50_000
    ran = cluster.tasks_by_worker(stages)
    assert all(ran.values()), ran  # both workers' executors ran scan tasks
    assert planned >= 2 * len(KINDS)  # each kind's scan can use both workers
    assert sum(len(v) for v in ran.values()) >= planned  # every planned partition ran as a task


def bare_python(root: Path) -> str:
    """A Python with numpy, pyarrow and PySpark but without mosqdb: a venv that sees this venv's site-packages
    as a plain path (its .pth files, the editable install among them, are not run)."""
    venv = root / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = "import numpy, pyarrow, pyspark\ntry:\n import codec\nexcept ImportError:\n print('no mosqdb')"
    r = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=root, timeout=60)
    assert r.stdout.strip() == "no mosqdb", r.stderr
    return python


def test_executors_without_mosqdb_get_the_shipped_code(fleet: Path, local_rows: dict, cluster,  # type: ignore[no-untyped-def]
                                                       tmp_path: Path) -> None:
    conf = {**cluster.driver_conf(), "spark.pyspark.python": bare_python(tmp_path)}
    spark = xs.session(cluster.url, app="mosqdb-shipped", conf=conf)  # ship_code: the default off local[...]
    try:
        wait_for_executors(spark, 2)
        df = spark.read.format("mosquitto").option("kind", "retain").load(str(fleet))
        f, c = df.columns.index("file"), df.columns.index("chunk_index")
        assert sorted((tuple(r) for r in df.collect()), key=lambda r: (r[f], r[c])) == local_rows["retain"]
    finally:
        spark.stop()


def test_sql_master_conf_and_py_files(fleet: Path, local_rows: dict, cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`mosqdb sql --master URL --conf K=V`, as a user runs it (a new driver process each time): workers whose
    Python lacks mosqdb get one clear line without the code, and the rows with the archive given the documented
    way (spark.submit.pyFiles, what --py-files sets)."""
    confs = {**cluster.driver_conf(), "spark.pyspark.python": bare_python(tmp_path)}
    query = "SELECT file, chunk_index, client_id, store_id, mid FROM client_msg ORDER BY file, chunk_index"

    def sql(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        args = [a for k, v in {**confs, **extra}.items() for a in ("--conf", f"{k}={v}")]
        return run("sql", query, fleet, "--master", cluster.url, *args, "--no-ship-code", "--json", "--limit",
                   "1000000", timeout=900)

    cols = ("file", "chunk_index", "client_id", "store_id", "mid")
    names = local_rows["columns"]["client_msg"]
    want = [{c: row[names.index(c)] for c in cols} for row in local_rows["client_msg"]]
    r = sql({})  # small inputs are read in the driver: the executors' Python needs no mosqdb
    assert r.returncode == 0, r.stderr
    assert [json.loads(line) for line in r.stdout.splitlines()] == want
    on_executors = {"spark.mosqdb.driverBytes": "0"}  # the data source on the executors, as for big inputs
    r = sql(on_executors)
    assert r.returncode == 1 and not r.stdout
    lines = r.stderr.strip().splitlines()  # the JVM's own start-up warning and Spark's task log may come first
    [line] = [ln for ln in lines if ln.startswith("mosqdb ")]
    assert line == lines[-1]
    assert line.startswith(f"mosqdb sql: {fleet}: the executors' Python cannot import mosqdb (ModuleNotFoundError: "
                           "No module named 'exporters") and "spark.submit.pyFiles" in line
    r = sql({**on_executors, "spark.submit.pyFiles": xs.code_archive(str(tmp_path))})
    assert r.returncode == 0, r.stderr
    assert [json.loads(line) for line in r.stdout.splitlines()] == want
    bad = run("sql", "SELECT 1", fleet, "--master", cluster.url, "--conf", "spark.executor.memory", timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip() == ("mosqdb sql: --conf 'spark.executor.memory': use KEY=VALUE "
                                                          "(any Spark setting, e.g. spark.executor.memory=2g)")
