"""Replay figures: messages per second into a local broker (Debian's mosquitto, started here on a free port).

usage: python bench/bench_replay.py [--retained N] [--sessions K] [--queued M] [--runs R] [--window W]

A generated db (tests/support/live.py: unique payloads, QoS 0/1/2 mixed, some with v5 properties) is
replayed R times, each into a fresh broker: retained messages alone, then --sessions (K sessions
recreated, K*M queued messages published), with and without a resume state. Prints min-median-max of
the runs, measured in this run (machines are noisy: compare within one run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from codec import DbFile  # noqa: E402
from exporters.live.plan import plan_replay  # noqa: E402
from exporters.live.replay import Replay, ReplayOptions  # noqa: E402
from exporters.live.resume import open_state  # noqa: E402
from exporters.live.url import parse_target  # noqa: E402

from support.brokers import Broker, broker_version  # noqa: E402
from support.clock import AT  # noqa: E402
from support.live import workload_db  # noqa: E402


def one(path: Path, *, sessions: bool, window: int, state: str | None) -> tuple[float, int]:
    """Seconds of one replay (planning included) and the messages it published."""
    with Broker(queue_qos0=True) as b:
        target = parse_target(f"mqtt://127.0.0.1:{b.port}")
        t = time.perf_counter()
        with DbFile(path) as db:
            plan = plan_replay(db, at=AT, sessions=sessions, retained=not sessions)
            st = open_state(state, source=str(path), target=target.display, options=plan.options)[0] if state else None
            rep = Replay(db, plan, target, ReplayOptions(window=window), st).run()
        dt = time.perf_counter() - t
    b.cleanup()
    assert rep.complete and not rep.refused
    return dt, rep.sent["retained"] + rep.sent["queued"]


def figures(label: str, runs: list[tuple[float, int]]) -> None:
    rates = sorted(n / dt for dt, n in runs)
    secs = sorted(dt for dt, _ in runs)
    print(f"{label}: {runs[0][1]:,} messages, {rates[0]:,.0f}-{statistics.median(rates):,.0f}-{rates[-1]:,.0f} "
          f"messages/s ({secs[0]:.2f}-{statistics.median(secs):.2f}-{secs[-1]:.2f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--retained", type=int, default=20_000)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--queued", type=int, default=1_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=int, default=20)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    path = workload_db(tmp / "w.db", retained=a.retained, sessions=a.sessions, queued=a.queued)
    print(f"mosquitto {'.'.join(map(str, broker_version()))} on 127.0.0.1, window {a.window}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; db {path.stat().st_size / 1e6:.1f} MB")
    for label, sessions, with_state in (("retained", False, False), ("retained + resume state", False, True),
                                        (f"{a.sessions} sessions + queued", True, False)):
        runs = []
        for i in range(a.runs):
            state = str(tmp / f"state-{label[:3]}-{i}.json") if with_state else None
            runs.append(one(path, sessions=sessions, window=a.window, state=state))
        figures(label, runs)


if __name__ == "__main__":
    main()
