"""Codec figures on a big real file (make it with ../shared/tools/make-big-db.sh).

usage: python bench/bench_codec.py [FILE]   (default: $MOSQDB_BIG or /tmp/big.db)

Prints wall time and peak RSS of `mosqdb info`, `check` and `dump --json` (each in its
own process), the index scan with and without the C framing walk, and streaming decode
rates (records and columns). If `mosquitto_db_dump` is on PATH, its `--stats` run is
timed in the same run and the ratios are printed. Machines are noisy: compare the
ratios within one run, not the absolute numbers across runs.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from codec import ChunkType, DbFile  # noqa: E402
from codec.columnar import iter_columns  # noqa: E402
from codec.index import ChunkIndex, scan  # noqa: E402


def run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024


def rss_child(cmd: list[str]) -> tuple[float, float]:
    """Like run() but reads the child's own peak through /usr/bin/time when available."""
    if shutil.which("time") or os.path.exists("/usr/bin/time"):
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, check=False)
        wall = time.perf_counter() - t
        try:
            return wall, int(p.stderr.strip().splitlines()[-1]) / 1024
        except (ValueError, IndexError):
            pass
    return run(cmd)


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MOSQDB_BIG", "/tmp/big.db")
    if not os.path.exists(path):
        sys.exit(f"{path} not found: make it with ../shared/tools/make-big-db.sh {path}")
    size = os.path.getsize(path)
    mosqdb = [sys.executable, "-m", "inspector.cli"]
    print(f"file: {path} ({size / 1e6:.0f} MB)")

    results = {}
    for name, args in (("info", ["info", "--json", path]), ("check", ["check", "--json", path]),
                       ("dump --json", ["dump", "--json", path])):
        wall, peak = rss_child(mosqdb + args)
        results[name] = wall
        print(f"mosqdb {name:12s} {wall:7.2f} s  peak RSS {peak:6.0f} MiB")
    dbd = shutil.which("mosquitto_db_dump")
    if dbd:
        wall, peak = rss_child([dbd, "--stats", path])
        print(f"mosquitto_db_dump --stats {wall:7.2f} s  peak RSS {peak:6.0f} MiB  "
              f"(mosqdb info is {results['info'] / wall:.2f}x its time)")
    else:
        print("mosquitto_db_dump not on PATH: no ratio against it")

    with DbFile(path) as db:
        scans = {}
        for native in (True, False):
            idx = ChunkIndex(db.version or 6)
            t = time.perf_counter()
            for _ in scan(db.fd, db.size, db.version or 6, idx, native=native):
                pass
            scans[native] = time.perf_counter() - t
            print(f"index scan ({'C framing walk' if native else 'pure Python'}): {scans[native]:.2f} s, "
                  f"{len(idx):,} chunks, {idx.nbytes() / 2**20:.0f} MiB of arrays")
        print(f"  C walk is {scans[False] / scans[True]:.1f}x faster")

        n = 0
        t = time.perf_counter()
        for _ in db.stream():
            n += 1
        rec = time.perf_counter() - t
        print(f"stream, one Record per chunk: {n:,} chunks in {rec:.2f} s = {n / rec / 1e6:.2f} M chunks/s")
        db.index  # noqa: B018
        n = 0
        t = time.perf_counter()
        for ct in ChunkType:
            for cols in iter_columns(db, ct):
                n += len(cols)
        col = time.perf_counter() - t
        print(f"stream, columnar batches:     {n:,} chunks in {col:.2f} s = {n / col / 1e6:.2f} M chunks/s "
              f"({rec / col:.1f}x the record path)")


if __name__ == "__main__":
    main()
