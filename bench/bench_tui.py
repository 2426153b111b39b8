"""Benchmark the inspector on a big db: first paint in a real pty, keystroke latency, memory.

Usage: python bench/bench_tui.py [--runs N] [--check] [--no-keys] [--broker VERSION] [--diff OTHER] [--tree] [BIG_DB]
(default $MOSQDB_BIG, $MOSQDB_BIG_DB or /tmp/big.db, made by ../shared/tools/make-big-db.sh). ``--runs N`` starts
the TUI N times and prints min, median and max of the first paint; ``--check`` also runs the checker (`c`) in the
TUI and samples memory; ``--broker VERSION`` starts ``inspect --broker VERSION`` N times: how long until the
verdict is in the header, and the memory of the TUI and of the model's child process; ``--diff OTHER`` the same
for ``inspect --diff``; ``--tree`` the topic tree and the sessions view (bench_tree.py's TUI part). Prints
figures; nothing is asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

from timing import TuiPty, rss_mib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def children_peak(pid: int) -> float:
    """Peak RSS (MiB) of the child processes of any thread of ``pid`` (the checker's), 0 if none."""
    peak = 0.0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for kid in kids:
            with contextlib.suppress(OSError):  # it may have ended since
                peak = max(peak, rss_mib(int(kid))[1])
    return peak


def check_in_tui(path: str, cols: int = 120, rows: int = 40, limit: float = 600) -> dict[str, float]:
    """Start the TUI, wait for the index, press `c`; sample the TUI's RSS (and a checker child's) until done."""
    tui = TuiPty([path], cwd=str(ROOT), cols=cols, rows=rows)
    marks: dict[str, float] = {"child_peak_mib": 0.0}
    started = 0.0
    while time.perf_counter() - tui.t0 < limit and tui.read(0.1):
        if started:
            marks["child_peak_mib"] = max(marks["child_peak_mib"], children_peak(tui.pid))
            if b"finding(s)" in tui.out:
                marks["check_s"] = time.perf_counter() - started
                break
        elif b"chunks:" in tui.out:
            time.sleep(3)  # the store-id columns
            marks["rss_before_check_mib"] = rss_mib(tui.pid)[0]
            tui.send(b"c")
            started, tui.out = time.perf_counter(), b""
    marks["rss_after_check_mib"], marks["peak_rss_mib"] = rss_mib(tui.pid)
    tui.send(b"\x1b")
    time.sleep(0.3)
    tui.close()
    return marks


def verdict_in_tui(path: str, version: str) -> dict[str, float]:
    """``inspect --broker VERSION``: until the verdict is in the header (the model starts once the index is built)."""
    return header_in_tui(path, ["--broker", version], rb"Mosquitto [0-9.]+(?: \(auto\))?: (loads|refuses|crashes|starts)")


def diff_in_tui(path: str, other: str) -> dict[str, float]:
    """``inspect --diff OTHER``: until the comparison's line is in the header."""
    return header_in_tui(path, ["--diff", other], rb"rows? not in it \(\+\)|: same content \(")


def header_in_tui(path: str, extra: list[str], pattern: bytes, cols: int = 160, rows: int = 40,
                  limit: float = 600) -> dict[str, float]:
    """Start ``inspect PATH *extra`` in a pty; time until ``pattern`` is on screen (the index, then the
    feature's worker), sampling the TUI's RSS and the peak of a child process (big files' jobs run in one)."""
    import re

    tui = TuiPty([path, *extra], cwd=str(ROOT), cols=cols, rows=rows)
    done = re.compile(pattern)
    marks: dict[str, float] = {"child_peak_mib": 0.0}
    while time.perf_counter() - tui.t0 < limit and tui.read():
        marks["child_peak_mib"] = max(marks["child_peak_mib"], children_peak(tui.pid))
        if "index_s" not in marks and b"chunks:" in tui.out:
            marks["index_s"] = time.perf_counter() - tui.t0
        if done.search(tui.out):
            marks["answer_s"] = time.perf_counter() - tui.t0
            break
    marks["rss_mib"], marks["peak_rss_mib"] = rss_mib(tui.pid)
    tui.close()
    return marks


KEYS = ((b"g", 0.5), (b"#600000\r", 0.5), (b"f", 0.5), (b"type:retain topic:fleet/site059/#\r", 2.5), (b"\x1b", 0.5),
        (b"f", 0.5), (b"type:retain\r", 2.5), (b"\x1b", 0.5), (b"/", 0.5), (b"/site059/dev5\r", 2.5),
        (b"g", 0.5), (b"1200000\r", 0.5), (b"\x1b[6~" * 20, 0.5))
"""The keys first_paint presses once the index is on screen, and the seconds it waits after each."""


def first_paint(path: str, cols: int = 120, rows: int = 40) -> dict[str, float]:
    """Start `mosqdb inspect` in a pty; time the first chunk row and the completed index."""
    tui = TuiPty([path], cwd=str(ROOT), cols=cols, rows=rows)
    marks: dict[str, float] = {}
    while time.perf_counter() < tui.t0 + 60 and len(marks) < 2 and tui.read():
        now = time.perf_counter() - tui.t0
        if "first_row" not in marks and b"last_db_id" in tui.out:
            marks["first_row"] = now
        if "index_done" not in marks and b"chunks:" in tui.out:
            marks["index_done"] = now
    time.sleep(0.5)
    marks["rss_mib"], marks["peak_rss_mib"] = rss_mib(tui.pid)
    # goto by store id (the store-id columns, maybe still being gathered), a type + topic filter and a
    # type filter (each given time to finish: Esc would drop its answer), a search, then page around the middle
    for keys, wait in KEYS:
        tui.send(keys)
        time.sleep(wait)
        tui.drain()
    time.sleep(2)  # a busy machine: let the last filter and paging finish before sampling
    tui.drain()
    marks["rss_after_use_mib"], marks["peak_after_use_mib"] = rss_mib(tui.pid)
    tui.close()
    return marks


async def keystrokes(path: str) -> dict[str, tuple[float, float, float]]:
    """Per key: CPU ms the app spends, ms until the list repaints, ms until the details are drawn.

    Pilot's own waiting is excluded: the times are read from the screen's refreshes.
    """
    from textual.screen import Screen

    from inspector.tui.app import InspectorApp
    from inspector.tui.model.document import Document

    refreshes: list[float] = []
    original = Screen._compositor_refresh

    def traced(self: Screen) -> None:
        original(self)
        refreshes.append(time.perf_counter())

    Screen._compositor_refresh = traced  # type: ignore[method-assign]
    doc = Document(path)
    app = InspectorApp(doc)
    results: dict[str, tuple[float, float, float]] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()

        async def measure(name: str, key: str, n: int, setup: str | None = None) -> None:
            cpu, first, last = [], [], []
            for _ in range(n):
                if setup:
                    await pilot.press(setup)
                    await pilot.pause(0.1)
                refreshes.clear()
                t, c = time.perf_counter(), time.process_time()
                await pilot.press(key)
                await pilot.pause(0.12)  # lets the debounced detail pane draw
                cpu.append((time.process_time() - c) * 1000)
                done = [r - t for r in refreshes if r > t]
                if done:
                    first.append(done[0] * 1000)
                    last.append(done[-1] * 1000)
            results[name] = (statistics.median(cpu), statistics.median(first), statistics.median(last))

        await measure("down", "down", 40)
        await measure("pagedown", "pagedown", 40)
        await measure("end", "end", 5, setup="home")
        await measure("pageup (at end)", "pageup", 20)
        app.do_goto("1200000")
        await pilot.pause()
        await measure("down (middle)", "down", 40)
        app.hex.focus()
        await measure("hex right", "right", 20)
        t = time.perf_counter()
        app.do_goto("#600000")
        results["goto store id"] = ((time.perf_counter() - t) * 1000,) * 3
        t = time.perf_counter()
        app.apply_filter("type:retain")
        results["filter type:retain"] = ((time.perf_counter() - t) * 1000,) * 3
        t = time.perf_counter()
        app.do_edit(app.item, "store_id", "600001")
        app.action_undo()
        results["edit a field + undo"] = ((time.perf_counter() - t) * 1000,) * 3
    Screen._compositor_refresh = original  # type: ignore[method-assign]
    doc.close()
    return results


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description="benchmark the inspector TUI on a big db")
    ap.add_argument("path", nargs="?",
                    default=os.environ.get("MOSQDB_BIG") or os.environ.get("MOSQDB_BIG_DB") or "/tmp/big.db")
    ap.add_argument("--no-keys", action="store_true", help="skip the keystroke latencies (pilot)")
    ap.add_argument("--runs", type=int, default=1, help="start the TUI this many times (min, median, max)")
    ap.add_argument("--check", action="store_true", help="also run the checker in the TUI and sample its memory")
    ap.add_argument("--broker", metavar="VERSION", help="only time `inspect --broker VERSION` until its verdict")
    ap.add_argument("--diff", metavar="OTHER", help="only time `inspect --diff OTHER` until the comparison is shown")
    ap.add_argument("--tree", action="store_true",
                    help="only the topic tree and the sessions view in the TUI (t, opening a node, s: CPU, wall "
                         "and peak RSS, min-median-max over --runs, at least 3), as bench_tree.py measures them")
    args = ap.parse_args()
    path = args.path
    if not os.path.exists(path):
        sys.exit(f"{path}: not found; make it with bash ../shared/tools/make-big-db.sh {path}")
    print(f"file: {path} ({os.path.getsize(path) / 2**20:.0f} MiB)")
    if args.tree:
        from bench_tree import in_tui as tree_in_tui

        tree_in_tui(path, max(args.runs, 3))
        return
    if args.broker or args.diff:
        what = f"--broker {args.broker}" if args.broker else f"--diff {args.diff}"
        got = [verdict_in_tui(path, args.broker) if args.broker else diff_in_tui(path, args.diff)
               for _ in range(max(args.runs, 1))]
        for key, unit in (("index_s", "s"), ("answer_s", "s"), ("peak_rss_mib", "MiB"), ("child_peak_mib", "MiB")):
            vals = sorted(g.get(key, float("nan")) for g in got)
            print(f"inspect {what}, {len(got)} runs: {key} min {vals[0]:.2f}  "
                  f"median {statistics.median(vals):.2f}  max {vals[-1]:.2f} {unit}")
        return
    runs = []
    for k in range(max(args.runs, 1)):
        runs.append(first_paint(path))
        r = runs[-1]
        print(f"pty run {k + 1} (load {os.getloadavg()[0]:.1f}): first row {r.get('first_row', float('nan')):.2f} s, "
              f"index {r.get('index_done', float('nan')):.2f} s, RSS {r['rss_mib']:.0f} MiB after the index, "
              f"{r['rss_after_use_mib']:.0f} MiB (peak {r['peak_after_use_mib']:.0f}) after goto + filters + search + paging",
              flush=True)
    marks = runs[0]
    if len(runs) > 1:
        for key in ("first_row", "index_done", "rss_mib", "rss_after_use_mib", "peak_after_use_mib"):
            vals = sorted(v for r in runs if (v := r.get(key, float("nan"))) == v)  # the runs that saw it
            if vals:
                print(f"pty, {len(vals)} of {len(runs)} runs: {key} min {vals[0]:.2f}  median "
                      f"{statistics.median(vals):.2f}  max {vals[-1]:.2f}")
    print(f"pty: first chunk row painted after {marks.get('first_row', float('nan')):.2f} s, "
          f"index complete on screen after {marks.get('index_done', float('nan')):.2f} s")
    print(f"pty: RSS {marks['rss_mib']:.0f} MiB (peak {marks['peak_rss_mib']:.0f} MiB) after the index; "
          f"{marks['rss_after_use_mib']:.0f} MiB (peak {marks['peak_after_use_mib']:.0f} MiB) after goto store id, "
          "a type + topic filter, a type filter, a search and paging")
    if args.check:
        c = check_in_tui(path)
        print(f"pty, check (c): findings after {c.get('check_s', float('nan')):.1f} s; TUI RSS "
              f"{c.get('rss_before_check_mib', float('nan')):.0f} MiB before, {c['rss_after_check_mib']:.0f} after, "
              f"peak {c['peak_rss_mib']:.0f} MiB; checker child process peak {c['child_peak_mib']:.0f} MiB "
              "(0: checked in the TUI's own process)")
    if args.no_keys:
        return
    print("pilot (medians, ms):                      app CPU   list repainted   details drawn")
    for name, (cpu, first, last) in asyncio.run(keystrokes(path)).items():
        print(f"  {name:44} {cpu:7.1f}   {first:14.1f}   {last:13.1f}")


if __name__ == "__main__":
    main()
