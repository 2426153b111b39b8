"""Benchmark the topic tree and the sessions view on a big db: in a fresh process per run, and in the TUI
in a real pty.

Usage: python bench/bench_tree.py [--runs N] [--no-tui] [--no-process] [BIG_DB]
(default $MOSQDB_BIG, $MOSQDB_BIG_DB or /tmp/big.db, made by ../shared/tools/make-big-db.sh).

In process (a child per run, with the index built and the TUI's malloc settings, as the tree is built
there): the first level (reading every stored message's topic, counting the references, cutting the
first level), opening the first level's biggest node and its biggest child, opening a deep node (the biggest child's biggest
child, down to the last level with children), the slowest open among the first level, 20 nodes of the
second and 20 of the third, and the sessions view's rows. Each phase's CPU seconds (user + system) and
peak RSS (VmHWM, reset before the phase through /proc/self/clear_refs) are printed as min-median-max over
N runs, with the load average: the machine is shared, so CPU time is the figure, not the wall clock.

In the TUI: `t` until the tree is painted, opening the biggest node and then its biggest child, `s` until
the sessions table is:
the TUI's CPU seconds for each, the wall time a person waits, and the peak RSS of the process with the
tree and after the sessions view. Prints figures; nothing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from timing import TuiPty, rss_mib, spread

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def cpu_now() -> float:
    """This process's CPU seconds, user + system, every thread (page faults are system time)."""
    return time.process_time()


def reset_peak() -> None:
    """Let VmHWM start again from the current RSS (Linux 4.0+: ``5`` to clear_refs)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def phase(marks: dict[str, float], name: str, fn: Callable[[], object]) -> object:
    """Run ``fn``: its CPU seconds and the process's peak RSS while it ran (MiB) go into ``marks``."""
    reset_peak()
    c = cpu_now()
    out = fn()
    marks[f"{name} cpu (s)"] = cpu_now() - c
    marks[f"{name} peak (MiB)"] = rss_mib(os.getpid())[1]
    return out


def child(path: str) -> dict[str, float]:
    """One run in this process (started fresh for it): the figures of every phase."""
    from inspector.tui.model.memory import one_malloc_arena

    one_malloc_arena()  # as the TUI runs (its workers build the tree and the sessions rows)

    from codec import DbFile
    from codec.ops.tree import build
    from inspector.tui.model.sessions import session_rows

    db = DbFile(path)
    for _ in db.scan_steps():
        pass
    marks: dict[str, float] = {"rss before (MiB)": rss_mib(os.getpid())[0]}

    def first_level() -> object:
        tree = build(db)
        tree.children(tree.root)
        return tree

    tree: object = phase(marks, "first level", first_level)
    first = tree.children(tree.root)  # type: ignore[attr-defined]
    biggest = first[0] if first else tree.root  # type: ignore[attr-defined]
    phase(marks, "open biggest node", lambda: tree.children(biggest))  # type: ignore[attr-defined]
    second = [k for k in tree.children(biggest) if k.has_children]  # type: ignore[attr-defined]
    if second:
        second[0].children = None
        phase(marks, "open its biggest child", lambda: tree.children(second[0]))  # type: ignore[attr-defined]
    deep = biggest
    while deep.has_children:
        kids = [k for k in tree.children(deep) if k.has_children]  # type: ignore[attr-defined]
        if not kids:
            break
        deep = kids[0]
    marks["deep node depth"] = deep.depth
    deep.children = None  # opened on the way down: timed afresh
    phase(marks, "open deep node", lambda: tree.children(deep))  # type: ignore[attr-defined]
    worst = 0.0
    nodes = list(first)
    if first:
        second = tree.children(first[0])[:20]  # type: ignore[attr-defined]
        nodes += second + (tree.children(second[0])[:20] if second else [])  # type: ignore[attr-defined]
    for node in nodes:
        node.children = None
        c = cpu_now()
        tree.children(node)  # type: ignore[attr-defined]
        worst = max(worst, cpu_now() - c)
    marks["slowest open cpu (s)"] = worst
    marks["rss with the tree (MiB)"] = rss_mib(os.getpid())[0]
    phase(marks, "sessions view", lambda: session_rows(db, time.time()))
    return marks


def in_process(path: str, runs: int) -> None:
    results: dict[str, list[float]] = {}
    for _ in range(runs):
        out = subprocess.run([sys.executable, __file__, "--child", path], check=True, capture_output=True,
                             text=True, cwd=str(ROOT)).stdout
        for name, value in json.loads(out.splitlines()[-1]).items():
            results.setdefault(name, []).append(value)
    print(f"{path}: {os.path.getsize(path):,} bytes; in process, {runs} fresh runs, "
          f"load average {os.getloadavg()[0]:.1f}")
    for name, values in results.items():
        print(f"  {name:<30} {spread(values, '{:.3f}' if '(s)' in name else '{:.1f}')}")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used: its threads' work, whatever the machine's load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def clear_peak(pid: int) -> None:
    """Reset a process's VmHWM to its current RSS (a process of ours)."""
    with open(f"/proc/{pid}/clear_refs", "w") as fh:
        fh.write("5")


def settled(tui: TuiPty, keys: bytes = b"", quiet: float = 0.5, limit: float = 30) -> tuple[float, float]:
    """Press ``keys`` and read what is painted until the TUI has used no CPU for ``quiet`` seconds: (its CPU
    seconds, the wall seconds until its last work). What an opened node paints is no sure sign that its
    children are in (moving the cursor repaints the same lines), its CPU going quiet is."""
    cpu0 = last = cpu_s(tui.pid)
    t0 = time.perf_counter()
    busy = t0
    if keys:
        tui.send(keys)
    while time.perf_counter() - t0 < limit:
        tui.read(0.05)
        now = cpu_s(tui.pid)
        if now - last >= 0.01:
            last, busy = now, time.perf_counter()
        elif time.perf_counter() - busy >= quiet:
            break
    return last - cpu0, busy - t0


def in_tui(path: str, runs: int, cols: int = 140, rows: int = 45, limit: float = 300) -> None:
    results: dict[str, list[float]] = {}

    def note(name: str, value: float) -> None:
        results.setdefault(name, []).append(value)

    for _ in range(runs):
        tui = TuiPty([path], cwd=str(ROOT), cols=cols, rows=rows)
        phase, started, cpu0 = "index", 0.0, 0.0
        while time.perf_counter() - tui.t0 < limit and tui.read(0.05):
            if phase == "index" and b"chunks:" in tui.out:
                time.sleep(3)  # the store-id columns
                tui.read(0.1)
                note("rss before (MiB)", rss_mib(tui.pid)[0])
                note("peak before (MiB)", rss_mib(tui.pid)[1])
                tui.out, started, phase = b"", time.perf_counter(), "tree"
                cpu0 = cpu_s(tui.pid)
                tui.send(b"t")
            elif phase == "tree" and b"topic tree (" in tui.out and b"queued references" in tui.out:
                note("t: painted, wall (s)", time.perf_counter() - started)
                note("t: TUI cpu (s)", cpu_s(tui.pid) - cpu0)
                time.sleep(0.3)
                rss, peak = rss_mib(tui.pid)
                note("rss with the tree (MiB)", rss)
                note("peak with the tree (MiB)", peak)
                for label in ("open biggest", "open its child"):  # the biggest node, then its biggest child
                    tui.send(b"\x1b[B")  # down: onto it
                    settled(tui)
                    cpu, wall = settled(tui, b" ")  # open it
                    note(f"{label}: TUI cpu (s)", cpu)
                    note(f"{label}: wall (s)", wall)
                tui.send(b"\x1b")
                time.sleep(0.5)
                tui.read(0.05)
                clear_peak(tui.pid)
                tui.out, started, phase = b"", time.perf_counter(), "sessions"
                cpu0 = cpu_s(tui.pid)
                tui.send(b"s")
            elif phase == "sessions" and b"sessions by" in tui.out:
                note("s: painted, wall (s)", time.perf_counter() - started)
                note("s: TUI cpu (s)", cpu_s(tui.pid) - cpu0)
                time.sleep(0.3)
                rss, peak = rss_mib(tui.pid)
                note("rss with both (MiB)", rss)
                note("peak during s (MiB)", peak)
                break
        tui.send(b"\x1b")
        time.sleep(0.3)
        tui.close()
    print(f"TUI on {path} ({runs} run(s), load average {os.getloadavg()[0]:.1f}):")
    for name, values in results.items():
        print(f"  {name:<30} {spread(values)}")


def main() -> int:
    args = sys.argv[1:]
    if args[:1] == ["--child"]:
        print(json.dumps(child(args[1])))
        return 0
    runs = 3
    if "--runs" in args:
        k = args.index("--runs")
        runs = int(args[k + 1])
        del args[k:k + 2]
    tui = "--no-tui" not in args
    process = "--no-process" not in args
    args = [a for a in args if a not in ("--no-tui", "--no-process")]
    path = args[0] if args else os.environ.get("MOSQDB_BIG") or os.environ.get("MOSQDB_BIG_DB") or "/tmp/big.db"
    if not os.path.exists(path):
        print(f"{path}: no such file (make one with ../shared/tools/make-big-db.sh)")
        return 2
    if process:
        in_process(path, runs)
    if tui:
        in_tui(path, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
