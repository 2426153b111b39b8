"""dump --json and Parquet export against Mosquitto's own mosquitto_db_dump, in one run.

    python bench/bench_dump.py [BIG_DB] [--runs N] [--compression]

Prints, per run and as min-median-max over the runs (each command is a child process; its CPU
time and peak RSS come from wait4, its wall time from the clock, output to /dev/null):
  1. ``mosqdb dump --json`` vs ``mosquitto_db_dump --json`` (2.1.2): wall, CPU, peak RSS and the
     CPU ratio (goal: <= 0.4, peak RSS <= 200 MiB);
  2. ``mosqdb export --to parquet`` of all kinds (the six chunk kinds), then the default export
     (those and the joined ``messages`` view) vs ``mosquitto_db_dump FILE`` (2.0.22, full text
     dump): wall ratio (goal: <= 1.0);
  3. with ``--compression``: the export with each Parquet codec and zstd level (zstd:1 is Arrow's
     default level, zstd:-1 ours): wall, CPU and dataset size;
  0. with ``--text`` (first): the text ``mosqdb dump`` vs ``mosquitto_db_dump FILE`` (2.0.22): wall, CPU ratios
     (goal: CPU <= 1.0).
The two sides of a ratio run back to back, so a ratio is measured on the same (noisy) machine state;
each run prints the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

from timing import child, spread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLES = os.path.expanduser("~/.cache/mosqdb-oracles")
DUMP21 = os.path.join(ORACLES, "2.1.2", "mosquitto_db_dump")
DUMP20 = os.path.join(ORACLES, "2.0.22", "mosquitto_db_dump")
MOSQDB = [sys.executable, "-m", "mosqdb"]


def dir_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db", nargs="?",
                    default=os.environ.get("MOSQDB_BIG") or os.environ.get("MOSQDB_BIG_DB") or "/tmp/big.db")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compression", action="store_true", help="also compare the Parquet codecs")
    ap.add_argument("--skip-dump", action="store_true", help="no dump --json part")
    ap.add_argument("--text", action="store_true", help="also the text dump against 2.0.22's")
    args = ap.parse_args()
    db = args.db
    out = tempfile.mkdtemp(prefix="bench-dump-")
    try:
        if not args.skip_dump:
            mine, theirs = [], []
            print(f"dump --json of {db} ({os.path.getsize(db) / 2**20:.0f} MiB), {args.runs} runs")
            for run in range(args.runs):
                a = child(cwd=ROOT, cmd=[*MOSQDB, "dump", "--json", "--at", "1700000000", db])
                b = child([DUMP21, "--json", db])
                mine.append(a)
                theirs.append(b)
                print(f"  run {run + 1}: mosqdb wall {a['wall']:.2f} s cpu {a['cpu']:.2f} s rss {a['rss']:.0f} MiB | "
                      f"2.1.2 --json wall {b['wall']:.2f} s cpu {b['cpu']:.2f} s rss {b['rss']:.0f} MiB | "
                      f"cpu ratio {a['cpu'] / b['cpu']:.2f}, wall ratio {a['wall'] / b['wall']:.2f} | "
                      f"load {os.getloadavg()[0]:.1f}")
            for name, rows in (("mosqdb dump --json", mine), ("mosquitto_db_dump --json", theirs)):
                print(f"  {name:26s} wall {spread([r['wall'] for r in rows])} s, cpu {spread([r['cpu'] for r in rows])}"
                      f" s, peak RSS {spread([r['rss'] for r in rows], '{:.0f}')} MiB (min-median-max)")
            ratios = [a["cpu"] / b["cpu"] for a, b in zip(mine, theirs)]
            print(f"  cpu ratio mosqdb / 2.1.2: {spread(ratios)} (goal <= 0.4); peak RSS goal <= 200 MiB")

        if args.text:
            mine, theirs = [], []
            print(f"text dump of every chunk: mosqdb dump vs mosquitto_db_dump (2.0.22), {args.runs} runs")
            for run in range(args.runs):
                a = child(cwd=ROOT, cmd=[*MOSQDB, "dump", db, "-q"])
                b = child([DUMP20, db])
                mine.append(a)
                theirs.append(b)
                print(f"  run {run + 1}: mosqdb wall {a['wall']:.2f} s cpu {a['cpu']:.2f} s rss {a['rss']:.0f} MiB | "
                      f"2.0.22 wall {b['wall']:.2f} s cpu {b['cpu']:.2f} s rss {b['rss']:.0f} MiB | "
                      f"cpu ratio {a['cpu'] / b['cpu']:.2f}, wall ratio {a['wall'] / b['wall']:.2f} | "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
            print(f"  mosqdb dump wall {spread([r['wall'] for r in mine])} s, cpu {spread([r['cpu'] for r in mine])} s; "
                  f"cpu ratio {spread([a['cpu'] / b['cpu'] for a, b in zip(mine, theirs)])} (goal <= 1.0), wall ratio "
                  f"{spread([a['wall'] / b['wall'] for a, b in zip(mine, theirs)])}")

        chunk_kinds = "cfg,msg_store,client_msg,retain,sub,client"
        for label, extra in (("all kinds", ["--kind", chunk_kinds]), ("all kinds + the messages view (the default)", [])):
            mine, theirs = [], []
            print(f"export --to parquet, {label}, vs mosquitto_db_dump (2.0.22 text), {args.runs} runs")
            for run in range(args.runs):
                target = os.path.join(out, "ds")
                shutil.rmtree(target, ignore_errors=True)
                a = child(cwd=ROOT, cmd=[*MOSQDB, "export", db, "--to", "parquet", "-o", target, "-q", *extra])
                b = child([DUMP20, db])
                mine.append(a)
                theirs.append(b)
                print(f"  run {run + 1}: export wall {a['wall']:.2f} s cpu {a['cpu']:.2f} s rss {a['rss']:.0f} MiB "
                      f"({dir_size(target) / 2**20:.0f} MiB) | 2.0.22 dump wall {b['wall']:.2f} s cpu {b['cpu']:.2f} s"
                      f" | wall ratio {a['wall'] / b['wall']:.2f} | load {os.getloadavg()[0]:.1f}", flush=True)
            ratios = [a["wall"] / b["wall"] for a, b in zip(mine, theirs)]
            print(f"  export wall {spread([r['wall'] for r in mine])} s, cpu {spread([r['cpu'] for r in mine])} s, "
                  f"peak RSS {spread([r['rss'] for r in mine], '{:.0f}')} MiB vs dump "
                  f"{spread([r['wall'] for r in theirs])} s; wall ratio {spread(ratios)} (goal <= 1.0)")

        if args.compression:
            print("Parquet codecs (export of all kinds + messages; zstd:-1 is the default)")
            for codec in ("zstd:1", "zstd:-1", "zstd:-3", "zstd:-5", "lz4", "snappy", "none"):
                rows, size = [], 0
                for _ in range(args.runs):
                    target = os.path.join(out, f"ds-{codec}")
                    shutil.rmtree(target, ignore_errors=True)
                    rows.append(child(cwd=ROOT, cmd=[*MOSQDB, "export", db, "--to", "parquet", "-o", target, "-q",
                                         "--compression", codec]))
                    size = dir_size(target)
                print(f"  {codec:8s} wall {spread([r['wall'] for r in rows])} s, cpu {spread([r['cpu'] for r in rows])}"
                      f" s, {size / 2**20:.0f} MiB")
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
