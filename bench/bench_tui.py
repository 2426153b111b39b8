"""Benchmark the inspector on a big db: first paint in a real pty, keystroke latency, memory.

Usage: python bench/bench_tui.py [BIG_DB]   (default $MOSQDB_BIG_DB or /tmp/big.db, made by
../shared/tools/make-big-db.sh). Prints figures; nothing is asserted.
"""

from __future__ import annotations

import asyncio
import os
import pty
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rss_mib(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of a process in MiB, from /proc."""
    vals = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            vals[key] = int(rest.split()[0]) / 1024
    return vals.get("VmRSS", 0.0), vals.get("VmHWM", 0.0)


def first_paint(path: str, cols: int = 120, rows: int = 40) -> dict[str, float]:
    """Start `mosqdb inspect` in a pty; time the first chunk row and the completed index."""
    master, slave = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "inspector.cli", "inspect", path], stdin=slave, stdout=slave,
                            stderr=slave, cwd=ROOT, env=env, close_fds=True)
    os.close(slave)
    out = b""
    marks: dict[str, float] = {}
    deadline = t0 + 60
    while time.perf_counter() < deadline and len(marks) < 2:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                out += os.read(master, 1 << 16)
            except OSError:
                break
        now = time.perf_counter() - t0
        if "first_row" not in marks and b"last_db_id" in out:
            marks["first_row"] = now
        if "index_done" not in marks and b"chunks:" in out:
            marks["index_done"] = now
    time.sleep(0.5)
    marks["rss_mib"], marks["peak_rss_mib"] = rss_mib(proc.pid)
    os.write(master, b"q")
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait()
    os.close(master)
    return marks


async def keystrokes(path: str) -> dict[str, tuple[float, float]]:
    """Median and max ms per keystroke through Pilot (the app's own processing and render)."""
    from inspector.app import InspectorApp
    from inspector.edits import Document

    doc = Document(path)
    app = InspectorApp(doc)
    results: dict[str, tuple[float, float]] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()

        async def measure(name: str, key: str, n: int, setup: str | None = None) -> None:
            times = []
            for _ in range(n):
                if setup:
                    await pilot.press(setup)
                    await pilot.pause()
                t = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                times.append((time.perf_counter() - t) * 1000)
            results[name] = (statistics.median(times), max(times))

        await measure("down", "down", 50)
        await measure("pagedown", "pagedown", 50)
        await measure("end", "end", 5, setup="home")
        await measure("pageup (at end)", "pageup", 30)
        app.do_goto("1200000")
        await pilot.pause()
        await measure("down (middle)", "down", 50)
        app.hex.focus()
        await measure("hex right", "right", 30)
        t = time.perf_counter()
        app.apply_filter("type:retain")
        await pilot.pause()
        results["filter type:retain (numpy, incl. store columns)"] = ((time.perf_counter() - t) * 1000,) * 2
        t = time.perf_counter()
        app.do_goto("#600000")
        await pilot.pause()
        results["goto store id"] = ((time.perf_counter() - t) * 1000,) * 2
        results["rss after (MiB)"] = rss_mib(os.getpid())
    doc.close()
    return results


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MOSQDB_BIG_DB", "/tmp/big.db")
    if not os.path.exists(path):
        sys.exit(f"{path}: not found; make it with bash ../shared/tools/make-big-db.sh {path}")
    print(f"file: {path} ({os.path.getsize(path) / 2**20:.0f} MiB)")
    marks = first_paint(path)
    print(f"pty: first chunk row painted after {marks.get('first_row', float('nan')):.2f} s, "
          f"index complete on screen after {marks.get('index_done', float('nan')):.2f} s")
    print(f"pty: RSS {marks['rss_mib']:.0f} MiB (peak {marks['peak_rss_mib']:.0f} MiB) after the index")
    for name, (med, worst) in asyncio.run(keystrokes(path)).items():
        print(f"pilot: {name:48} median {med:7.1f}  max {worst:7.1f}")


if __name__ == "__main__":
    main()
