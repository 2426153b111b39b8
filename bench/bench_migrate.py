"""Migration figures on the big real file (make it with ../shared/tools/make-big-db.sh).

usage: python bench/bench_migrate.py [FILE]   (default: $MOSQDB_BIG or /tmp/big.db)

Times db -> sqlite (goal <= 10 s), then the EMQX store on a throwaway local MariaDB and
Redis (goal >= 50k messages/s each), started here on free ports and stopped by PID.
Machines are noisy: compare within one run.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from codec import DbFile  # noqa: E402
from codec.progress import paused_gc  # noqa: E402
from exporters.migrate.emqx import migrate_emqx  # noqa: E402
from exporters.migrate.plan import EmqxOptions, plan  # noqa: E402
from exporters.migrate.sqlite import MigrationReport, db_to_sqlite  # noqa: E402


def services() -> tuple[object, object]:
    import pytest

    import support.services as sv

    def start(gen):  # the test services are generators: reuse them here
        try:
            return gen, next(gen)
        except pytest.skip.Exception as exc:
            print(f"skipped: {exc}")
            return None, None

    redis = sv.redis_server.__wrapped__ if hasattr(sv.redis_server, "__wrapped__") else \
        sv.redis_server.__pytest_wrapped__.obj
    # MariaDB with its own defaults (the tests shrink its buffer pool to 64 MB; a server holding an
    # offline-message store would not run below the default 128 MB)
    return start(sv.mariadb_server()), start(redis())


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MOSQDB_BIG", "/tmp/big.db")
    if not os.path.exists(path):
        sys.exit(f"{path}: missing; run bash ../shared/tools/make-big-db.sh {path}")
    print(f"file: {path} ({os.path.getsize(path) / 1e6:.0f} MB), load average {os.getloadavg()[0]:.1f}")
    tmp = tempfile.mkdtemp(prefix="bench-migrate-")
    out = os.path.join(tmp, "mosquitto.sqlite3")
    with DbFile(path) as db:
        t = time.perf_counter()
        rep = db_to_sqlite(db, out)
        dt = time.perf_counter() - t
    print(f"sqlite: {dt:.1f} s ({rep.written}); {os.path.getsize(out) / 1e6:.0f} MB; goal <= 10 s")
    os.unlink(out)
    with DbFile(path) as db:
        t = time.perf_counter()
        rep = db_to_sqlite(db, None)
        print(f"sqlite --dry-run: {time.perf_counter() - t:.1f} s (the same decisions, nothing written)")
    with DbFile(path) as db:
        t = time.perf_counter()
        with paused_gc():  # as migrate_emqx runs it
            p = plan(db, EmqxOptions(), MigrationReport(path, "plan"), lambda s, d, n: None)
        plan_s = time.perf_counter() - t
    n = len(p.msgs)
    dt = plan_s
    print(f"emqx plan (read + decide): {dt:.1f} s for {n:,} messages, {len(p.subs):,} subscriptions")
    (mgen, mconf), (rgen, rconf) = services()
    if mconf is not None:
        import pymysql

        con = pymysql.connect(host=mconf["host"], port=mconf["port"], user="root", autocommit=True)
        runs = [("first run", "bench", EmqxOptions(widen_payload=True)),
                ("re-run (idempotent)", "bench", EmqxOptions(widen_payload=True)),
                ("first run, one connection", "bench1", EmqxOptions(widen_payload=True, connections=1))]
        for label, name, opts in runs:
            con.cursor().execute(f"CREATE DATABASE IF NOT EXISTS {name}")
            with DbFile(path) as db:
                t = time.perf_counter()
                rep = migrate_emqx(db, f"mysql://root@{mconf['host']}:{mconf['port']}/{name}", opts)
                dt = time.perf_counter() - t
            w = max(dt - plan_s, 1e-9)
            print(f"mysql {label} ({opts.connections} connections): {dt:.1f} s total (scan, plan and writing; the "
                  f"writes overlap the plan) = {n / dt:,.0f} messages/s; total minus a separate plan ~{w:.1f} s "
                  f"({rep.written}); goal >= 50k/s")
        con.close()
        next(mgen, None)
    if rconf is not None:
        url = f"redis://{rconf['host']}:{rconf['port']}/0"
        with DbFile(path) as db:
            t = time.perf_counter()
            rep = migrate_emqx(db, url, EmqxOptions())
            dt = time.perf_counter() - t
        w = max(dt - plan_s, 1e-9)
        print(f"redis: {dt:.1f} s total (scan, plan and writing; the writes overlap the plan) = {n / dt:,.0f} "
              f"messages/s; total minus a separate plan ~{w:.1f} s ({rep.written}); goal >= 50k/s")
        next(rgen, None)


if __name__ == "__main__":
    main()
