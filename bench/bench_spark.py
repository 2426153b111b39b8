"""Spark benchmark on the big db (make it with ../shared/tools/make-big-db.sh /tmp/big.db).

    python bench/bench_spark.py [BIG_DB] [--runs N]      (or MOSQDB_BIG_DB=...; default /tmp/big.db)
    python bench/bench_spark.py BIG_DB --every-column --runs 3   (only part 0 below)
    python bench/bench_spark.py BIG_DB --pushdown --runs 3       (only the filter push-down part)
    python bench/bench_spark.py BIG_DB --sql --runs 3            (only mosqdb sql end to end, cache or not)

Prints, in one run, min-median-max of N runs (default 5, after one warm-up run each) of
``count()`` and ``groupBy(qos, retain).count()`` over the big file's msg_store:

0. every column read (``df.write.format("noop")``: every value of every row built), local[2]: Spark's Parquet
   reader over ``msg_store.parquet``, the ``mosquitto`` data source, and ``to_dataframe(cache="parquet")``
   (Spark's Parquet reader over the copy in the private cache): its first run with an empty cache (it makes the
   copy: ``--runs`` runs, each in a new cache directory) and its later runs separately; wall and CPU (this
   process, the JVM and the Python workers) with the ratio of each to the Parquet reader;
then a selective ``count()`` over the data source (a store-id range of 1 % of the stores, a topic prefix) with
filter push-down off and on;
1. local[*]: Spark's own Parquet reader over mosqdb's ``msg_store.parquet`` (what a Spark user
   would pick instead: export once, read with Spark), and the ``mosquitto`` data source with
   every column, with ``columns="qos,retain"`` and with a user schema, and a Python source that
   yields the two columns from memory (the floor of any Python source); the ratio of each to
   the Parquet reader (goal for the groupBy: >= 0.5x);
2. a standalone cluster on this machine (master + 2 workers of 1 core, started from the
   installed PySpark, as the tests start it): the data source with 1 worker
   (``spark.cores.max=1``) and with 2, rows/s and the speed-up.
DataFrames are built once and each query is timed as an action (planning included).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")]

from timing import tree_cpu  # noqa: E402

from codec import DbFile  # noqa: E402
from exporters.files import export_parquet  # noqa: E402

GROUPS = ("qos", "retain")


def timed(action: Callable[[], object], runs: int) -> list[float]:
    action()  # warm-up: JIT, Python workers, the planner's cached index
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        action()
        out.append(time.perf_counter() - t)
    return out


def mmm(xs: list[float]) -> str:
    return f"{min(xs):.2f}-{statistics.median(xs):.2f}-{max(xs):.2f} s"


def rate(rows: int, xs: list[float]) -> str:
    return f"{rows / max(xs) / 1e6:.2f}-{rows / statistics.median(xs) / 1e6:.2f}-{rows / min(xs) / 1e6:.2f} M rows/s"


def ratio(ref: list[float], xs: list[float]) -> str:
    """This one's speed over the reference's, from the medians (and from the best runs)."""
    return f"{statistics.median(ref) / statistics.median(xs):.2f}x (best runs {min(ref) / min(xs):.2f}x)"


def floor_source(rows: int):  # type: ignore[no-untyped-def]
    """A Python data source that yields ``rows`` of (qos, retain) int16 from memory: what any Python
    source costs Spark for those columns (the floor under the ``mosquitto`` source's projection)."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Reader(DataSourceReader):
        def partitions(self):  # type: ignore[no-untyped-def]
            return [InputPartition(0), InputPartition(1)]

        def read(self, partition):  # type: ignore[no-untyped-def]
            n = rows // 2 + (rows % 2 if partition.value else 0)
            cols = [pa.array(np.zeros(n, np.int16)), pa.array(np.zeros(n, np.int16))]
            yield pa.RecordBatch.from_arrays(cols, names=list(GROUPS))

    class Floor(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-floor"

        def schema(self) -> str:
            return "qos smallint, retain smallint"

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return Reader()

    return Floor


def measured(action: Callable[[], object]) -> tuple[float, float]:
    t, c = time.perf_counter(), tree_cpu()
    action()
    return time.perf_counter() - t, tree_cpu() - c


def every_column_part(path: str, parquet: str, rows: int, runs: int) -> None:
    import exporters.spark as xs
    from exporters.spark import cache

    spark = xs.session("local[2]", app="bench-spark-every-column")

    def noop(df: object) -> None:
        df.write.format("noop").mode("overwrite").save()  # type: ignore[attr-defined]

    def parquet_reader() -> None:
        noop(spark.read.parquet(parquet))

    def source() -> None:
        noop(spark.read.format("mosquitto").option("kind", "msg_store").load(path))

    def cached() -> None:
        noop(xs.to_dataframe(spark, path, "msg_store", cache="parquet"))

    got: dict[str, list[tuple[float, float]]] = {}
    parquet_reader()  # warm-up: JIT, the Python workers, the planner's index
    source()
    got["Parquet reader"] = [measured(parquet_reader) for _ in range(runs)]
    got["data source, every column"] = [measured(source) for _ in range(runs)]
    cold = []
    saved = tempfile.tempdir
    try:
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="bench-spark-cache-") as d:
                tempfile.tempdir = d  # an empty private cache directory: the copy is made in this run
                cold.append(measured(cached))
                tempfile.tempdir = saved
        got["to_dataframe(cache='parquet'), first run (makes the copy)"] = cold
        cached()
        got["to_dataframe(cache='parquet'), later runs"] = [measured(cached) for _ in range(runs)]
    finally:
        tempfile.tempdir = saved
        for name in os.listdir(cache.safefile.user_cache_dir()):
            if name.startswith(cache.PREFIX):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(cache.safefile.user_cache_dir(), name))
    ref = got["Parquet reader"]
    print(f"every column (df.write.format('noop')), {rows:,} rows, local[2]; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, xs_ in got.items():
        wall, cpu = [w for w, _ in xs_], [c for _, c in xs_]
        line = f"  {name:58s} wall {mmm(wall)}, CPU {mmm(cpu)}"
        if xs_ is not ref:
            line += (f"; speed vs the Parquet reader: wall {ratio([w for w, _ in ref], wall)}, "
                     f"CPU {ratio([c for _, c in ref], cpu)}")
        print(line)
    spark.stop()


def pushdown_part(path: str, parquet: str, runs: int) -> None:
    """A selective query over the data source with filter push-down on and off (the same session)."""
    import numpy as np
    import pyarrow.parquet as pq

    import exporters.spark as xs
    from exporters.spark.pushdown import PUSHDOWN_CONF

    t = pq.read_table(parquet, columns=["store_id", "topic"])
    ids = np.sort(t.column("store_id").to_numpy())
    lo, hi = int(ids[len(ids) // 2]), int(ids[len(ids) // 2 + len(ids) // 100])  # about 1 % of the stores
    prefix = "/".join(str(t.column("topic")[len(ids) // 3]).split("/")[:2]) + "/"
    spark = xs.session("local[2]", app="bench-spark-pushdown")
    print(f"filter push-down, local[2]; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for where in (f"store_id BETWEEN {lo} AND {hi}", f"topic LIKE '{prefix}%'"):
        got = {}
        for on in (False, True):
            spark.conf.set(PUSHDOWN_CONF, str(on).lower())
            df = spark.read.format("mosquitto").option("kind", "msg_store").load(path).where(where)
            n = df.count()
            got[on] = [measured(lambda df=df: df.count()) for _ in range(runs)]
        print(f"  {where} ({n:,} rows): off wall {mmm([w for w, _ in got[False]])}, CPU "
              f"{mmm([c for _, c in got[False]])}; on wall {mmm([w for w, _ in got[True]])}, CPU "
              f"{mmm([c for _, c in got[True]])}")
    spark.stop()


SQL_EVERY = "SELECT count(*), sum(hash(*)) FROM msg_store"  # hash(*) reads every column


def sql_part(path: str, runs: int) -> None:
    """``mosqdb sql`` on the big file, end to end (a new process each): ``--no-cache`` (the data source), the
    Parquet cache's first run (the copy made; entries removed before each) and its later runs; wall and CPU of
    the command, its JVM and Python workers (reaped here)."""
    import subprocess

    from bench_fleet import _child_cpu, _subreaper

    from exporters.spark import cache

    _subreaper()
    env = dict(os.environ, PYTHONPATH=ROOT)

    def run(*extra: str) -> tuple[float, float]:
        t, c = time.perf_counter(), _child_cpu()
        r = subprocess.run([sys.executable, "-m", "inspector.cli", "sql", SQL_EVERY, path, "--json", *extra],
                           cwd=ROOT, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        return time.perf_counter() - t, _child_cpu() - c

    def clear() -> None:
        d = cache.safefile.user_cache_dir()
        for name in os.listdir(d):
            if name.startswith(cache.PREFIX):
                os.unlink(os.path.join(d, name))

    got = {"--no-cache (the data source)": [run("--no-cache") for _ in range(runs)]}
    cold = []
    for _ in range(runs):
        clear()
        cold.append(run())
    got["the cache, first run (makes the copy)"] = cold
    got["the cache, later runs"] = [run() for _ in range(runs)]
    clear()
    print(f"mosqdb sql {SQL_EVERY!r} on {path}, end to end; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, xs_ in got.items():
        print(f"  {name:40s} wall {mmm([w for w, _ in xs_])}, CPU {mmm([c for _, c in xs_])}")


def local_part(path: str, parquet: str, rows: int, runs: int) -> None:
    import exporters.spark as xs

    spark = xs.session("local[*]", app="bench-spark-local")
    spark.dataSource.register(floor_source(rows))
    print(f"local[*] ({spark.sparkContext.defaultParallelism} cores)")
    frames = {
        "Parquet reader": spark.read.parquet(parquet),
        "data source, every column": spark.read.format("mosquitto").option("kind", "msg_store").load(path),
        "data source, columns=qos,retain": spark.read.format("mosquitto").option("kind", "msg_store")
        .option("columns", "qos,retain").load(path),
        "data source, schema qos, retain": spark.read.format("mosquitto").option("kind", "msg_store")
        .schema("qos smallint, retain smallint").load(path),
        "in-memory Python source (qos, retain)": spark.read.format("bench-floor").load(),
    }
    got: dict[str, dict[str, list[float]]] = {}
    for name, df in frames.items():
        got[name] = {"count": timed(lambda df=df: df.count(), runs),
                     "groupBy": timed(lambda df=df: df.groupBy(*GROUPS).count().collect(), runs)}
        n = df.count()
        assert n == rows, (name, n, rows)
    ref = got["Parquet reader"]
    for name, t in got.items():
        line = f"  {name:38s} count {mmm(t['count'])} ({rate(rows, t['count'])}); groupBy {mmm(t['groupBy'])} " \
               f"({rate(rows, t['groupBy'])})"
        if name != "Parquet reader":
            line += f"; vs Parquet: count {ratio(ref['count'], t['count'])}, groupBy {ratio(ref['groupBy'], t['groupBy'])}"
        print(line)
    spark.stop()


def cluster_part(path: str, rows: int, runs: int) -> None:
    import exporters.spark as xs

    from support.spark_cluster import StandaloneCluster, wait_for_executors

    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp, StandaloneCluster(Path(tmp), workers=2) as cluster:
        print(f"standalone cluster {cluster.url}: 2 workers of 1 core")
        got = {}
        for workers in (1, 2):
            conf = {**cluster.driver_conf(), "spark.cores.max": str(workers)}
            spark = xs.session(cluster.url, app=f"bench-spark-{workers}", conf=conf)
            wait_for_executors(spark, workers)
            full = spark.read.format("mosquitto").option("kind", "msg_store").option("minPartitions", "2").load(path)
            proj = spark.read.format("mosquitto").option("kind", "msg_store").option("minPartitions", "2") \
                .option("columns", "qos,retain").load(path)
            got[workers] = {"count, every column": timed(lambda df=full: df.count(), runs),
                            "groupBy, every column": timed(lambda df=full: df.groupBy(*GROUPS).count().collect(), runs),
                            "groupBy, columns=qos,retain": timed(
                                lambda df=proj: df.groupBy(*GROUPS).count().collect(), runs)}
            spark.stop()
        for what in got[1]:
            one, two = got[1][what], got[2][what]
            print(f"  {what:28s} 1 worker {mmm(one)} ({rate(rows, one)}); 2 workers {mmm(two)} ({rate(rows, two)}); "
                  f"speed-up {statistics.median(one) / statistics.median(two):.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=os.environ.get("MOSQDB_BIG_DB", "/tmp/big.db"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--skip-cluster", action="store_true")
    ap.add_argument("--every-column", action="store_true", help="only the every-column read (part 0)")
    ap.add_argument("--pushdown", action="store_true", help="only filter push-down on and off")
    ap.add_argument("--sql", action="store_true", help="only mosqdb sql end to end, with and without the cache")
    args = ap.parse_args()
    if not os.path.exists(args.path):
        print(f"{args.path}: missing; make it with: bash ../shared/tools/make-big-db.sh {args.path}", file=sys.stderr)
        return 2
    with DbFile(args.path) as db:
        rows = db.index.counts().get(2, 0)
    print(f"bench_spark on {args.path}: {rows:,} stored messages (load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores); min-median-max of {args.runs} runs")
    if args.sql:
        sql_part(args.path, args.runs)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-spark-pq-") as tmp:
        parquet = os.path.join(tmp, "msg_store.parquet")
        export_parquet([args.path], parquet, kinds=["msg_store"], single_file=True)
        if args.pushdown:
            pushdown_part(args.path, parquet, args.runs)
            return 0
        every_column_part(args.path, parquet, rows, args.runs)
        if args.every_column:
            return 0
        pushdown_part(args.path, parquet, args.runs)
        local_part(args.path, parquet, rows, args.runs)
    if not args.skip_cluster:
        cluster_part(args.path, rows, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
