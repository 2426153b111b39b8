"""`mosqdb repair` on a big file, intact and damaged: wall, CPU and peak RSS, this checkout against another.

    python bench/bench_repair.py [BIG_DB] [--runs N] [--baseline DIR]
           (default BIG_DB: $MOSQDB_BIG, $MOSQDB_BIG_DB or /tmp/big.db; N: 3)

The damaged variant is a copy of BIG_DB (in a temp dir, removed afterwards) with garbage written over
3,000 bytes at 37 %, 50 bytes at 61 % and 7 bytes at 83 % of the file. Each run is a child process
(``repair FILE -o OUT -q``); its CPU time and peak RSS come from wait4. ``--baseline DIR`` also runs the
same commands with the checkout DIR's code (e.g. a worktree of main) and prints the ratios, run by run
(the two sides back to back, on the same machine state). The load average is printed with each run:
the machine is shared. Both checkouts' outputs are compared byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile

from timing import Run, child, spread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAMAGE = ((0.37, 3000), (0.61, 50), (0.83, 7))


def measure(repo: str, args: list[str]) -> Run:
    """Wall, CPU (user+sys) seconds and peak RSS (MiB) of ``mosqdb ARGS`` run with ``repo``'s code."""
    env = {**os.environ, "PYTHONPATH": repo}
    return child([sys.executable, "-m", "inspector.cli", *args], cwd=repo, env=env)


def damaged_copy(src: str, folder: str) -> str:
    path = os.path.join(folder, "damaged.db")
    shutil.copyfile(src, path)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        for frac, n in DAMAGE:
            f.seek(int(size * frac))
            f.write(bytes((i * 37 + 11) & 0xFF for i in range(n)))
    return path


def sha(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db", nargs="?",
                    default=os.environ.get("MOSQDB_BIG") or os.environ.get("MOSQDB_BIG_DB") or "/tmp/big.db")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", help="another checkout (its inspector/, codec/) to compare with")
    args = ap.parse_args()
    if not os.path.exists(args.db):
        sys.exit(f"{args.db}: not found")
    sides = {"this": ROOT} | ({"baseline": os.path.abspath(args.baseline)} if args.baseline else {})
    tmp = tempfile.mkdtemp(prefix="bench-repair-", dir=os.path.dirname(os.path.abspath(args.db)))
    try:
        files = {"intact": args.db, "damaged": damaged_copy(args.db, tmp)}
        print(f"file: {args.db} ({os.path.getsize(args.db) / 2**20:.0f} MiB); damaged copy: {DAMAGE} "
              f"(fraction of the file, bytes overwritten); {args.runs} runs")
        got: dict[tuple[str, str], list[dict[str, float]]] = {}
        for run in range(args.runs):
            for name, path in files.items():
                row = []
                for side, repo in sides.items():
                    out = os.path.join(tmp, f"out-{side}.db")
                    r = measure(repo, ["repair", path, "-o", out, "-q"])
                    r["sha"] = sha(out)  # type: ignore[assignment]
                    got.setdefault((name, side), []).append(r)
                    row.append(f"{side} wall {r['wall']:.1f} s cpu {r['cpu']:.1f} s peak RSS {r['rss']:.0f} MiB")
                load = os.getloadavg()[0]
                same = len({got[(name, s)][-1]["sha"] for s in sides}) == 1
                print(f"  run {run + 1} {name:7s}: " + " | ".join(row) + f" | load {load:.1f}"
                      + ("" if len(sides) == 1 else f" | outputs {'identical' if same else 'DIFFER'}"), flush=True)
        print("min-median-max")
        for (name, side), rows in got.items():
            print(f"  {name:7s} {side:8s} wall {spread([r['wall'] for r in rows], '{:.1f}')} s, "
                  f"cpu {spread([r['cpu'] for r in rows], '{:.1f}')} s, peak RSS {spread([r['rss'] for r in rows], '{:.0f}')} MiB")
        if "baseline" in sides:
            for name in files:
                mem = [a["rss"] / b["rss"] for a, b in zip(got[(name, "this")], got[(name, "baseline")])]
                cpu = [a["cpu"] / b["cpu"] for a, b in zip(got[(name, "this")], got[(name, "baseline")])]
                print(f"  {name:7s} this / baseline: peak RSS {spread(mem)}x, cpu {spread(cpu)}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
