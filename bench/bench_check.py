"""`check`, `stats` and `info` on a big file, each run in its own process, with peak RSS.

usage: python bench/bench_check.py [FILE] [--repeat N] [--no-tui] [--info-only]
       (default FILE: $MOSQDB_BIG or /tmp/big.db; N: 3)

Prints, for every round, the wall time and peak RSS of

  * ``mosqdb check FILE``
  * ``mosqdb stats FILE --by topic --depth 2``
  * ``mosqdb info FILE`` and ``mosquitto_db_dump --stats FILE`` of 2.0.22 and of 2.1.2 (the oracles found
    in ~/.cache/mosqdb-oracles; build them with ../shared/tools/build-mosquitto.sh), and the ratios
  * the TUI: ``mosqdb inspect FILE`` in a pty, ``c`` pressed once the index is done: seconds until the
    findings show, and the process's peak RSS (VmHWM)

then min-median-max over the rounds. The machine is shared and noisy: each info/oracle ratio is taken
within a round (the runs back to back), the summary gives its spread, and each round prints the load
average. ``--info-only``: only info and the oracles.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import astuple

from timing import TuiPty, child, spread, vm_hwm

# MOSQDB_REPO: time the CLI of another checkout (a baseline) with this script
ROOT = os.environ.get("MOSQDB_REPO") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLES = {v: os.path.expanduser(f"~/.cache/mosqdb-oracles/{v}/mosquitto_db_dump") for v in ("2.0.22", "2.1.2")}


def tui_check(path: str, timeout: float = 120) -> tuple[float, float, float]:
    """Seconds from pressing ``c`` to the findings, the TUI's peak RSS then, and its peak before ``c``."""
    tui = TuiPty([path], cwd=ROOT)
    try:
        if not tui.wait_for(b"chunks:", time.perf_counter() + timeout):
            return float("nan"), vm_hwm(tui.pid), float("nan")
        time.sleep(0.3)
        before = vm_hwm(tui.pid)
        tui.out = b""
        t = time.perf_counter()
        tui.send(b"c")
        done = tui.wait_for(b"finding(s)", t + timeout)
        wall = time.perf_counter() - t if done else float("nan")
        time.sleep(0.2)
        return wall, vm_hwm(tui.pid), before
    finally:
        tui.close(b"\x1bq")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repeat = 3
    if "--repeat" in sys.argv:
        repeat = int(sys.argv[sys.argv.index("--repeat") + 1])
        args = [a for a in args if a != str(repeat)]
    path = args[0] if args else os.environ.get("MOSQDB_BIG") or os.environ.get("MOSQDB_BIG_DB") or "/tmp/big.db"
    if not os.path.exists(path):
        sys.exit(f"{path} not found")
    mosqdb = [sys.executable, "-m", "inspector.cli"]
    oracles = {v: o for v, o in ORACLES.items() if os.path.exists(o)}
    if not oracles and shutil.which("mosquitto_db_dump"):
        oracles = {"PATH": shutil.which("mosquitto_db_dump")}
    print(f"file: {path} ({os.path.getsize(path) / 1e6:.0f} MB); oracles: {oracles or 'none'}")
    runs: dict[str, list[tuple[float, float]]] = {}
    ratios: dict[str, list[float]] = {v: [] for v in oracles}
    cpu_ratios: dict[str, list[float]] = {v: [] for v in oracles}
    cpus: dict[str, list[float]] = {}
    info_only = "--info-only" in sys.argv
    for r in range(repeat):
        row = {} if info_only else {
            "check": child(mosqdb + ["check", path], cwd=ROOT, check=False).pair(),
            "stats --by topic --depth 2": child(mosqdb + ["stats", path, "--by", "topic", "--depth", "2"], cwd=ROOT).pair(),
        }
        wall, cpu, rss, _ = astuple(child(mosqdb + ["info", path], cwd=ROOT))
        row["info"] = (wall, rss)
        cpus.setdefault("info", []).append(cpu)
        for v, oracle in oracles.items():
            o_wall, o_cpu, o_rss, _ = astuple(child([oracle, "--stats", path], check=False))
            row[f"{v} --stats"] = (o_wall, o_rss)
            cpus.setdefault(f"{v} --stats", []).append(o_cpu)
            ratios[v].append(wall / o_wall)
            cpu_ratios[v].append(cpu / o_cpu)
        if "--no-tui" not in sys.argv and not info_only:
            wall, peak, before = tui_check(path)
            row["tui c (after the index)"] = (wall, peak)
            runs.setdefault("tui peak before c", []).append((float("nan"), before))
        for name, v in row.items():
            runs.setdefault(name, []).append(v)
        print(f"round {r + 1} (load {os.getloadavg()[0]:.1f}): "
              + "; ".join(f"{k} {w:.2f} s {m:.0f} MiB" for k, (w, m) in row.items())
              + "".join(f"; info/{v} {rs[-1]:.2f}x (CPU {cpu_ratios[v][-1]:.2f}x)" for v, rs in ratios.items()),
              flush=True)
    print("\nmin-median-max over", repeat, "rounds")
    for name, vs in runs.items():
        print(f"  {name:28s} {spread([w for w, _ in vs])} s   peak RSS {spread([m for _, m in vs])} MiB")
    for name, vs in cpus.items():
        print(f"  {name + ' CPU':28s} {spread(vs)} s")
    for v, rs in ratios.items():
        print(f"  {'info / ' + v + ' --stats':28s} {spread(rs)}x wall, {spread(cpu_ratios[v])}x CPU "
              "(ratios within each round)")


if __name__ == "__main__":
    main()
