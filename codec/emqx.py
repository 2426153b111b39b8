"""Migrate a mosquitto.db into the EMQX offline-message plugin's MySQL or Redis store.

The plugin looks messages up by the *exact* subscription filter string and deletes a
message on the first ack from anyone, so a migration has to decide under which keys each
queued message goes (``index_by``): ``filter`` (default) makes each queued message findable
through the filters of the clients it was queued for; ``topic`` stores it under its
concrete topic only. Ids follow the forward-packet doc's B.2 rule (``exporters.forward``),
so re-running a migration writes the same ids and never duplicates rows.
"""

from __future__ import annotations

import base64
import collections
import functools
import os
import socket
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

import numpy as np

from exporters.forward import MessageSource, Options, make_id

from .errors import CodecError
from .layouts import ChunkType
from .pipeline import paused_gc
from .query import topic_matches
from .reader import DbFile
from .sqlite import MigrationReport, column_rows, require_intact, small_records
from .timeview import expires_at

BLOB_MAX = 65_535
MEDIUMBLOB_MAX = (1 << 24) - 1
ID_MAX = 64  # clientid / msgid / sender: VARCHAR(64) characters
TOPIC_MAX = 180  # VARCHAR(180) characters
DEFAULT_TTL = 7200
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


# ---------------------------------------------------------------- ids


def _b62_char(v: int) -> str:
    if v < 26:
        return chr(65 + v)
    if v < 52:
        return chr(97 + v - 26)
    if v < 61:
        return chr(48 + v - 52)
    return "9" + chr(65 + v - 61)


def base62(data: bytes) -> str:
    """``emqx_base62:encode``: 6-bit groups with a 9A/9B/9C escape, no padding."""
    full = len(data) - len(data) % 3
    head = base64.b64encode(data[:full]).decode("ascii")
    if "9" not in head and "+" not in head and "/" not in head:  # values <= 60: base64 is the same
        return head + _tail62(data[full:])
    out = []
    for i in range(0, full, 3):
        n = int.from_bytes(data[i:i + 3], "big")
        out += [_b62_char(n >> 18 & 63), _b62_char(n >> 12 & 63), _b62_char(n >> 6 & 63), _b62_char(n & 63)]
    return "".join(out) + _tail62(data[full:])


def _tail62(rest: bytes) -> str:
    if len(rest) == 2:
        n = int.from_bytes(rest, "big")
        return _b62_char(n >> 10 & 63) + _b62_char(n >> 4 & 63) + _b62_char(n & 15)
    if len(rest) == 1:
        return _b62_char(rest[0] >> 2) + _b62_char(rest[0] & 3)
    return ""


def unbase62(text: str) -> bytes:
    """``emqx_base62:decode`` (for checks): the inverse of :func:`base62`."""
    vals: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "9":
            if i + 1 >= len(text) or text[i + 1] not in "ABC":
                raise ValueError(f"bad base62 escape at {i}")
            vals.append(61 + "ABC".index(text[i + 1]))
            i += 2
            continue
        if "A" <= ch <= "Z":
            vals.append(ord(ch) - 65)
        elif "a" <= ch <= "z":
            vals.append(ord(ch) - 97 + 26)
        elif "0" <= ch <= "8":
            vals.append(ord(ch) - 48 + 52)
        else:
            raise ValueError(f"bad base62 character {ch!r} at {i}")
        i += 1
    out = bytearray()
    full = len(vals) - len(vals) % 4
    for j in range(0, full, 4):
        n = vals[j] << 18 | vals[j + 1] << 12 | vals[j + 2] << 6 | vals[j + 3]
        out += n.to_bytes(3, "big")
    rest = vals[full:]
    if len(rest) == 3:
        out += (rest[0] << 10 | rest[1] << 4 | rest[2]).to_bytes(2, "big")
    elif len(rest) == 2:
        out.append(rest[0] << 2 | rest[1])
    elif rest:
        raise ValueError("base62 text has a dangling character")
    return bytes(out)


def redis_id(hex_id: str) -> str:
    """The plugin's Redis id: the GUID as a decimal string, then base62 ("double encoding")."""
    return base62(str(int(hex_id, 16)).encode("ascii"))


def hex_from_redis_id(b62: str) -> str:
    """``from_b62``: back to the 32 uppercase hex digits (raises ValueError if not an id)."""
    digits = unbase62(b62).decode("ascii")
    if not digits.isdigit():
        raise ValueError("not a decimal GUID")
    n = int(digits)
    if n >= 1 << 128:
        raise ValueError("GUID wider than 128 bits")
    return f"{n:032X}"


# ---------------------------------------------------------------- the plan


@dataclass
class Sub:
    client_id: str
    filter: str
    qos: int


@dataclass
class Msg:
    hex_id: str
    store_id: int
    sender: str | None
    topic: str
    qos: int
    retain: bool
    payload: bytes
    ts_ms: int
    keys: list[str] = field(default_factory=list)  # filters / topic it is indexed under (Redis zsets)
    clients: list[str] = field(default_factory=list)


@dataclass
class EmqxOptions:
    index_by: str = "filter"  # or "topic"
    ttl: int = DEFAULT_TTL
    widen_payload: bool = False
    batch: int = 1000
    now: float | None = None  # expiry reference (default: the clock)
    import_ms: int | None = None  # Redis score base (default: the clock)
    reference_ms: int | None = None  # B.2 timestamp of messages without a clock-based id


@dataclass
class Plan:
    subs: list[Sub]
    msgs: list[Msg]
    clients: int
    extra_subs: list[Sub]  # exact-topic subscriptions so MySQL's `WHERE topic = filter` finds queued messages
    orphan_subs: list[Sub] = field(default_factory=list)  # exact-topic ones for deliveries no saved filter matches


def _strict(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def share_strip(filt: str) -> str:
    """The filter a shared subscription matches with (``$share/group/filter`` -> ``filter``)."""
    if filt.startswith("$share/"):
        parts = filt.split("/", 2)
        return parts[2] if len(parts) == 3 else ""
    return filt


def _read_stores(db: DbFile, needed: set[int], now: float, timestamp: Callable[[int], int], rep: MigrationReport,
                 progress: Callable[[str, int, int], None]
                 ) -> tuple[dict[int, tuple[str | None, str, bytes, int]], set[int]]:
    """(sender, topic, payload, B.2 timestamp) of the needed, unexpired stores; and the ids left out.

    Every store's id is read from its fixed place at the start of the body (no walk); only
    the needed stores are then decoded, as Arrow columns. Rows whose text may have been
    replaced (U+FFFD) are looked at one by one, to tell real invalid UTF-8 apart.
    """
    import pyarrow.compute as pc

    from exporters.arrow import iter_batches, kind_span

    from .surgery import Columns

    stores: dict[int, tuple[str | None, str, bytes, int]] = {}
    gone: set[int] = set()
    wanted = np.sort(np.fromiter(needed, dtype=np.uint64, count=len(needed)))
    if not len(wanted):
        return stores, gone
    done = 0
    # every store's id from its fixed place (no walk), then only the needed stores are decoded
    span = kind_span(db, "msg_store")
    all_ids = Columns(db).gather(span.offsets, ChunkType.MSG_STORE, ("store_id",))["store_id"].astype(np.uint64)
    rows = np.flatnonzero(wanted[np.minimum(np.searchsorted(wanted, all_ids), len(wanted) - 1)] == all_ids)
    cols = ["chunk_index", "chunk_offset", "store_id", "expiry_time", "topic", "source_id", "payload"]
    for b in iter_batches(db, "msg_store", columns=cols, rows=rows):
        done = min(done + b.num_rows, len(rows))
        progress("reading", done, len(rows))
        sid = b.column("store_id").to_numpy().view(np.uint64)
        exp = b.column("expiry_time").fill_null(0).to_numpy()
        bad = (exp > 0) & (exp <= now)
        suspect = pc.or_(pc.fill_null(pc.match_substring(b.column("topic"), "\ufffd"), False),
                         pc.fill_null(pc.match_substring(b.column("source_id"), "\ufffd"), False))
        for i in np.flatnonzero(suspect.to_numpy(zero_copy_only=False) & ~bad).tolist():
            rec = db.chunk(b.column("chunk_index")[i].as_py()).record
            try:
                rec["topic"].encode("utf-8")
                (rec["source_id"] or "").encode("utf-8")
            except UnicodeEncodeError:
                bad[i] = True
                gone.add(int(rec["store_id"]))
                offset = b.column("chunk_offset")[i].as_py()
                rep.skip("topic or sender is not valid UTF-8", f"store {rec['store_id']} at offset {offset}")
        for i in np.flatnonzero((exp > 0) & (exp <= now)).tolist():
            gone.add(int(sid[i]))
            rep.skip("stored message expired", f"store {int(sid[i])}")
        if bad.any():
            b = b.filter(~bad)
        ids = b.column("store_id").to_numpy().view(np.uint64).tolist()
        senders = [s or None for s in b.column("source_id").to_pylist()]
        stores.update(zip(ids, zip(senders, b.column("topic").to_pylist(), b.column("payload").to_pylist(),
                                   map(timestamp, ids))))
    return stores, gone


def plan(db: DbFile, opts: EmqxOptions, rep: MigrationReport, progress: Callable[[str, int, int], None]) -> Plan:
    """Everything to write, decided once for every backend (so file and live outputs agree)."""
    if opts.index_by not in ("filter", "topic"):
        raise CodecError(f"index-by must be filter or topic, not {opts.index_by!r}")
    if db.empty:
        return Plan([], [], 0, [])
    require_intact(db)
    now = time.time() if opts.now is None else opts.now
    expired: set[str] = set()
    clients: list[str] = []
    for i, rec in small_records(db, ChunkType.CLIENT):
        cid = rec["client_id"]
        exp = expires_at(rec)
        if exp is not None and exp <= now:
            expired.add(cid)
            rep.skip("session expired: its subscriptions and queue are not migrated", cid)
            continue
        if not _strict(cid):
            rep.skip("client id is not valid UTF-8", f"client[{i}]")
            expired.add(cid)
            continue
        clients.append(cid)
    subs: list[Sub] = []
    by_client: dict[str, list[Sub]] = {}
    for i, rec in small_records(db, ChunkType.SUB):
        cid, filt = rec["client_id"], rec["topic"]
        if cid in expired:
            continue
        if not (_strict(cid) and _strict(filt)):
            rep.skip("subscription with a client id or filter that is not valid UTF-8", f"sub[{i}]")
            continue
        s = Sub(cid, filt, min(rec["qos"], 2))
        subs.append(s)
        by_client.setdefault(cid, []).append(s)

    # queued deliveries, in file order: (client, store id, qos, retain)
    queue: list[tuple[str, int, int, int]] = []
    names: dict[bytes, str] = {}  # client ids repeat: decode each once
    for _n, c in column_rows(db, ChunkType.CLIENT_MSG):
        direction = c.get("direction") or [1] * _n
        for raw, sid, qos, retain, mid, way in zip(c["client_id"], c["store_id"], c["qos"], c["retain"], c["mid"],
                                                   direction):
            cid = names.get(raw)
            if cid is None:
                cid = names[raw] = raw.decode("utf-8", "surrogateescape")
            if cid in expired:
                continue
            if way == 0:
                rep.skip("incoming QoS 2 message awaiting PUBREL (not a delivery)", f"{cid} mid {mid}")
            elif qos == 0:
                rep.skip("QoS 0 delivery (the plugin never deletes those: they would be re-sent on every subscribe)",
                         f"{cid} store {sid}")
            else:
                queue.append((cid, sid, min(qos, 2), retain))
    needed = {q[1] for q in queue}
    source = MessageSource(db, Options(mode="delivery", reference_ms=opts.reference_ms))
    stores, gone = _read_stores(db, needed, now, source.timestamp, rep, progress)

    @functools.cache
    def matching(cid: str, topic: str) -> tuple[Sub, ...]:
        """The client's subscriptions matching ``topic`` (a client gets many messages on one topic)."""
        return tuple(s for s in by_client.get(cid, ()) if topic_matches(share_strip(s.filter), topic))

    msgs: dict[int, Msg] = {}
    extra: dict[tuple[str, str], Sub] = {}
    orphans: dict[tuple[str, str], Sub] = {}
    pairs: dict[tuple[str, str], tuple[tuple[str, ...], bool]] = {}  # (client, topic) -> (index keys, matched)
    unmatched = 0
    by_filter = opts.index_by == "filter"
    for cid, sid, qos, retain in queue:
        st = stores.get(sid)
        if st is None:
            if sid not in gone:
                rep.skip("queue entry refers to a store that is not in the file", f"{cid} store {sid}")
            continue
        sender, topic, payload, ts = st
        known = pairs.get((cid, topic))
        if known is None:  # once per (client, topic): a client gets many messages on one topic
            matched = [s for s in by_client.get(cid, ()) if topic_matches(share_strip(s.filter), topic)]
            filters = [s.filter for s in matched] if by_filter else []
            known = pairs[(cid, topic)] = (tuple(dict.fromkeys([topic, *filters])), bool(matched))
            for sub in matched if by_filter else ():
                if sub.filter != topic and (cid, topic) not in extra:
                    extra[(cid, topic)] = Sub(cid, topic, sub.qos)
            if not matched and by_filter:
                orphans[(cid, topic)] = Sub(cid, topic, qos)
        keys, any_match = known
        if not any_match:
            unmatched += 1
        m = msgs.get(sid)
        if m is None:
            msgs[sid] = Msg(make_id(ts, sid), sid, sender, topic, qos, bool(retain), payload, ts, list(keys), [cid])
            continue
        m.qos = max(m.qos, qos)
        m.retain = m.retain or bool(retain)
        if cid not in m.clients:
            m.clients.append(cid)
        m.keys.extend(k for k in keys if k not in m.keys)
    if unmatched:
        how = ("an exact-topic subscription was added for each so the plugin delivers them" if opts.index_by == "filter"
               else "stored under the topic only")
        rep.notes.append(f"{unmatched:,} queued deliveries match none of their client's saved subscriptions "
                         f"(e.g. through a shared subscription, which Mosquitto does not save): {how}")
    if opts.index_by == "topic":
        exact = {(s.client_id, s.filter) for s in subs}
        miss = sum(1 for m in msgs.values() for c in m.clients if (c, m.topic) not in exact)
        if miss:
            rep.notes.append(f"--index-by topic: {miss:,} queued deliveries go to clients with no subscription equal "
                             "to the topic: the plugin delivers them only to a client subscribing to the exact topic")
    return Plan(subs, list(msgs.values()), len(clients), list(extra.values()), list(orphans.values()))


# ---------------------------------------------------------------- limits


def ci_key(text: str) -> str:
    """Roughly how utf8mb4_general_ci compares: case and accents ignored, trailing spaces too."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text.casefold())
                   if not unicodedata.combining(ch)).rstrip(" ")


def check_mysql_limits(p: Plan, opts: EmqxOptions, rep: MigrationReport) -> tuple[list[Sub], list[Msg], str | None]:
    """Drop (and report) rows MySQL would reject; say which payload type is needed."""
    subs = []
    seen: dict[tuple[str, str], Sub] = {}
    for s in p.subs + p.extra_subs + p.orphan_subs:  # (client, topic) pairs never overlap
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
            subs.append(s)
    msgs = []
    widen: str | None = None
    long_ids = any(len(c) > ID_MAX for m in p.msgs for c in m.clients)
    for m in p.msgs:
        if (len(m.topic) <= TOPIC_MAX and len(m.payload) <= BLOB_MAX and (m.sender is None or len(m.sender) <= ID_MAX)
                and not long_ids):
            msgs.append(m)  # the usual case, decided in one test
            continue
        if all(len(c) > ID_MAX for c in m.clients):
            rep.skip(f"queued only for clients whose id is longer than {ID_MAX} characters", m.topic[:80])
        elif len(m.topic) > TOPIC_MAX:
            rep.skip(f"topic longer than {TOPIC_MAX} characters (mqtt_msg.topic)", m.topic[:80])
        elif m.sender is not None and len(m.sender) > ID_MAX:
            rep.skip(f"sender client id longer than {ID_MAX} characters (mqtt_msg.sender)", m.sender[:80])
        elif len(m.payload) > BLOB_MAX and not opts.widen_payload:
            rep.skip(f"payload over {BLOB_MAX:,} bytes (BLOB); use --widen-payload to ALTER it to MEDIUMBLOB",
                     f"{m.topic} ({len(m.payload):,} bytes)")
        else:
            if len(m.payload) > MEDIUMBLOB_MAX:
                widen = "LONGBLOB"
            elif len(m.payload) > BLOB_MAX and widen is None:
                widen = "MEDIUMBLOB"
            msgs.append(m)
    return subs, msgs, widen


# ---------------------------------------------------------------- MySQL statements


def sql_str(value: str | None) -> str:
    if value is None:
        return "NULL"
    out = value.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0").replace("\n", "\\n")
    return "'" + out.replace("\r", "\\r").replace("\x1a", "\\Z") + "'"


def sql_bytes(value: bytes) -> str:
    return "x'" + value.hex().upper() + "'" if value else "''"


# Rows go through a session-local staging table: MariaDB truncates long binary literals in a
# UNION ALL derived table (modulo 64 KiB, without an error), and INSERT ... SELECT from a real
# table keeps the idempotency check (NOT EXISTS on msgid) in one statement per batch.
STAGE = ("CREATE TEMPORARY TABLE IF NOT EXISTS mosqdb_stage (seq BIGINT NOT NULL PRIMARY KEY, msgid VARCHAR(64), "
         "sender VARCHAR(64), topic VARCHAR(180) NOT NULL, qos TINYINT NOT NULL, retain TINYINT NOT NULL, "
         "payload LONGBLOB, arrived DATETIME NOT NULL) DEFAULT CHARSET=utf8mb4")


def stage_messages_sql(batch: list[Msg], first_seq: int) -> str:
    rows = ",\n ".join(
        f"({first_seq + i},{sql_str(m.hex_id)},{sql_str(m.sender)},{sql_str(m.topic)},{m.qos},{int(m.retain)},"
        f"{sql_bytes(m.payload)},FROM_UNIXTIME({m.ts_ms}/1000))" for i, m in enumerate(batch))
    return f"INSERT INTO mosqdb_stage (seq,msgid,sender,topic,qos,retain,payload,arrived) VALUES\n {rows}"


# one idempotent insert per batch: rows whose msgid is already there are left alone
INSERT_STAGED = ("INSERT INTO mqtt_msg (msgid,sender,topic,qos,retain,payload,arrived) "
                 "SELECT s.msgid,s.sender,s.topic,s.qos,s.retain,s.payload,s.arrived FROM mosqdb_stage s "
                 "WHERE NOT EXISTS (SELECT 1 FROM mqtt_msg m WHERE m.msgid = s.msgid)")


def insert_values_sql(batch: list[Msg]) -> str:
    rows = ",\n ".join(
        f"({sql_str(m.hex_id)},{sql_str(m.sender)},{sql_str(m.topic)},{m.qos},{int(m.retain)},"
        f"{sql_bytes(m.payload)},FROM_UNIXTIME({m.ts_ms}/1000))" for m in batch)
    return f"INSERT INTO mqtt_msg (msgid,sender,topic,qos,retain,payload,arrived) VALUES\n {rows}"


def insert_subs_sql(batch: list[Sub]) -> str:
    rows = ",".join(f"({sql_str(s.client_id)},{sql_str(s.filter)},{s.qos})" for s in batch)
    return f"INSERT INTO mqtt_sub (clientid,topic,qos) VALUES {rows} ON DUPLICATE KEY UPDATE qos=VALUES(qos)"


def _batches(items: list[Any], size: int, weigh: Callable[[Any], int]) -> Iterator[list[Any]]:
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


def mysql_statements(subs: list[Sub], msgs: list[Msg], widen: str | None, opts: EmqxOptions, *, live: bool = False
                     ) -> Iterator[tuple[str, str, int]]:
    """(kind, statement, rows) in execution order: schema, subscriptions, messages in delivery order.

    A file stages each batch in a temp table and inserts what is not there yet (idempotent
    in one statement); a live run (``live``) gets empty message statements and asks the
    server which ids exist before a plain multi-row insert, which is faster.
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
    if live:
        for b in _batches(msgs, opts.batch, lambda m: 2 * len(m.payload) + 200):
            yield "msgs", insert_values_sql(b), len(b)  # the live writer drops rows already there
        return
    yield "schema", STAGE, 0
    seq = 0
    for b in _batches(msgs, opts.batch, lambda m: 2 * len(m.payload) + 200):
        yield "stage", stage_messages_sql(b, seq), 0
        yield "msgs", f"{INSERT_STAGED} AND s.seq >= {seq} ORDER BY s.seq", len(b)
        seq += len(b)
    yield "stage", "DROP TEMPORARY TABLE mosqdb_stage", 0


# ---------------------------------------------------------------- Redis commands


def resp(cmd: list[bytes]) -> bytes:
    parts = [b"*%d\r\n" % len(cmd)]
    for a in cmd:
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


_HSET = (b"*16\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n$2\r\nid\r\n$%d\r\n%s\r\n$4\r\nfrom\r\n$%d\r\n%s\r\n"
         b"$3\r\nqos\r\n$1\r\n%d\r\n$5\r\ntopic\r\n$%d\r\n%s\r\n$7\r\npayload\r\n$%d\r\n%s\r\n"
         b"$2\r\nts\r\n$%d\r\n%s\r\n$6\r\nretain\r\n$%d\r\n%s\r\n")
_ZADD = b"*4\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"


def redis_commands(p: Plan, opts: EmqxOptions) -> Iterator[tuple[str, int, bytes]]:
    """(kind, replies, RESP bytes) in order: subscriptions, then per message HSET, EXPIRE and a ZADD per key."""
    for s in p.subs + p.orphan_subs:
        yield "subs", 1, resp([b"HSET", f"mqtt:sub:{s.client_id}".encode(), s.filter.encode(), str(s.qos).encode()])
    base = int(time.time() * 1000) if opts.import_ms is None else opts.import_ms
    expire_tail = b"$%d\r\n%d\r\n" % (len(str(opts.ttl)), opts.ttl)
    for i, m in enumerate(p.msgs):
        b62 = redis_id(m.hex_id).encode()
        key = b"mqtt:msg:" + b62
        sender, topic, ts = (m.sender or "").encode(), m.topic.encode(), b"%d" % m.ts_ms
        retain = b"true" if m.retain else b"false"
        score = b"%d" % (base + i)  # import time, increasing in delivery order
        parts = [_HSET % (len(key), key, len(b62), b62, len(sender), sender, m.qos, len(topic), topic,
                          len(m.payload), m.payload, len(ts), ts, len(retain), retain),
                 b"*3\r\n$6\r\nEXPIRE\r\n$%d\r\n%s\r\n" % (len(key), key) + expire_tail]
        for k in m.keys:
            zkey = b"mqtt:msg:" + k.encode()
            parts.append(_ZADD % (len(zkey), zkey, len(score), score, len(b62), b62))
        yield "msgs", len(parts), b"".join(parts)


# ---------------------------------------------------------------- targets


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
    p = plan(db, opts, rep, prog)
    n_ret = 0 if db.empty else db.index.counts().get(ChunkType.RETAIN, 0)
    if n_ret:
        rep.notes.append(f"{n_ret:,} retained messages are not migrated: the plugin is no retained store "
                         "(use EMQX's retainer, e.g. republish them with retain)")
    rep.count("clients", len({s.client_id for s in p.subs}))
    if kind.startswith("mysql"):
        subs, msgs, widen = check_mysql_limits(p, opts, rep)
        own = {id(s) for s in p.subs}
        rep.count("subscriptions", sum(1 for s in subs if id(s) in own))
        if p.extra_subs or p.orphan_subs:
            rep.count("extra exact-topic subscriptions", len(subs) - rep.written["subscriptions"])
        if widen:
            rep.notes.append(f"mqtt_msg.payload altered to {widen} (payloads over {BLOB_MAX:,} bytes)")
        stmts = mysql_statements(subs, msgs, widen, opts, live=kind == "mysql")
        if p.extra_subs and opts.index_by == "filter":
            rep.notes.append("exact-topic subscriptions were added so MySQL's `WHERE topic = filter` finds messages "
                             "queued through wildcard filters; they stay after delivery (remove them when drained)")
        if dry_run:
            rep.count("messages", len(msgs))
        elif kind == "mysql":
            _run_mysql(conf, stmts, msgs, rep, prog)
        else:
            _write_sql(conf["path"], stmts, rep, len(msgs), prog)
    else:
        rep.count("subscriptions", len(p.subs))
        if p.orphan_subs:
            rep.count("extra exact-topic subscriptions", len(p.orphan_subs))
        cmds = redis_commands(p, opts)
        rep.notes.append(f"message hashes expire after {opts.ttl} s (--ttl) and zset scores are the import time: "
                         "clients must reconnect within the plugin's message_ttl")
        if dry_run:
            rep.count("messages", len(p.msgs))
        elif kind == "redis":
            _run_redis(conf, cmds, rep, len(p.msgs), opts, prog)
        else:
            _write_resp(conf["path"], cmds, rep, len(p.msgs), prog)


def _tally(rep: MigrationReport, kind: str, replies: int) -> None:
    if kind == "msgs":
        rep.count("messages")
        rep.count("index entries", replies - 2)


def _run_mysql(conf: dict[str, Any], stmts: Iterable[tuple[str, str, int]], msgs: list[Msg], rep: MigrationReport,
               prog: Callable[[str, int, int], None]) -> None:
    import pymysql

    from .pipeline import background

    try:
        con = pymysql.connect(host=conf["host"], port=conf["port"], user=conf["user"], password=conf["password"],
                              database=conf["database"], charset="utf8mb4", autocommit=False,
                              max_allowed_packet=64 << 20)
    except pymysql.MySQLError as exc:
        raise CodecError(f"cannot connect to MySQL at {conf['host']}:{conf['port']}: {exc.args[-1]}") from None
    done = present = batches = 0
    was_empty: bool | None = None
    try:
        with con.cursor() as cur:
            cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')")
            for kind, sql, n in background(iter(stmts)):  # the next statement is built while this one runs
                try:
                    if kind == "msgs":
                        batch = msgs[done:done + n]
                        if was_empty is None:  # an empty table at the start needs no id checks
                            cur.execute("SELECT 1 FROM mqtt_msg LIMIT 1")
                            was_empty = cur.fetchone() is None
                        todo = batch
                        if not was_empty:  # count first: a re-run finds all or none, without fetching ids
                            ids = ",".join(sql_str(m.hex_id) for m in batch)
                            cur.execute(f"SELECT COUNT(DISTINCT msgid) FROM mqtt_msg WHERE msgid IN ({ids})")
                            found = cur.fetchone()[0]
                            if found == len({m.hex_id for m in batch}):
                                todo = []
                            elif found:
                                cur.execute(f"SELECT msgid FROM mqtt_msg WHERE msgid IN ({ids})")
                                there = {r[0] for r in cur.fetchall()}
                                todo = [m for m in batch if m.hex_id not in there]
                        if todo:
                            cur.execute(sql if len(todo) == len(batch) else insert_values_sql(todo))
                    else:
                        cur.execute(sql)
                except pymysql.MySQLError as exc:
                    con.rollback()
                    raise CodecError(f"MySQL refused a {kind} statement: {exc.args[-1]}") from None
                if kind == "msgs":
                    done += n
                    present += n - len(todo)
                    rep.count("messages", len(todo))
                    prog("writing", done, len(msgs))
                    batches += 1
                    if batches % 20 == 0:
                        con.commit()
            con.commit()
    finally:
        con.close()
    if present:
        rep.skip("message already in mqtt_msg (same msgid: an earlier run)", n=present)


def _write_sql(path: str, stmts: Iterable[tuple[str, str, int]], rep: MigrationReport, total: int,
               prog: Callable[[str, int, int], None]) -> None:
    from .writer import atomic_output

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


class _RedisPipe:
    """A bare RESP pipeline: every reply to HSET/EXPIRE/ZADD/SELECT/AUTH is one line, so replies are counted."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.where = f"Redis at {conf['host']}:{conf['port']}"
        try:
            self.sock = socket.create_connection((conf["host"], conf["port"]), timeout=60)
        except OSError as exc:
            raise CodecError(f"cannot connect to {self.where}: {exc.strerror or exc}") from None
        self.errors: list[bytes] = []
        self.pending = bytearray()
        self.inflight: collections.deque[int] = collections.deque()
        hello = []
        if conf["password"] is not None:
            auth = [b"AUTH"] + ([conf["username"].encode()] if conf["username"] else []) + [conf["password"].encode()]
            hello.append(resp(auth))
        hello.append(resp([b"SELECT", str(conf["db"]).encode()]))
        self.send(b"".join(hello), len(hello))
        if self.errors:
            raise CodecError(f"{self.where}: {self.errors[0].decode(errors='replace')}")

    def send(self, data: bytes, replies: int, window: int = 0) -> None:
        """Send commands; read replies of all but the last ``window`` sends (the server works on
        those while the next batch is encoded and sent)."""
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise CodecError(f"{self.where}: {exc.strerror or exc}") from None
        self.inflight.append(replies)
        while len(self.inflight) > window:
            self._collect(self.inflight.popleft())

    def flush(self) -> None:
        while self.inflight:
            self._collect(self.inflight.popleft())

    def _collect(self, replies: int) -> None:
        buf = self.pending
        seen = buf.count(b"\r\n")
        try:
            while seen < replies:
                got = self.sock.recv(1 << 20)
                if not got:
                    raise CodecError(f"{self.where} closed the connection")
                start = max(len(buf) - 1, 0)  # a CRLF may straddle two reads
                buf += got
                seen += buf.count(b"\r\n", start)
        except OSError as exc:
            raise CodecError(f"{self.where}: {exc.strerror or exc}") from None
        lines = bytes(buf).split(b"\r\n", replies)
        self.pending = bytearray(lines[replies]) if len(lines) > replies else bytearray()
        self.errors += [ln for ln in lines[:replies] if ln.startswith(b"-")]

    def close(self) -> None:
        self.sock.close()


def _resp_batches(cmds: Iterable[tuple[str, int, bytes]], rep: MigrationReport, batch: int
                  ) -> Iterator[tuple[bytes, int, int]]:
    """(RESP bytes, replies, messages) of ``batch`` messages at a time."""
    buf: list[bytes] = []
    replies = msgs = 0
    for kind, n, data in cmds:
        buf.append(data)
        replies += n
        _tally(rep, kind, n)
        if kind == "msgs":
            msgs += 1
            if msgs == batch:
                yield b"".join(buf), replies, msgs
                buf, replies, msgs = [], 0, 0
    if buf:
        yield b"".join(buf), replies, msgs


def _run_redis(conf: dict[str, Any], cmds: Iterable[tuple[str, int, bytes]], rep: MigrationReport, total: int,
               opts: EmqxOptions, prog: Callable[[str, int, int], None]) -> None:
    from .pipeline import background

    pipe = _RedisPipe(conf)
    done = 0
    try:
        # the next batch is encoded in a thread while the server works on this one
        for data, replies, n in background(_resp_batches(cmds, rep, opts.batch)):
            pipe.send(data, replies, window=2)
            done += n
            prog("writing", done, total)
        pipe.flush()
    finally:
        pipe.close()
    if pipe.errors:
        raise CodecError(f"{pipe.where} refused {len(pipe.errors)} commands "
                         f"(first: {pipe.errors[0].decode(errors='replace')})")


def _write_resp(path: str, cmds: Iterable[tuple[str, int, bytes]], rep: MigrationReport, total: int,
                prog: Callable[[str, int, int], None]) -> None:
    from .writer import atomic_output

    done = 0
    f: BinaryIO
    with atomic_output(path) as f:
        for kind, n, data in cmds:
            f.write(data)
            _tally(rep, kind, n)
            if kind == "msgs":
                done += 1
                if done % 10_000 == 0:
                    prog("writing", done, total)
    prog("writing", done, total)
    os.chmod(path, 0o644)
