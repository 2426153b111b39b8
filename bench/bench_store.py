"""In-place edits of a big Mosquitto 2.1 sqlite store: seconds and peak memory (min-median-max of N runs).

usage: python bench/bench_store.py [BIG.db] [--runs 3] [--tmp DIR]
       (BIG.db default: $MOSQDB_BIG or /tmp/big.db, made by ../shared/tools/make-big-db.sh)

The store is made once from the big file (`mosqdb migrate BIG.db --to sqlite`, in a temp dir, never in the
repository). Each run copies it afresh and times, as a child process, `rm-retained STORE 'fleet/site000/#'
--in-place` and `prune-sessions STORE --no-subscriptions --in-place` (every session of the big file has subscriptions: it
finds none), `drop-client` of 1,000 of its 2,000 sessions and `trim-queue --keep-newest 10 --in-place` (every
session keeps its newest 10 of about 100 queued messages), the backup copy included; the child's
peak RSS comes from wait4. The same commands on the 168 KB 2.1.2 fixture store give the memory baseline: a
flat footprint is the same peak on both.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from timing import spread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "incoming", "2.1.2-a.sqlite3")
COMMANDS = {
    "rm-retained 'fleet/site000/#'": ["rm-retained", "{s}", "fleet/site000/#", "--in-place", "--json"],
    "prune-sessions --no-subscriptions": ["prune-sessions", "{s}", "--no-subscriptions", "--in-place", "--json"],
    # every session of the big file has subscriptions: this one removes half of them, with their queues
    "drop-client gw-00000..gw-00999": ["drop-client", "{s}", *(f"gw-{i:05d}" for i in range(1000)), "--in-place",
                                       "--json"],
    # every session keeps its newest 10 queued messages; the messages nothing else refers to go with the rest
    "trim-queue --keep-newest 10": ["trim-queue", "{s}", "--keep-newest", "10", "--in-place", "--json"],
}


def run_child(args: list[str]) -> tuple[float, int, dict]:
    """mosqdb in a child: (wall seconds, peak RSS in MiB from wait4, the --json report)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    r, w = os.pipe()
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: mosqdb, stdout into the pipe
        os.close(r)
        os.dup2(w, 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, "-m", "inspector.cli", *args], env)
    os.close(w)
    chunks = []
    while True:
        data = os.read(r, 1 << 16)
        if not data:
            break
        chunks.append(data)
    os.close(r)
    _pid, status, usage = os.wait4(pid, 0)
    dt = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"mosqdb {' '.join(args)} failed with {os.waitstatus_to_exitcode(status)}")
    return dt, usage.ru_maxrss // 1024, json.loads(b"".join(chunks))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("big", nargs="?", default=os.environ.get("MOSQDB_BIG", "/tmp/big.db"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tmp", default=None, help="where the store and its copies go (default: a new temp dir)")
    a = ap.parse_args()
    if not os.path.exists(a.big):
        sys.exit(f"{a.big}: missing; run bash ../shared/tools/make-big-db.sh {a.big}")
    tmp = tempfile.mkdtemp(prefix="bench-store-", dir=a.tmp)
    base = os.path.join(tmp, "base.sqlite3")
    try:
        dt, rss, _ = run_child(["migrate", a.big, "--to", "sqlite", "-o", base, "--json", "-q"])
        print(f"store: {base} ({os.path.getsize(base) / 1e6:.0f} MB) made in {dt:.1f} s from {a.big} "
              f"({os.path.getsize(a.big) / 1e6:.0f} MB); load average {os.getloadavg()[0]:.1f}")
        for label, argv in COMMANDS.items():
            times, peaks, small = [], [], []
            report: dict = {}
            for _ in range(a.runs):
                work = os.path.join(tmp, "mosquitto.sqlite3")
                for name in os.listdir(tmp):
                    if name.startswith("mosquitto.sqlite3"):
                        os.unlink(os.path.join(tmp, name))
                shutil.copyfile(base, work)
                dt, rss, report = run_child([x.format(s=work) for x in argv])
                times.append(dt)
                peaks.append(rss)
                if os.path.exists(FIXTURE):
                    fx = os.path.join(tmp, "fixture.sqlite3")
                    for name in os.listdir(tmp):
                        if name.startswith("fixture.sqlite3"):
                            os.unlink(os.path.join(tmp, name))
                    shutil.copyfile(FIXTURE, fx)
                    small.append(run_child([x.format(s=fx) for x in argv])[1])
            print(f"{label}: {spread(times, '{:.2f}')} s, peak RSS {spread(peaks, '{:.0f}')} MiB "
                  f"(the 168 KB fixture store: {spread(small, '{:.0f}') if small else '-'} MiB); removed {removed(report)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def removed(report: dict) -> str:
    """What a command's --json report says it removed."""
    if report.get("action") == "trim-queue":
        return (f"{report['client_msgs_removed']:,} queued from {report['clients_trimmed']:,} sessions, "
                f"{report['stores_removed']:,} messages")
    if report["retained_removed"]:
        return f"{report['retained_removed']:,} retained, {report['stores_removed']:,} messages"
    return (f"{len(report['clients_removed']):,} sessions, {report['client_msgs_removed']:,} queued, "
            f"{report['stores_removed']:,} messages")


if __name__ == "__main__":
    main()
