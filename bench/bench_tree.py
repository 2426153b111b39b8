"""Benchmark the topic tree and the sessions view on a big db: in process, and in the TUI in a real pty.

Usage: python bench/bench_tree.py [--runs N] [--no-tui] [BIG_DB]
(default $MOSQDB_BIG, $MOSQDB_BIG_DB or /tmp/big.db, made by ../shared/tools/make-big-db.sh).

In process, with the index built (as in the TUI): the tree's first level (reading every stored message's
topic, counting the references, cutting the first level), opening every first-level node and the
second level under the biggest one (the slowest open is reported), and the sessions view's rows. Wall and
CPU seconds are both printed (min-median-max over N runs) with the load average: on a busy machine
the wall clock is the CPU time plus the wait for a core. In the TUI: `t` until the tree is painted, `s`
until the sessions table is, and the TUI's RSS after each (peak too). Prints figures; nothing is asserted.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from timing import TuiPty, rss_mib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t, time.process_time() - c, out


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{statistics.median(values):.3f}-{max(values):.3f} s"


def in_process(path: str, runs: int) -> None:
    from codec import DbFile
    from codec.ops.tree import build
    from inspector.tui.model.sessions import session_rows

    db = DbFile(path)
    for _ in db.scan_steps():
        pass
    marks: dict[str, list[float]] = {}

    def note(name: str, wall: float, cpu: float) -> None:
        marks.setdefault(f"{name} wall", []).append(wall)
        marks.setdefault(f"{name} cpu", []).append(cpu)

    for _ in range(runs):
        wall, cpu, tree = timed(lambda: (lambda t: (t, t.children(t.root)))(build(db)))
        tree = tree[0]  # type: ignore[index]
        note("tree first level", wall, cpu)
        worst = (0.0, 0.0, "")
        first = tree.children(tree.root)
        for node in first:
            w, c, _kids = timed(lambda n=node, t=tree: t.children(n))
            if w > worst[0]:
                worst = (w, c, node.topic)
        if first:
            for node in tree.children(first[0])[:20]:
                w, c, _kids = timed(lambda n=node, t=tree: t.children(n))
                if w > worst[0]:
                    worst = (w, c, node.topic)
            for node in tree.children(tree.children(first[0])[0])[:20]:
                w, c, _kids = timed(lambda n=node, t=tree: t.children(n))
                if w > worst[0]:
                    worst = (w, c, node.topic)
        note("slowest node open", worst[0], worst[1])
        print(f"  slowest node: {worst[2]!r}", flush=True)
        wall, cpu, _rows = timed(lambda: session_rows(db, time.time()))
        note("sessions view rows", wall, cpu)
    print(f"{path}: {db.size:,} bytes, {len(db):,} chunks; load average {os.getloadavg()[0]:.1f}")
    for name, values in marks.items():
        print(f"  {name:<28} {spread(values)}")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used: its threads' work, whatever the machine's load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def in_tui(path: str, runs: int, cols: int = 140, rows: int = 45, limit: float = 300) -> None:
    results: dict[str, list[float]] = {}
    for _ in range(runs):
        tui = TuiPty([path], cwd=str(ROOT), cols=cols, rows=rows)
        phase, started, cpu0 = "index", 0.0, 0.0
        while time.perf_counter() - tui.t0 < limit and tui.read(0.05):
            if phase == "index" and b"chunks:" in tui.out:
                time.sleep(3)  # the store-id columns
                tui.read(0.1)
                results.setdefault("rss before (MiB)", []).append(rss_mib(tui.pid)[0])
                tui.out, started, phase = b"", time.perf_counter(), "tree"
                cpu0 = cpu_s(tui.pid)
                tui.send(b"t")
            elif phase == "tree" and b"topic tree (" in tui.out and b"queued references" in tui.out:
                results.setdefault("t: tree painted (s)", []).append(time.perf_counter() - started)
                results.setdefault("t: TUI CPU until then (s)", []).append(cpu_s(tui.pid) - cpu0)
                time.sleep(0.3)
                results.setdefault("rss with the tree (MiB)", []).append(rss_mib(tui.pid)[0])
                tui.out, started, phase = b"", time.perf_counter(), "open"
                tui.send(b"\x1b[B")  # down: the first level's biggest node
                time.sleep(0.2)
                tui.send(b" ")  # open it
            elif phase == "open" and tui.out.count(b"stored") >= 3:
                results.setdefault("open a node, painted (s)", []).append(time.perf_counter() - started)
                time.sleep(0.3)
                tui.send(b"\x1b")
                time.sleep(0.5)
                tui.out, started, phase = b"", time.perf_counter(), "sessions"
                cpu0 = cpu_s(tui.pid)
                tui.send(b"s")
            elif phase == "sessions" and b"sessions by" in tui.out:
                results.setdefault("s: sessions painted (s)", []).append(time.perf_counter() - started)
                results.setdefault("s: TUI CPU until then (s)", []).append(cpu_s(tui.pid) - cpu0)
                time.sleep(0.3)
                rss, peak = rss_mib(tui.pid)
                results.setdefault("rss with both (MiB)", []).append(rss)
                results.setdefault("peak rss (MiB)", []).append(peak)
                break
        tui.send(b"\x1b")
        time.sleep(0.3)
        tui.close()
    print(f"TUI on {path} ({runs} run(s), load average {os.getloadavg()[0]:.1f}):")
    for name, values in results.items():
        print(f"  {name:<28} {min(values):.2f}-{statistics.median(values):.2f}-{max(values):.2f}")


def main() -> int:
    args = sys.argv[1:]
    runs = 3
    if "--runs" in args:
        k = args.index("--runs")
        runs = int(args[k + 1])
        del args[k:k + 2]
    tui = "--no-tui" not in args
    args = [a for a in args if a != "--no-tui"]
    path = args[0] if args else os.environ.get("MOSQDB_BIG") or os.environ.get("MOSQDB_BIG_DB") or "/tmp/big.db"
    if not os.path.exists(path):
        print(f"{path}: no such file (make one with ../shared/tools/make-big-db.sh)")
        return 2
    in_process(path, runs)
    if tui:
        in_tui(path, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
