"""A big Mosquitto 2.1 sqlite store against the .db it was made from; and in-place edits of it.

usage: python bench/bench_store.py --read [BIG.db] [--store BIG.sqlite3] [--runs 3] [--only info,check,...]
       python bench/bench_store.py [BIG.db] [--runs 3] [--tmp DIR]
       (BIG.db default: $MOSQDB_BIG or /tmp/big.db, made by ../shared/tools/make-big-db.sh)

``--read``: the reading commands (``info``, ``check``, ``stats``, ``dump --json``, ``export --to
parquet``) on the store and on the .db, alternately (store, .db, store, .db, ...), as child processes;
per command the CPU seconds (user + system of the child and its threads, from wait4) and the peak
RSS of each side as min-median-max, and the store/.db ratio (min-median-max of the per-pair CPU
ratios), and the range of the 1-minute load average over the runs. The store defaults to BIG.sqlite3 beside BIG.db
(made once with ``mosqdb migrate`` when absent). CPU, not wall: the machine may be shared.

Without ``--read``: in-place edits.

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

from timing import child, spread

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


AT = ["--at", "1700000000"]  # a fixed reference time: the same work on every run
READ = {
    "info": ["info"],
    "check": ["check"],
    "stats": ["stats"],
    "dump --json": ["dump", "--json", *AT],
    "export --to parquet": ["export", "--to", "parquet", *AT, "-q"],
}


def read_commands(big: str, store: str, runs: int, only: set[str] | None) -> None:
    """Each reading command on the store and on the .db, alternately: CPU, peak RSS and the ratio."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "inspector.cli"]
    tmp = tempfile.mkdtemp(prefix="bench-store-read-")
    load = [os.getloadavg()[0]]
    print(f"store {store} ({os.path.getsize(store) / 1e6:.0f} MB), .db {big} ({os.path.getsize(big) / 1e6:.0f} MB); "
          f"{runs} runs each, alternating")
    print(f"{'command':<22} {'store CPU s':<17} {'.db CPU s':<17} {'ratio':<17} {'store MiB':<13} {'.db MiB':<13}")
    try:
        for label, args in READ.items():
            if only and label.split()[0] not in only:
                continue
            mine, theirs, ratios = [], [], []
            for _ in range(runs):
                got = []
                for f in (store, big):
                    out = ["-o", os.path.join(tmp, "export")] if args[0] == "export" else []
                    shutil.rmtree(os.path.join(tmp, "export"), ignore_errors=True)
                    # check exits 1 on errors; the big file's findings are warnings, but a bench should not die on it
                    got.append(child([*cmd, *args, *out, f], cwd=ROOT, env=env, check=args[0] != "check"))
                    load.append(os.getloadavg()[0])
                mine.append(got[0])
                theirs.append(got[1])
                ratios.append(got[0].cpu / got[1].cpu)
            print(f"{label:<22} {spread([r.cpu for r in mine]):<17} {spread([r.cpu for r in theirs]):<17} "
                  f"{spread(ratios) + 'x':<17} {spread([r.rss for r in mine], '{:.0f}'):<13} "
                  f"{spread([r.rss for r in theirs], '{:.0f}'):<13}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average (1 min) during the runs: {min(load):.1f}-{max(load):.1f} on {os.cpu_count()} cores")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("big", nargs="?", default=os.environ.get("MOSQDB_BIG", "/tmp/big.db"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tmp", default=None, help="where the store and its copies go (default: a new temp dir)")
    ap.add_argument("--read", action="store_true", help="the reading commands on the store against the .db")
    ap.add_argument("--store", default=None, help="with --read: the store made from BIG.db (default: beside it)")
    ap.add_argument("--only", default="", help="with --read: comma-separated commands (info,check,stats,dump,export)")
    a = ap.parse_args()
    if not os.path.exists(a.big):
        sys.exit(f"{a.big}: missing; run bash ../shared/tools/make-big-db.sh {a.big}")
    if a.read:
        store = a.store or os.path.splitext(a.big)[0] + ".sqlite3"
        if not os.path.exists(store):
            print(f"making the 2.1 store {store} from {a.big} (once) ...", flush=True)
            run_child(["migrate", a.big, "--to", "sqlite", "-o", store, "--json", "-q"])
        read_commands(a.big, store, a.runs, {x.strip() for x in a.only.split(",") if x.strip()} or None)
        return
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
