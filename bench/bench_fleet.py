"""The fleet on Spark: how long thousands of devices' files take, a small query, and `mosqdb sql` start-up.

    python bench/bench_fleet.py fleet --files 10000        # mosqdb fleet on a 2-worker standalone cluster
    python bench/bench_fleet.py join --runs 3 [--quick]    # 20 small files: a join and a count, session up
    python bench/bench_fleet.py sql --runs 5               # mosqdb sql on one small file, end to end
    python bench/bench_fleet.py startup --runs 3           # where sql's start-up goes (session, views, query)

Targets: 10,000 files for two releases in ≤ 3 min; the join and count ≤ 3 s after the session is up (local
mode); `mosqdb sql` on one small file ≤ 8 s end to end. The files are made from the real fixtures
(tests/support/fleetfiles.py: prefixes of the chunks, torn tails, flipped bits), seeded. Every figure is
min-median-max of the runs, with the load average, since the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE = os.environ.get("BENCH_CODE", ROOT)  # another checkout's code to measure against (the files are made here)
sys.path[:0] = [CODE, ROOT, os.path.join(ROOT, "tests")]

from timing import tree_cpu  # noqa: E402

from support.fleetfiles import make_fleet  # noqa: E402

PY = sys.executable
ENV = dict(os.environ, PYTHONPATH=CODE + os.pathsep + os.environ.get("PYTHONPATH", ""))


def mmm(xs: list[float]) -> str:
    return f"{min(xs):.2f}-{statistics.median(xs):.2f}-{max(xs):.2f} s"


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def bench_fleet(files: int, runs: int, tmp: Path) -> None:
    from support.spark_cluster import StandaloneCluster

    _subreaper()
    t = time.perf_counter()
    make_fleet(tmp / "devices", files, seed=1)
    size = sum(p.stat().st_size for p in (tmp / "devices").iterdir())
    print(f"{files:,} files, {size / 1e6:.0f} MB, made in {time.perf_counter() - t:.1f} s")
    fleet_profile(tmp / "devices")
    before = _child_cpu()
    with StandaloneCluster(tmp / "standalone", workers=2, cores=1) as cluster:
        _KEEP.update(_children())
        conf = [a for k, v in cluster.driver_conf().items() if k != "spark.executor.extraJavaOptions"
                for a in ("--conf", f"{k}={v}")]
        times, cpu = [], []
        for i in range(runs):
            print(load())
            t, c = time.perf_counter(), _child_cpu()
            r = subprocess.run([PY, "-m", "inspector.cli", "fleet", str(tmp / "devices"), "--broker", "2.0.18",
                                "--to", "2.1.2", "--master", cluster.url, *conf, "-o", str(tmp / f"report{i}")],
                               cwd=CODE, env=ENV, capture_output=True, text=True)
            times.append(time.perf_counter() - t)
            cpu.append(_child_cpu() - c)
            assert r.returncode in (0, 1), r.stderr[-2000:]
            print(f"  run {i + 1}: {times[-1]:.1f} s wall, {cpu[-1]:.1f} s CPU (the CLI and its driver JVM); "
                  f"{r.stdout.splitlines()[2] if len(r.stdout.splitlines()) > 2 else ''}")
    print(f"fleet, {files:,} files × 2 releases, 2 workers: wall {mmm(times)}; {load()}")
    _KEEP.clear()
    print(f"  CPU of everything (cluster daemons and executors too, their start included): {_child_cpu() - before:.1f} s")


def fleet_profile(directory: Path, sample: int = 400) -> None:
    """Where a fleet's time goes outside Spark, in this process: listing, packing, the model per file (a sample),
    the summary and the Parquet report (of rows repeated to the fleet's size)."""
    import pyarrow as pa

    from codec.broker.verdicts import unreadable_rows, verdict_rows
    from codec.broker.versions import parse_version
    from codec.errors import CodecError
    from exporters.spark.verdicts import SCHEMA, pack
    from inspector.commands.fleet import find_files, summary, write_report

    cpu = time.process_time
    t = cpu()
    files = find_files([str(directory)])
    listing = cpu() - t
    t = cpu()
    groups = pack([(f, os.path.getsize(f)) for f in files], min_partitions=2)
    packing = cpu() - t
    releases = [parse_version("2.0.18"), parse_version("2.1.2")]
    step = max(1, len(files) // sample)
    rows = []
    t = cpu()
    for f in files[::step]:
        try:
            rows.extend(verdict_rows(f, releases, at=1.7e9, baseline=releases[0]))
        except CodecError as exc:
            rows.extend(unreadable_rows(f, releases, str(exc)))
    per_file = (cpu() - t) / len(files[::step])
    rows = (rows * (len(files) * 2 // max(1, len(rows)) + 1))[:len(files) * 2]
    t = cpu()
    text, _ = summary(rows, len(files), "2.0.18", "2.1.2")
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    write_report(str(directory.parent / "profile-report"), table, text)
    report = cpu() - t
    print(f"  outside Spark (CPU, this process): listing {listing:.2f} s, packing {packing:.2f} s into {len(groups)} "
          f"tasks, the model {per_file * 1000:.1f} ms a file (× {len(files):,} = {per_file * len(files):.0f} s), "
          f"summary + Parquet report {report:.2f} s")


def bench_join(runs: int, tmp: Path, quick: bool = False) -> None:
    """``runs`` sessions, each a new process: the session's start, its first join + count (which no earlier query
    warmed), then three more; min-median-max over the sessions, first queries apart. ``quick``: sessions made
    with ``xs.session(quick=True)`` (the short command's driver JVM: quick compiler, serial GC, class archive)."""
    files = make_fleet(tmp / "twenty", 20, seed=5)
    good = [str(f) for f in files if _readable(f)]
    _subreaper()
    cols: list[list[float]] = [[] for _ in range(4)]
    later: list[float] = []
    later_cpu: list[float] = []
    up_cpu, first_cpu = [], []
    cpu = []
    n = ""
    for _ in range(runs):
        c = _child_cpu()
        r = subprocess.run([PY, os.path.abspath(__file__), "join-one", *good], cwd=CODE,
                           env={**ENV, "BENCH_QUICK": "1" if quick else "0"}, capture_output=True, text=True)
        cpu.append(_child_cpu() - c)
        assert r.returncode == 0, r.stderr[-2000:]
        *values, n = r.stdout.split()
        walls, cpus = [float(v) for v in values[:5]], [float(v) for v in values[5:]]
        for col, v in zip(cols, walls):
            col.append(v)
        later.extend(walls[2:])
        up_cpu.append(cpus[0])
        first_cpu.append(cpus[1])
        later_cpu.extend(cpus[2:])
    print(f"20 small files ({len(good)} readable), `messages` joined with `client`, count() = {n} rows, local[*]"
          f"{', quick JVM' if quick else ''}, "
          f"{runs} sessions: session up {mmm(cols[0])} (CPU {mmm(up_cpu)}); first query {mmm(cols[1])} (CPU "
          f"{mmm(first_cpu)}); later queries {mmm(later)} (CPU {mmm(later_cpu)}); CPU of each whole run (Python, "
          f"JVM, workers) {mmm(cpu)}; {load()}")


def join_one(files: list[str]) -> None:
    """One session: its start, then four join + count queries (each making its DataFrames anew), as seconds."""
    import exporters.spark as xs

    os.environ["PYTHONPATH"] = ENV["PYTHONPATH"]  # the Python workers import the code measured, as installed
    t, c = time.perf_counter(), tree_cpu()
    spark = xs.session("local[*]", quick=os.environ.get("BENCH_QUICK") == "1")
    times, cpu = [time.perf_counter() - t], [tree_cpu() - c]
    try:
        for _ in range(4):
            t, c = time.perf_counter(), tree_cpu()
            df = xs.to_dataframe(spark, files, "messages")
            n = df.join(xs.to_dataframe(spark, files, "client"), ["file"]).count()
            times.append(time.perf_counter() - t)
            cpu.append(tree_cpu() - c)
    finally:
        spark.stop()
    print(" ".join(f"{x:.3f}" for x in times + cpu), n)


def _readable(path: Path) -> bool:
    from codec import DbFile
    from codec.errors import CodecError

    try:
        with DbFile(path) as db:
            return db.empty or db.index.error is None
    except CodecError:
        return False


def bench_sql(runs: int) -> None:
    _subreaper()
    one = os.path.join(ROOT, "..", "shared", "fixtures", "real", "2.0.20-a.db")
    times, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), _child_cpu()
        r = subprocess.run([PY, "-m", "inspector.cli", "sql", "SELECT count(*) FROM msg_store", one], cwd=CODE,
                           env=ENV, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        cpu.append(_child_cpu() - c)
        assert r.returncode == 0, r.stderr[-2000:]
    print(f"mosqdb sql, one small file, end to end: wall {mmm(times)}, CPU (user+sys, with the JVM) {mmm(cpu)}; "
          f"{load()}")


_KEEP: set[int] = set()  # children that stay (a cluster's master and workers): never waited for here


def _children() -> set[int]:
    out: set[int] = set()
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/children") as f:
            out.update(int(p) for p in f.read().split())
    return out


def _child_cpu() -> float:
    """User + system seconds of this process's finished descendants: the CLI, and (see :func:`_subreaper`) the
    JVM and Python workers that outlive it, reaped here first."""
    import resource

    while True:  # the JVM leaves when the CLI is gone (its stdin closes): wait for it, its time counts
        left = _children() - _KEEP
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _subreaper() -> None:
    """Become the parent of orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``): PySpark's JVM outlives the
    CLI that started it, and only a waited-for process's CPU time is added to ours."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)


def bench_startup(runs: int) -> None:
    code = r"""
import sys, time
t0 = time.perf_counter()
import exporters.spark as xs
t1 = time.perf_counter()
spark = xs.session(quick=True)  # as mosqdb sql starts it
t2 = time.perf_counter()
xs.register_views(spark, [sys.argv[1]], only=["msg_store"])
t3 = time.perf_counter()
spark.sql("SELECT count(*) FROM msg_store").collect()
t4 = time.perf_counter()
spark.sql("SELECT count(*) FROM msg_store").collect()
t5 = time.perf_counter()
spark.stop()
t6 = time.perf_counter()
print(f"{t1-t0:.2f} {t2-t1:.2f} {t3-t2:.2f} {t4-t3:.2f} {t5-t4:.2f} {t6-t5:.2f}")
"""
    one = os.path.join(ROOT, "..", "shared", "fixtures", "real", "2.0.20-a.db")
    cols: list[list[float]] = [[] for _ in range(6)]
    cpu = []
    _subreaper()
    for _ in range(runs):
        c = _child_cpu()
        r = subprocess.run([PY, "-c", code, one], cwd=CODE, env=ENV, capture_output=True, text=True)
        cpu.append(_child_cpu() - c)
        assert r.returncode == 0, r.stderr[-2000:]
        for c, v in zip(cols, r.stdout.split()):
            c.append(float(v))
    for name, c in zip(("import", "session (JVM + context)", "views (in the driver; or a planner round trip)", "first query",
                        "same query again", "stop"), cols):
        print(f"  {name}: {mmm(c)}")
    print(f"  CPU of the whole run (Python, JVM, Python workers): {mmm(cpu)}; {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("fleet", "join", "sql", "startup", "join-one"))
    ap.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="join: sessions with xs.session(quick=True)")
    a = ap.parse_args()
    if a.what == "join-one":
        join_one(a.files)
        return
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as d:
        if a.what == "fleet":
            bench_fleet(a.files, a.runs, Path(d))
        elif a.what == "join":
            bench_join(a.runs, Path(d), quick=a.quick)
        elif a.what == "sql":
            bench_sql(a.runs)
        else:
            bench_startup(a.runs)


if __name__ == "__main__":
    main()
