"""Migrate a mosquitto.db into the EMQX offline-message plugin's MySQL or Redis store.

The plugin looks messages up by the *exact* subscription filter string and deletes a
message on the first ack from anyone, so a migration has to decide under which keys each
queued message goes (``index_by``): ``filter`` (default) makes each queued message findable
through the filters of the clients it was queued for; ``topic`` stores it under its
concrete topic only. Ids follow the forward-packet doc's B.2 rule (``exporters.forward.content``),
so re-running a migration writes the same ids and never duplicates rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlparse

from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.migration import MigrationReport
from codec.progress import paused_gc
from codec.reader import DbFile
from exporters.migrate.mysql import stream_mysql, write_mysql_file
from exporters.migrate.plan import EmqxOptions, Planner
from exporters.migrate.redis import stream_redis, write_redis_file


def parse_target(target: str) -> tuple[str, dict[str, Any]]:
    """``mysql://U:P@H:P/DB``, ``redis://[:P@]H:P/N``, ``mysql-sql:FILE`` or ``redis-cmds:FILE``."""
    if target.startswith("mysql-sql:"):
        return "mysql-sql", {"path": target[len("mysql-sql:"):]}
    if target.startswith("redis-cmds:"):
        return "redis-cmds", {"path": target[len("redis-cmds:"):]}
    u = urlparse(target)
    if u.scheme == "mysql":
        if not u.path.strip("/"):
            raise CodecError(f"{target}: name the database (mysql://USER:PASS@HOST:PORT/DB)")
        return "mysql", {"host": u.hostname or "127.0.0.1", "port": u.port or 3306,
                         "user": unquote(u.username or "root"), "password": unquote(u.password or ""),
                         "database": unquote(u.path.strip("/"))}
    if u.scheme == "redis":
        db = u.path.strip("/") or "0"
        if not db.isdigit():
            raise CodecError(f"{target}: the database must be a number (redis://HOST:PORT/N)")
        return "redis", {"host": u.hostname or "127.0.0.1", "port": u.port or 6379, "db": int(db),
                         "password": unquote(u.password) if u.password else None,
                         "username": unquote(u.username) if u.username else None}
    raise CodecError(f"unknown target {target!r}: use sqlite, mysql://…, redis://…, mysql-sql:FILE or redis-cmds:FILE")


def migrate_emqx(db: DbFile, target: str, opts: EmqxOptions, *, dry_run: bool = False,
                 progress: Callable[[str, int, int], None] | None = None) -> MigrationReport:
    """Plan once, then write to a MySQL/Redis server or to a file for ``mysql`` / ``redis-cli --pipe``."""
    t0 = time.perf_counter()
    prog = progress or (lambda s, d, n: None)
    kind, conf = parse_target(target)
    where = f"{kind}://{conf['host']}:{conf['port']}/{conf.get('database', conf.get('db'))}" if "host" in conf else target
    rep = MigrationReport(db.path, where, dry_run=dry_run)
    with paused_gc():
        _migrate_emqx(db, kind, conf, opts, rep, dry_run, prog)
    rep.seconds = time.perf_counter() - t0
    return rep


def _migrate_emqx(db: DbFile, kind: str, conf: dict[str, Any], opts: EmqxOptions, rep: MigrationReport,
                  dry_run: bool, prog: Callable[[str, int, int], None]) -> None:
    planner = Planner(db, opts, rep, prog)
    n_ret = 0 if db.empty else db.index.counts().get(ChunkType.RETAIN, 0)
    if n_ret:
        rep.notes.append(f"{n_ret:,} retained messages are not migrated: the plugin is no retained store "
                         "(use EMQX's retainer, e.g. republish them with retain)")
    rep.count("clients", len({s.client_id for s in planner.subs}))
    if kind == "mysql" and not dry_run:
        stream_mysql(conf, planner, opts, rep, prog)
        return
    if kind == "redis" and not dry_run:
        stream_redis(conf, planner, opts, rep, prog)
        return
    p = planner.finish(list(planner.messages()))
    path = None if dry_run else conf["path"]  # a dry run (of a server too) only counts
    if kind.startswith("mysql"):
        write_mysql_file(path, p, opts, rep, prog)
    else:
        write_redis_file(path, p, opts, rep, prog)
