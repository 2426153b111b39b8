"""The EMQX plugin's MySQL store: its schema and limits, the SQL of a plan, and the writers.

A file for ``mysql DB < FILE`` stages each batch in a temporary table and inserts the rows
whose msgid is not there yet; a live server gets the messages while they are still being
built, over one or more connections (:mod:`.mysql_writer`), with explicit ids so id order
is delivery order. Rows MySQL would refuse (lengths, payload size, collation clashes of
subscriptions) are reported and left out, the same way for both.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from codec.errors import CodecError
from codec.migration import MigrationReport
from codec.writer import atomic_output
from exporters.migrate.mysql_writer import Inserter, reserve_ids
from exporters.migrate.pipeline import Memo
from exporters.migrate.plan import EmqxOptions, Msg, Plan, Planner, Sub

BLOB_MAX = 65_535
MEDIUMBLOB_MAX = (1 << 24) - 1
ID_MAX = 64  # clientid / msgid / sender: VARCHAR(64) characters
TOPIC_MAX = 180  # VARCHAR(180) characters
SQL_BATCH_BYTES = 4 << 20  # statements stay well under max_allowed_packet (16 MiB default)

MYSQL_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS `mqtt_msg` (\n"
    "  `id` bigint unsigned NOT NULL AUTO_INCREMENT,\n"
    "  `msgid` varchar(64) DEFAULT NULL,\n"
    "  `topic` varchar(180) NOT NULL,\n"
    "  `sender` varchar(64) DEFAULT NULL,\n"
    "  `qos` tinyint(1) NOT NULL DEFAULT '0',\n"
    "  `retain` tinyint(1) DEFAULT NULL,\n"
    "  `payload` blob,\n"
    "  `arrived` datetime NOT NULL,\n"
    "  PRIMARY KEY (`id`),\n"
    "  INDEX topic_index(`topic`)\n"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE IF NOT EXISTS `mqtt_sub` (\n"
    "  `clientid` varchar(64) NOT NULL,\n"
    "  `topic` varchar(180) NOT NULL,\n"
    "  `qos` tinyint(1) NOT NULL DEFAULT '0',\n"
    "  PRIMARY KEY (`clientid`, `topic`)\n"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
)


def _if_sql(cond_select: str, then: str) -> list[str]:
    """Run ``then`` only when ``cond_select`` (a count) is non-zero; works on MySQL and MariaDB."""
    return [f"SET @mosqdb_stmt := (SELECT IF(({cond_select}) > 0, '{then}', 'DO 0'))",
            "PREPARE mosqdb_s FROM @mosqdb_stmt", "EXECUTE mosqdb_s", "DEALLOCATE PREPARE mosqdb_s"]


# an index on msgid makes the idempotency check (and the plugin's own delete by msgid) cheap
MSGID_INDEX = _if_sql("SELECT 1 - COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() "
                      "AND table_name = 'mqtt_msg' AND index_name = 'mqtt_msg_msgid'",
                      "CREATE INDEX mqtt_msg_msgid ON mqtt_msg (msgid)")


def widen_sql(kind: str) -> list[str]:
    return _if_sql("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND "
                   "table_name = 'mqtt_msg' AND column_name = 'payload' AND data_type IN ('tinyblob', 'blob'"
                   + (", 'mediumblob'" if kind == "LONGBLOB" else "") + ")",
                   f"ALTER TABLE mqtt_msg MODIFY payload {kind}")


# ---------------------------------------------------------------- limits


def ci_key(text: str) -> str:
    """Roughly how utf8mb4_general_ci compares: case and accents ignored, trailing spaces too."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text.casefold())
                   if not unicodedata.combining(ch)).rstrip(" ")


def mysql_sub_limits(subs: list[Sub], rep: MigrationReport) -> list[Sub]:
    """The subscriptions MySQL takes; the others are reported."""
    out = []
    seen: dict[tuple[str, str], Sub] = {}
    for s in subs:  # (client, topic) pairs never overlap
        key = (ci_key(s.client_id), ci_key(s.filter))
        if key in seen:
            rep.skip("subscription equal to another under MySQL's case- and accent-insensitive collation "
                     "(utf8mb4_general_ci): the primary key would merge them", f"{s.client_id} {s.filter}")
            continue
        seen[key] = s
        if len(s.client_id) > ID_MAX:
            rep.skip(f"client id longer than {ID_MAX} characters (mqtt_sub.clientid)", s.client_id[:80])
        elif len(s.filter) > TOPIC_MAX:
            rep.skip(f"topic filter longer than {TOPIC_MAX} characters (mqtt_sub.topic)", s.filter[:80])
        else:
            out.append(s)
    return out


def mysql_refusal(topic: str, sender: str | None, payload_size: int, clients: list[str], opts: EmqxOptions
                  ) -> tuple[str, str] | None:
    """Why MySQL would refuse a message (reason, example), or None when it fits."""
    if all(len(c) > ID_MAX for c in clients):
        return f"queued only for clients whose id is longer than {ID_MAX} characters", topic[:80]
    if len(topic) > TOPIC_MAX:
        return f"topic longer than {TOPIC_MAX} characters (mqtt_msg.topic)", topic[:80]
    if sender is not None and len(sender) > ID_MAX:
        return f"sender client id longer than {ID_MAX} characters (mqtt_msg.sender)", sender[:80]
    if payload_size > BLOB_MAX and not opts.widen_payload:
        return (f"payload over {BLOB_MAX:,} bytes (BLOB); use --widen-payload to ALTER it to MEDIUMBLOB",
                f"{topic} ({payload_size:,} bytes)")
    return None


def mysql_keeps(m: Msg, opts: EmqxOptions, rep: MigrationReport) -> bool:
    """Does MySQL take the message? (A refusal is reported.)"""
    if (len(m.topic) <= TOPIC_MAX and len(m.payload) <= BLOB_MAX and (m.sender is None or len(m.sender) <= ID_MAX)
            and len(m.clients[0]) <= ID_MAX):
        return True  # the usual case, decided in one test
    why = mysql_refusal(m.topic, m.sender, len(m.payload), m.clients, opts)
    if why is not None:
        rep.skip(*why)
    return why is None


def payload_type(sizes: Iterable[int]) -> str | None:
    """The BLOB type ``payload`` must be widened to for these payload sizes (None: BLOB will do)."""
    big = max(sizes, default=0)
    return "LONGBLOB" if big > MEDIUMBLOB_MAX else "MEDIUMBLOB" if big > BLOB_MAX else None


def check_mysql_limits(p: Plan, opts: EmqxOptions, rep: MigrationReport) -> tuple[list[Sub], list[Msg], str | None]:
    """Drop (and report) rows MySQL would reject; say which payload type is needed."""
    subs = mysql_sub_limits(p.subs + p.extra_subs + p.orphan_subs, rep)
    msgs = [m for m in p.msgs if mysql_keeps(m, opts, rep)]
    return subs, msgs, payload_type(len(m.payload) for m in msgs if len(m.payload) > BLOB_MAX)


def mysql_payload_type(planner: Planner) -> str | None:
    """The payload type MySQL needs for the messages it will take, known before they are built
    (a live writer must widen the column before the first insert)."""
    big = {sid for sid, st in planner.stores.items() if len(st[2]) > BLOB_MAX}
    if not big:
        return None
    clients: dict[int, list[str]] = {}
    for cid, sid, _q, _r in planner.queue:
        if sid in big:
            clients.setdefault(sid, []).append(cid)
    sizes = []
    for sid, cids in clients.items():
        sender, topic, payload, _ts = planner.stores[sid]
        if mysql_refusal(topic, sender, len(payload), cids, planner.opts) is None:
            sizes.append(len(payload))
    return payload_type(sizes)


# ---------------------------------------------------------------- MySQL statements


_SQL_SPECIAL = re.compile("[\\\\'\0\n\r\x1a]")


def sql_str(value: str | None) -> str:
    if value is None:
        return "NULL"
    if _SQL_SPECIAL.search(value) is None:
        return "'" + value + "'"  # the usual case: nothing to escape
    out = value.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0").replace("\n", "\\n")
    return "'" + out.replace("\r", "\\r").replace("\x1a", "\\Z") + "'"


def sql_bytes(value: bytes) -> str:
    return "x'" + value.hex() + "'" if value else "''"


def message_rows(batch: list[Msg], quoted: Memo, lead: Iterable[int] | None = None) -> str:
    """``(msgid,sender,topic,qos,retain,payload,arrived)`` tuples, each after a number from ``lead``
    when given (a staging seq or an explicit id). A msgid is hex digits: it never needs escaping."""
    rows = [f"'{m.hex_id}',{quoted[m.sender]},{quoted[m.topic]},{m.qos},{int(m.retain)},{sql_bytes(m.payload)},"
            f"FROM_UNIXTIME({m.ts_ms}/1000)" for m in batch]
    if lead is not None:
        rows = [f"{n},{r}" for n, r in zip(lead, rows, strict=True)]
    return "(" + "),\n (".join(rows) + ")"


# Rows go through a session-local staging table: MariaDB truncates long binary literals in a
# UNION ALL derived table (modulo 64 KiB, without an error), and INSERT ... SELECT from a real
# table keeps the idempotency check (NOT EXISTS on msgid) in one statement per batch.
STAGE = ("CREATE TEMPORARY TABLE IF NOT EXISTS mosqdb_stage (seq BIGINT NOT NULL PRIMARY KEY, msgid VARCHAR(64), "
         "sender VARCHAR(64), topic VARCHAR(180) NOT NULL, qos TINYINT NOT NULL, retain TINYINT NOT NULL, "
         "payload LONGBLOB, arrived DATETIME NOT NULL) DEFAULT CHARSET=utf8mb4")


def stage_messages_sql(batch: list[Msg], first_seq: int, quoted: Memo) -> str:
    rows = message_rows(batch, quoted, range(first_seq, first_seq + len(batch)))
    return f"INSERT INTO mosqdb_stage (seq,msgid,sender,topic,qos,retain,payload,arrived) VALUES\n {rows}"


# one idempotent insert per batch: rows whose msgid is already there are left alone
INSERT_STAGED = ("INSERT INTO mqtt_msg (msgid,sender,topic,qos,retain,payload,arrived) "
                 "SELECT s.msgid,s.sender,s.topic,s.qos,s.retain,s.payload,s.arrived FROM mosqdb_stage s "
                 "WHERE NOT EXISTS (SELECT 1 FROM mqtt_msg m WHERE m.msgid = s.msgid)")


def insert_values_sql(batch: list[Msg], quoted: Memo, ids: list[int] | None = None) -> str:
    """The batch's INSERT; with ``ids``, each row's explicit id (else AUTO_INCREMENT gives them)."""
    cols = "msgid,sender,topic,qos,retain,payload,arrived" if ids is None else "id,msgid,sender,topic,qos,retain,payload,arrived"
    return f"INSERT INTO mqtt_msg ({cols}) VALUES\n {message_rows(batch, quoted, ids)}"


def insert_subs_sql(batch: list[Sub]) -> str:
    rows = ",".join(f"({sql_str(s.client_id)},{sql_str(s.filter)},{s.qos})" for s in batch)
    return f"INSERT INTO mqtt_sub (clientid,topic,qos) VALUES {rows} ON DUPLICATE KEY UPDATE qos=VALUES(qos)"


def _batches(items: Iterable[Any], size: int, weigh: Callable[[Any], int]) -> Iterator[list[Any]]:
    batch: list[Any] = []
    total = 0
    for it in items:
        w = weigh(it)
        if batch and (len(batch) >= size or total + w > SQL_BATCH_BYTES):
            yield batch
            batch, total = [], 0
        batch.append(it)
        total += w
    if batch:
        yield batch


def mysql_statements(subs: list[Sub], msgs: list[Msg], widen: str | None, opts: EmqxOptions
                     ) -> Iterator[tuple[str, str, int]]:
    """(kind, statement, rows) of a file for ``mysql``: schema, subscriptions, messages in delivery order.

    Each batch is staged in a temp table and inserted where its msgid is not there yet, so
    loading the file twice is idempotent in one statement per batch.
    """
    for s in MYSQL_SCHEMA:
        yield "schema", s, 0
    for s in MSGID_INDEX:
        yield "schema", s, 0
    if widen:
        for s in widen_sql(widen):
            yield "schema", s, 0
    for b in _batches(subs, opts.batch, lambda s: 64):
        yield "subs", insert_subs_sql(b), len(b)
    yield "schema", STAGE, 0
    seq = 0
    quoted = Memo(sql_str)  # topics and senders repeat: each quoted once
    for b in _batches(msgs, opts.batch, _weight):
        yield "stage", stage_messages_sql(b, seq, quoted), 0
        yield "msgs", f"{INSERT_STAGED} AND s.seq >= {seq} ORDER BY s.seq", len(b)
        seq += len(b)
    yield "stage", "DROP TEMPORARY TABLE mosqdb_stage", 0


def _weight(m: Msg) -> int:
    return 2 * len(m.payload) + 200


# ---------------------------------------------------------------- a file


def write_mysql_file(path: str | None, p: Plan, opts: EmqxOptions, rep: MigrationReport,
                     prog: Callable[[str, int, int], None]) -> None:
    """``mysql-sql:FILE`` (for ``mysql DB < FILE``) of a plan; ``path`` None (a dry run) only counts."""
    subs, msgs, widen = check_mysql_limits(p, opts, rep)
    count_mysql_subs(rep, p, subs, widen, opts)
    if path is None:
        rep.count("messages", len(msgs))
    else:
        _write_sql(path, mysql_statements(subs, msgs, widen, opts), rep, len(msgs), prog)


def _write_sql(path: str, stmts: Iterable[tuple[str, str, int]], rep: MigrationReport, total: int,
               prog: Callable[[str, int, int], None]) -> None:
    done = 0
    with atomic_output(path) as f:
        f.write(b"-- EMQX offline-message store, written by mosqdb migrate; load with: mysql DB < FILE\n"
                b"SET NAMES utf8mb4;\n")
        for kind, sql, n in stmts:
            f.write(sql.encode("utf-8") + b";\n")
            if kind == "msgs":
                done += n
                rep.count("messages", n)
                prog("writing", done, total)


# ---------------------------------------------------------------- a live server


def count_mysql_subs(rep: MigrationReport, p: Plan, subs: list[Sub], widen: str | None, opts: EmqxOptions) -> None:
    """Subscription counts and the MySQL notes (the same for a live run and a file)."""
    own = {id(s) for s in p.subs}
    rep.count("subscriptions", sum(1 for s in subs if id(s) in own))
    if p.extra_subs or p.orphan_subs:
        rep.count("extra exact-topic subscriptions", len(subs) - rep.written["subscriptions"])
    if widen:
        rep.notes.append(f"mqtt_msg.payload altered to {widen} (payloads over {BLOB_MAX:,} bytes)")
    if p.extra_subs and opts.index_by == "filter":
        rep.notes.append("exact-topic subscriptions were added so MySQL's `WHERE topic = filter` finds messages "
                         "queued through wildcard filters; they stay after delivery (remove them when drained)")


def _mysql_connect(conf: dict[str, Any]) -> Any:
    import pymysql

    try:
        con = pymysql.connect(host=conf["host"], port=conf["port"], user=conf["user"], password=conf["password"],
                              database=conf["database"], charset="utf8mb4", autocommit=False,
                              max_allowed_packet=64 << 20)
    except pymysql.MySQLError as exc:
        raise CodecError(f"cannot connect to MySQL at {conf['host']}:{conf['port']}: {exc.args[-1]}") from None
    try:
        with con.cursor() as cur:
            cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')")
    except pymysql.MySQLError as exc:
        con.close()
        raise CodecError(f"MySQL at {conf['host']}:{conf['port']}: {exc.args[-1]}") from None
    return con


def stream_mysql(conf: dict[str, Any], planner: Planner, opts: EmqxOptions, rep: MigrationReport,
                 prog: Callable[[str, int, int], None]) -> None:
    """Write to a live server while the messages are still being built.

    Schema first (widened before any insert if a payload needs it), then the messages in
    delivery order: this thread builds each batch and its statement while ``opts.connections``
    connections run the previous ones side by side. Each row then gets an explicit id from a
    reserved range, so id order is delivery order whichever batch lands first (the plugin
    reads a topic's rows in id order). Then the subscriptions, known once every message is out.
    """
    import pymysql

    widen = mysql_payload_type(planner) if opts.widen_payload else None
    cons = [_mysql_connect(conf)]
    try:
        con = cons[0]
        with con.cursor() as cur:
            was_empty = _create_schema(con, cur, widen)
            base = _reserve_and_connect(conf, cur, cons, planner, opts, rep)
            done, present = _insert_messages(cons, planner, opts, rep, prog, base, was_empty)
            rep.count("messages", done - present)
            _insert_subs(con, cur, planner, opts, rep, widen)
            con.commit()
    except pymysql.MySQLError as exc:  # a query outside a statement of ours: the id checks, a lost server
        raise CodecError(f"MySQL at {conf['host']}:{conf['port']}: {exc.args[-1]}") from None
    finally:
        for c in cons:
            c.close()
    if present:
        rep.skip("message already in mqtt_msg (same msgid: an earlier run)", n=present)


def _create_schema(con: Any, cur: Any, widen: str | None) -> bool:
    """Tables, the msgid index and a widened payload; is mqtt_msg empty (then no id checks are needed)?"""
    for sql in (*MYSQL_SCHEMA, *MSGID_INDEX, *(widen_sql(widen) if widen else ())):
        _run(con, cur, "schema", sql)
    cur.execute("SELECT 1 FROM mqtt_msg LIMIT 1")
    return cur.fetchone() is None


def _reserve_and_connect(conf: dict[str, Any], cur: Any, cons: list[Any], planner: Planner, opts: EmqxOptions,
                         rep: MigrationReport) -> int | None:
    """With several connections: the first id of a reserved range, and the extra connections
    appended to ``cons``; None (one connection, AUTO_INCREMENT ids) when no range is reserved."""
    import pymysql

    if opts.connections <= 1 or not planner.queue:
        return None
    try:
        base = reserve_ids(cur, "mqtt_msg", len(planner.queue))
    except pymysql.MySQLError as exc:
        rep.notes.append(f"one MySQL connection: no id range could be reserved ({exc.args[-1]})")
        return None
    for _ in range(opts.connections - 1):
        try:
            cons.append(_mysql_connect(conf))
        except CodecError as exc:  # e.g. max_connections: go on with those open
            rep.notes.append(f"{len(cons)} MySQL connection(s) instead of {opts.connections}: {exc}")
            break
    return base


def _insert_messages(cons: list[Any], planner: Planner, opts: EmqxOptions, rep: MigrationReport,
                     prog: Callable[[str, int, int], None], base: int | None, was_empty: bool) -> tuple[int, int]:
    """Insert the messages MySQL takes, in batches over ``cons``: (messages sent, of those already there)."""
    total = len(planner.stores)
    quoted = Memo(sql_str)  # topics and senders repeat: each quoted once
    lock = threading.Lock()
    present = 0

    def write(wcur: Any, job: tuple[list[Msg], int | None, str]) -> None:
        nonlocal present
        batch, first, sql = job
        pos = range(len(batch)) if was_empty else _not_there(wcur, batch)
        if len(pos) < len(batch):
            with lock:
                present += len(batch) - len(pos)
            sql = insert_values_sql([batch[i] for i in pos], quoted,
                                    None if first is None else [first + i for i in pos]) if pos else ""
        if sql:
            _run(wcur.connection, wcur, "msgs", sql)

    kept = (m for m in planner.messages() if mysql_keeps(m, opts, rep))
    done = 0
    inserter = Inserter(cons, write)
    try:
        for batch in _batches(kept, opts.batch, _weight):
            first = None if base is None else base + done
            ids = None if first is None else list(range(first, first + len(batch)))
            inserter.put((batch, first, insert_values_sql(batch, quoted, ids)))
            done += len(batch)
            prog("writing", min(done, total), total)
    except BaseException:
        inserter.close(ok=False)
        raise
    inserter.close()
    return done, present


def _insert_subs(con: Any, cur: Any, planner: Planner, opts: EmqxOptions, rep: MigrationReport,
                 widen: str | None) -> None:
    """The subscriptions (and exact-topic ones), known once every message is out."""
    p = planner.finish([])
    subs = mysql_sub_limits(p.subs + p.extra_subs + p.orphan_subs, rep)
    count_mysql_subs(rep, p, subs, widen, opts)
    for b in _batches(subs, opts.batch, lambda s: 64):
        _run(con, cur, "subs", insert_subs_sql(b))


def _run(con: Any, cur: Any, kind: str, sql: str) -> None:
    """Execute; a refusal rolls back and becomes a one-line error."""
    import pymysql

    try:
        cur.execute(sql)
    except pymysql.MySQLError as exc:
        con.rollback()
        raise CodecError(f"MySQL refused a {kind} statement: {exc.args[-1]}") from None


def _not_there(cur: Any, batch: list[Msg]) -> list[int]:
    """Positions in a batch of the messages whose msgid is not in mqtt_msg yet (count first: a
    re-run finds all or none, without fetching ids)."""
    ids = ",".join(sql_str(m.hex_id) for m in batch)
    cur.execute(f"SELECT COUNT(DISTINCT msgid) FROM mqtt_msg WHERE msgid IN ({ids})")
    found = cur.fetchone()[0]
    if not found:
        return list(range(len(batch)))
    if found == len({m.hex_id for m in batch}):
        return []
    cur.execute(f"SELECT msgid FROM mqtt_msg WHERE msgid IN ({ids})")
    there = {r[0] for r in cur.fetchall()}
    return [i for i, m in enumerate(batch) if m.hex_id not in there]
