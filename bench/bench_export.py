"""Export benchmark on the big db (make it with ../shared/tools/make-big-db.sh /tmp/big.db).

    python bench/bench_export.py [BIG_DB]      (or MOSQDB_BIG_DB=...; default /tmp/big.db)

Prints, in one run:
  1. every MSG_STORE to one Parquet file (goal: <= 1.9 s for 1.2 M), with the index / decode split
     and the peak memory of the process at that point;
  2. Spark count() and a groupBy over the `mosquitto` data source, and the same over the naive way
     (best of 3 runs each: the first pays JIT warm-up and Python worker start-up)
     (codec records -> Python tuples -> spark.createDataFrame) on BENCH_NAIVE_ROWS rows (default
     200000; rows/s is a rate, so a sample is enough), with the ratio (goal: >= 10x).
Set BENCH_SKIP_SPARK=1 to stop after the Parquet part.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from codec import DbFile  # noqa: E402
from exporters.arrow import iter_batches  # noqa: E402
from exporters.files import export_parquet  # noqa: E402


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def parquet_part(path: str) -> int:
    with DbFile(path) as db:
        t = time.perf_counter()
        assert db.index is not None
        t_index = time.perf_counter() - t
        t = time.perf_counter()
        rows = sum(b.num_rows for b in iter_batches(db, "msg_store"))
        t_decode = time.perf_counter() - t
    print(f"  index of {os.path.getsize(path) / 1e6:.0f} MB: {t_index:.2f} s; "
          f"decode {rows:,} msg_store rows to Arrow: {t_decode:.2f} s ({rows / t_decode / 1e6:.2f} M rows/s)")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "msg_store.parquet")
        best = None
        for _ in range(3):
            if os.path.exists(out):
                os.unlink(out)
            t = time.perf_counter()
            counts = export_parquet([path], out, kinds=["msg_store"], single_file=True)
            took = time.perf_counter() - t
            best = took if best is None else min(best, took)
            print(f"  export {counts['msg_store']:,} messages to Parquet (open + index + decode + write): "
                  f"{took:.2f} s, {os.path.getsize(out) / 1e6:.0f} MB")
    verdict = "meets" if best is not None and best <= 1.9 else "MISSES"
    print(f"  best {best:.2f} s -> {verdict} the 1.9 s goal; peak RSS so far {peak_mb():.0f} MB")
    return rows


def best_of(action, times: int = 3):  # type: ignore[no-untyped-def]
    """Run a Spark action a few times (the first pays JIT and worker start-up); the best time."""
    best, result = None, None
    for _ in range(times):
        t = time.perf_counter()
        result = action()
        took = time.perf_counter() - t
        best = took if best is None else min(best, took)
    return result, best


def spark_part(path: str, rows: int) -> None:
    import exporters.spark as xs

    naive_n = int(os.environ.get("BENCH_NAIVE_ROWS", "200000"))
    t = time.perf_counter()
    spark = xs.local_session()
    print(f"  Spark session ({spark.sparkContext.master}, {spark.sparkContext.defaultParallelism} cores): "
          f"{time.perf_counter() - t:.1f} s")
    def source(**opts: str):  # type: ignore[no-untyped-def]
        r = spark.read.format("mosquitto").option("kind", "msg_store")
        for k, v in opts.items():
            r = r.option(k, v)
        return r.load(path)

    df = source()
    print(f"  data source partitions: {df.rdd.getNumPartitions()}")
    n, ds_count = best_of(lambda: df.count())
    groups, ds_group = best_of(lambda: df.groupBy("qos", "retain").count().collect())
    assert n == rows, (n, rows)
    print(f"  data source, every column: count() {n:,} rows {ds_count:.2f} s ({n / ds_count:,.0f} rows/s); "
          f"groupBy(qos, retain) {len(groups)} groups {ds_group:.2f} s ({n / ds_group:,.0f} rows/s)")
    _, pr_count = best_of(lambda: source(columns="store_id").count())
    _, pr_group = best_of(lambda: source(columns="qos,retain").groupBy("qos", "retain").count().collect())
    print(f"  data source, option columns: count() {pr_count:.2f} s ({n / pr_count:,.0f} rows/s); "
          f"groupBy {pr_group:.2f} s ({n / pr_group:,.0f} rows/s)")

    t = time.perf_counter()
    tuples = []
    full = os.path.abspath(path)
    with DbFile(path) as db:
        for chunk in db.stream(types=[2]):
            v = chunk.record.values
            tuples.append((full, v["store_id"], v["expiry_time"], v["source_mid"], v["source_id"],
                           v["source_username"], v["source_port"], v["topic"], v["qos"], v["retain"], v["payload"]))
            if len(tuples) >= naive_n:
                break
    t_tuples = time.perf_counter() - t
    schema = ("file string, store_id bigint, expiry_time bigint, source_mid int, source_id string, "
              "source_username string, source_port int, topic string, qos smallint, retain smallint, payload binary")
    m, nv_count = best_of(lambda: spark.createDataFrame(tuples, schema).count())
    naive_groups, nv_group = best_of(lambda: spark.createDataFrame(tuples, schema).groupBy("qos", "retain")
                                     .count().collect())
    e2e_count, e2e_group = m / (t_tuples + nv_count), m / (t_tuples + nv_group)
    print(f"  naive on the first {m:,} messages: codec records -> tuples {t_tuples:.2f} s; createDataFrame + "
          f"count() {nv_count:.2f} s, + groupBy {nv_group:.2f} s; from the file: count {e2e_count:,.0f} rows/s, "
          f"groupBy {e2e_group:,.0f} rows/s; tuples already in memory: {m / nv_count:,.0f} / {m / nv_group:,.0f}")
    ratios = {
        "count, from the file": (n / ds_count) / e2e_count,
        "groupBy, from the file": (n / ds_group) / e2e_group,
        "count, tuples in memory": (n / ds_count) / (m / nv_count),
        "groupBy, tuples in memory": (n / ds_group) / (m / nv_group),
        "groupBy with option columns, from the file": (n / pr_group) / e2e_group,
    }
    for what, r in ratios.items():
        print(f"  speed-up {what}: {r:.1f}x ({'meets' if r >= 10 else 'below'} the 10x goal)")
    spark.stop()


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MOSQDB_BIG_DB", "/tmp/big.db")
    if not os.path.exists(path):
        print(f"{path}: missing; make it with: bash ../shared/tools/make-big-db.sh {path}", file=sys.stderr)
        return 2
    print(f"bench_export on {path} (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print("Parquet:")
    rows = parquet_part(path)
    if os.environ.get("BENCH_SKIP_SPARK"):
        return 0
    print("Spark:")
    spark_part(path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
