"""`check --broker` and `guard` on a big file, each run in its own process, with peak RSS.

usage: python bench/bench_broker.py [FILE] [--repeat N] [--broker VERSION]
       (default FILE: $MOSQDB_BIG or /tmp/big.db; N: 3; VERSION: 2.0.18)

Prints, for every round, the wall time and peak RSS of

  * ``mosqdb check FILE --broker VERSION --json`` (the model on columns plus the plain checker)
  * ``mosqdb guard FILE --broker VERSION`` on a file it loads (the model only: nothing to do)
  * ``mosqdb check FILE`` (the plain checker, for comparison)

then min-median-max over the rounds.
"""

from __future__ import annotations

import os
import sys

from timing import child, spread

ROOT = os.environ.get("MOSQDB_REPO") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    path = args[0] if args else os.environ.get("MOSQDB_BIG", "/tmp/big.db")
    repeat = int(argv[argv.index("--repeat") + 1]) if "--repeat" in argv else 3
    broker = argv[argv.index("--broker") + 1] if "--broker" in argv else "2.0.18"
    if not os.path.exists(path):
        print(f"no file {path} (make one with ../shared/tools/make-big-db.sh)", file=sys.stderr)
        return 2
    mosqdb = [sys.executable, "-m", "inspector.cli"]
    runs = {
        f"check --broker {broker} --json": [*mosqdb, "check", path, "--broker", broker, "--json"],
        f"guard --broker {broker} (loads: nothing to do)": [*mosqdb, "guard", path, "--broker", broker, "--dry-run"],
        "check (plain)": [*mosqdb, "check", path],
    }
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in runs}
    for r in range(repeat):
        for name, cmd in runs.items():
            run = child(cmd, cwd=ROOT, check=False)
            wall, rss = run.wall, run.rss
            got[name].append((wall, rss))
            print(f"round {r + 1}: {name}: {wall:.2f} s, {rss:.0f} MiB", flush=True)
    print(f"\n{path}: {os.path.getsize(path):,} bytes; min-median-max of {repeat} runs")
    for name, vals in got.items():
        print(f"  {name}: {spread([w for w, _ in vals], '{:.2f}')} s, {spread([m for _, m in vals], '{:.0f}')} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
