"""Bench: trim-queue, pattern pruning and the per-client table on the big db, each in a fresh process.

    python bench/bench_trim.py [BIG_DB] [--repeat N]     (default $MOSQDB_BIG_DB or /tmp/big.db; N = 3)

Make the file with ../shared/tools/make-big-db.sh (2,000 sessions gw-NNNNN, 200 k queued messages).
Prints min-median-max over N runs of the wall time inside the process (start-up excluded), its CPU
time (user + system, whole process: what a busy machine changes least), its peak RSS and its peak anonymous memory (RSS minus the mapped file pages the kernel can drop: what the
command itself holds). The output of ``-o`` goes to a temp dir beside the file and is removed after
each run; its fsync is part of the time.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_surgery import run  # noqa: E402  (one child harness for the surgery benches)
from timing import spread


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 3
    if "--repeat" in sys.argv:
        args.remove(str(repeat))
    big = Path(args[0] if args else os.environ.get("MOSQDB_BIG_DB", "/tmp/big.db"))
    if not big.exists():
        raise SystemExit(f"{big}: missing; make it with ../shared/tools/make-big-db.sh {big}")
    tmp = Path(tempfile.mkdtemp(prefix="mosqdb-bench-", dir=big.parent))
    out = str(tmp / "out.db")
    cases = [
        ("trim-queue --keep-newest 10 -o OUT", ["trim-queue", str(big), "--keep-newest", "10", "-o", out]),
        ("trim-queue --keep-newest 10 --dry-run", ["trim-queue", str(big), "--keep-newest", "10", "--dry-run"]),
        ("prune-sessions --client-glob 'dev*' --dry-run",
         ["prune-sessions", str(big), "--client-glob", "dev*", "--dry-run"]),
        ("prune-sessions --client-glob 'gw-00*' --dry-run",
         ["prune-sessions", str(big), "--client-glob", "gw-00*", "--dry-run"]),
        ("stats --by client", ["stats", str(big), "--by", "client"]),
    ]
    try:
        with open(big, "rb") as f:  # warm the page cache once so every case starts equal
            while f.read(1 << 24):
                pass
        print(f"file: {big} ({big.stat().st_size / 1e6:.1f} MB), {repeat} runs each, min–median–max")
        print(f"{'command':<48}{'seconds':>18}{'CPU s':>18}{'peak RSS MiB':>16}{'peak anon MiB':>16}  result")
        for name, cmd in cases:
            runs = []
            for _ in range(repeat):
                runs.append(run(cmd))
                for p in tmp.iterdir():
                    p.unlink()
            print(f"{name:<48}{spread([float(r['seconds']) for r in runs]):>18}{spread([float(r['cpu']) for r in runs]):>18}"
                  f"{spread([float(r['peak_rss_mb']) for r in runs], '{:.0f}'):>16}"
                  f"{spread([float(r['peak_anon_mb']) for r in runs], '{:.0f}'):>16}  {runs[-1]['last'][:80]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
