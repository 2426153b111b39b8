"""Bench: rm-retained and convert on the big db, against `cp` of the same file twice.

    python bench/bench_surgery.py [BIG_DB]      (default $MOSQDB_BIG_DB or /tmp/big.db)

Make the file with ../shared/tools/make-big-db.sh. Each command runs in a fresh Python
process (as a user would run it); the figures are wall time, the child's peak RSS and its
peak anonymous memory (RSS minus the file pages it mapped, which the kernel can drop).
Compare the ratios within one run (best of MOSQDB_BENCH_REPEAT=3 runs each): absolute times
depend on the machine, its load and the page cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPEAT = int(os.environ.get("MOSQDB_BENCH_REPEAT", "3"))  # best of N: the machine may be shared

CHILD = r"""
import resource, sys, threading, time
peak_anon = 0
def watch():
    global peak_anon
    while True:
        for line in open('/proc/self/status'):
            if line.startswith('RssAnon:'):
                peak_anon = max(peak_anon, int(line.split()[1]))
        time.sleep(0.02)
threading.Thread(target=watch, daemon=True).start()
from inspector.cli import main
t = time.perf_counter()
rc = main(sys.argv[1:])
dt = time.perf_counter() - t
use = resource.getrusage(resource.RUSAGE_SELF)
hwm, cpu = use.ru_maxrss, use.ru_utime + use.ru_stime
print(f"BENCH rc={rc} seconds={dt:.3f} cpu={cpu:.3f} peak_rss_mb={hwm / 1024:.0f} peak_anon_mb={peak_anon / 1024:.0f}",
      file=sys.stderr)
"""


def run(args: list[str]) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t
    line = next((x for x in r.stderr.splitlines() if x.startswith("BENCH ")), "")
    if not line:
        raise SystemExit(f"failed: {' '.join(args)}\n{r.stderr}")
    out = dict(kv.split("=") for kv in line[6:].split())
    out["wall"] = f"{wall:.3f}"
    out["last"] = r.stdout.strip().splitlines()[-2] if len(r.stdout.strip().splitlines()) > 1 else r.stdout.strip()
    return out


def cp_twice(src: Path, tmp: Path) -> float:
    t = time.perf_counter()
    for i in range(2):
        dst = tmp / f"cp{i}.db"
        subprocess.run(["cp", str(src), str(dst)], check=True)
        subprocess.run(["sync", str(dst)], check=False)
    return time.perf_counter() - t


def main() -> None:
    big = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MOSQDB_BIG_DB", "/tmp/big.db"))
    if not big.exists():
        raise SystemExit(f"{big}: missing; make it with ../shared/tools/make-big-db.sh {big}")
    size = big.stat().st_size
    tmp = Path(tempfile.mkdtemp(prefix="mosqdb-bench-", dir=big.parent))
    try:
        with open(big, "rb") as f:  # warm the page cache once so every contender starts equal
            while f.read(1 << 24):
                pass
        refs = []
        for _ in range(REPEAT):
            refs.append(cp_twice(big, tmp))
            for p in tmp.iterdir():
                p.unlink()
        ref = min(refs)
        print(f"file: {big} ({size / 1e6:.1f} MB)")
        print(f"cp twice (+sync): best {ref:.2f} s of {REPEAT} (all: {', '.join(f'{x:.2f}' for x in refs)})")
        cases = [
            ("rm-retained 'fleet/site0/#'", ["rm-retained", str(big), "fleet/site0/#", "-o", str(tmp / "rm.db")]),
            ("rm-retained 'fleet/site000/#'", ["rm-retained", str(big), "fleet/site000/#", "-o", str(tmp / "rm2.db")]),
            ("convert --to-version 5", ["convert", str(big), "--to-version", "5", "--force", "-o", str(tmp / "v5.db")]),
        ]
        print(f"{'command':<32}{'seconds':>9}{'x cp2':>8}{'peak RSS MB':>13}{'peak anon MB':>14}  result")
        for name, args in cases:
            runs = []
            for _ in range(REPEAT):
                runs.append(run(args))
                for p in tmp.iterdir():
                    p.unlink()
            r = min(runs, key=lambda x: float(x["seconds"]))
            ratio = float(r["seconds"]) / ref if ref else 0.0
            print(f"{name:<32}{float(r['seconds']):>9.2f}{ratio:>8.2f}{r['peak_rss_mb']:>13}{r['peak_anon_mb']:>14}  "
                  f"{r['last'][:90]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
