"""Payload decoding cost on a file of Sparkplug B traffic (make it with bench/make_sparkplug_db.py).

    python bench/bench_payloads.py [SPB_DB] [--runs N] [--decode RULE]

Runs, as a user does (``python -m inspector.cli`` in a child process, wall time, runs interleaved so
load changes hit both sides alike):
  1. ``export --to parquet -o DIR`` (every kind) plain, and with ``--decode RULE`` (default
     ``spBv1.0/#=sparkplug``: payload_format/payload_json columns and the sparkplug_metrics table);
     target: decoding <= 3x plain;
  2. ``dump --json`` to /dev/null plain and with ``--decode RULE``; target <= 2x.
Prints min-median-max of each (wall and CPU seconds) and the ratio of the medians (and of the minima).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


CPU: dict[str, list[float]] = {}  # CPU seconds (user + system) of each run, by case and side


def timed(args: list[str], key: str = "") -> float:
    env = dict(os.environ, PYTHONPATH=ROOT)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    with open(os.devnull, "wb") as null:
        r = subprocess.run([sys.executable, "-m", "inspector.cli", *args], cwd=ROOT, env=env, stdout=null,
                           stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(key, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.decode(errors='replace')[-2000:]}")
    return took


def mmm(xs: list[float]) -> str:
    return f"{min(xs):.2f}–{statistics.median(xs):.2f}–{max(xs):.2f} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db", nargs="?", default=os.environ.get("MOSQDB_SPB_DB", "/tmp/spb-big.db"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--decode", default="spBv1.0/#=sparkplug")
    ap.add_argument("--only", choices=("export", "dump"))
    a = ap.parse_args()
    print(f"{a.db}: {os.path.getsize(a.db) / 1e6:.0f} MB; load average {os.getloadavg()[0]:.1f} at start")
    tmp = tempfile.mkdtemp(prefix="bench-payloads-")
    try:
        cases = []
        if a.only in (None, "export"):
            cases.append(("export parquet", ["export", a.db, "--to", "parquet", "-q", "-o"], 3.0))
        if a.only in (None, "dump"):
            cases.append(("dump --json", ["dump", a.db, "--json", "-q"], 2.0))
        for name, base, target in cases:
            plain: list[float] = []
            decoded: list[float] = []
            for k in range(a.runs):
                for side, extra in (("plain", []), ("decoded", ["--decode", a.decode])):
                    args = list(base)
                    if args[-1] == "-o":
                        out = os.path.join(tmp, f"{side}{k}")
                        args.append(out)
                    (plain if side == "plain" else decoded).append(timed(args + extra, f"{name} {side}"))
                    if args[-1].startswith(tmp):
                        shutil.rmtree(args[-1], ignore_errors=True)
            ratio = statistics.median(decoded) / statistics.median(plain)
            print(f"{name}: plain {mmm(plain)}; with --decode {a.decode}: {mmm(decoded)}; "
                  f"ratio of medians {ratio:.2f}x (of minima {min(decoded) / min(plain):.2f}x), target <= {target:g}x "
                  f"-> {'meets' if ratio <= target else 'MISSES'}; load average {os.getloadavg()[0]:.1f}")
            cp, cd = CPU[f"{name} plain"], CPU[f"{name} decoded"]
            print(f"  CPU (user+system): plain {mmm(cp)}; decoded {mmm(cd)}; ratio of medians "
                  f"{statistics.median(cd) / statistics.median(cp):.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
