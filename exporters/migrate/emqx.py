"""Migrate a mosquitto.db into the EMQX offline-message plugin's MySQL or Redis store.

The plugin looks messages up by the *exact* subscription filter string and deletes a
message on the first ack from anyone, so a migration has to decide under which keys each
queued message goes (``index_by``): ``filter`` (default) makes each queued message findable
through the filters of the clients it was queued for; ``topic`` stores it under its
concrete topic only. Ids follow the forward-packet doc's B.2 rule (``exporters.forward.content``),
so re-running a migration writes the same ids and never duplicates rows.
"""

from __future__ import annotations

import base64
import collections
import functools
import os
import re
import socket
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

import numpy as np

from codec.columnar import iter_columns
from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.reader import DbFile
from codec.sqlite_store import MigrationReport
from codec.views.query import topic_matches
from codec.views.timeview import expires_at
from exporters.forward.content import make_id
from exporters.forward.source import MessageSource, Options
from exporters.migrate.pipeline import Memo, paused_gc
from exporters.migrate.sqlite import require_intact, small_records

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
    """``emqx_base62:encode``: 6-bit groups with a 9A/9B/9C escape, no padding.

    Values 0..60 have base64's characters, so whole groups are base64 with three escapes;
    the 1- or 2-byte tail (2+6 or 6+6+4 bits, not base64's padding) comes from a table.
    """
    full = len(data) - len(data) % 3
    head = base64.b64encode(data[:full]).decode("ascii")
    head = head.replace("9", "9A").replace("+", "9B").replace("/", "9C")  # values 61, 62, 63 ("9" first)
    if full == len(data):
        return head
    rest = data[full:]
    return head + (_tails2()[int.from_bytes(rest, "big")] if len(rest) == 2 else _tails1()[rest[0]])


@functools.cache
def _tails1() -> list[str]:
    return [_b62_char(b >> 2) + _b62_char(b & 3) for b in range(256)]


@functools.cache
def _tails2() -> list[str]:
    return [_b62_char(n >> 10 & 63) + _b62_char(n >> 4 & 63) + _b62_char(n & 15) for n in range(65536)]


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
    connections: int = 3  # MySQL: statements run side by side on this many connections
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

    Only the needed stores are decoded (their ids are read in place first), as Arrow columns;
    the ``invalid_utf8`` column says which topics and senders are not UTF-8.
    """
    from exporters.arrow import iter_batches, store_rows

    stores: dict[int, tuple[str | None, str, bytes, int]] = {}
    gone: set[int] = set()
    rows = store_rows(db, np.sort(np.fromiter(needed, dtype=np.uint64, count=len(needed))))
    done = 0
    cols = ["chunk_offset", "store_id", "expiry_time", "topic", "source_id", "payload", "invalid_utf8"]
    for b in iter_batches(db, "msg_store", columns=cols, rows=rows):
        done += b.num_rows
        progress("reading", done, len(rows))
        sid = b.column("store_id").to_numpy().view(np.uint64)
        exp = b.column("expiry_time").fill_null(0).to_numpy()
        bad = (exp > 0) & (exp <= now)
        for i in np.flatnonzero(bad).tolist():
            gone.add(int(sid[i]))
            rep.skip("stored message expired", f"store {int(sid[i])}")
        invalid = b.column("invalid_utf8")
        for i in np.flatnonzero(invalid.is_valid().to_numpy(zero_copy_only=False) & ~bad).tolist():
            bad[i] = True
            gone.add(int(sid[i]))
            rep.skip("topic or sender is not valid UTF-8",
                     f"store {int(sid[i])} at offset {b.column('chunk_offset')[i].as_py()}")
        if bad.any():
            b = b.filter(~bad)
        ids = b.column("store_id").to_numpy().view(np.uint64).tolist()
        senders = [s or None for s in b.column("source_id").to_pylist()]
        stores.update(zip(ids, zip(senders, b.column("topic").to_pylist(), b.column("payload").to_pylist(),
                                   map(timestamp, ids))))
    return stores, gone


def plan(db: DbFile, opts: EmqxOptions, rep: MigrationReport, progress: Callable[[str, int, int], None]) -> Plan:
    """Everything to write, decided once for every backend (so file and live outputs agree)."""
    planner = Planner(db, opts, rep, progress)
    return planner.finish(list(planner.messages()))


class Planner:
    """Reads clients, subscriptions, queues and the needed stores up front; :meth:`messages`
    then gives the messages one by one in delivery order, each complete when it comes out
    (a message queued for several clients is aggregated first), so a live writer can send
    the first ones while the rest are still being built. :meth:`finish` gives the plan."""

    def __init__(self, db: DbFile, opts: EmqxOptions, rep: MigrationReport,
                 progress: Callable[[str, int, int], None]) -> None:
        if opts.index_by not in ("filter", "topic"):
            raise CodecError(f"index-by must be filter or topic, not {opts.index_by!r}")
        self.opts, self.rep = opts, rep
        self.clients: list[str] = []
        self.subs: list[Sub] = []
        self.by_client: dict[str, list[Sub]] = {}
        self.queue: list[tuple[str, int, int, int]] = []  # (client, store id, qos, retain) in file order
        self.stores: dict[int, tuple[str | None, str, bytes, int]] = {}
        self.gone: set[int] = set()
        self.extra: dict[tuple[str, str], Sub] = {}
        self.orphans: dict[tuple[str, str], Sub] = {}
        self.unmatched = self.topic_miss = 0
        self._pairs: dict[tuple[str, str], tuple[tuple[str, ...], list[Sub]]] = {}
        if db.empty:
            return
        require_intact(db)
        now = time.time() if opts.now is None else opts.now
        expired = self._read_sessions(db, now)
        self._read_queue(db, expired)
        source = MessageSource(db, Options(mode="delivery", reference_ms=opts.reference_ms))
        self.stores, self.gone = _read_stores(db, {q[1] for q in self.queue}, now, source.timestamp, rep, progress)

    def _read_sessions(self, db: DbFile, now: float) -> set[str]:
        """Live clients and their subscriptions; the ids of the clients left out."""
        rep = self.rep
        expired: set[str] = set()
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
            self.clients.append(cid)
        for i, rec in small_records(db, ChunkType.SUB):
            cid, filt = rec["client_id"], rec["topic"]
            if cid in expired:
                continue
            if not (_strict(cid) and _strict(filt)):
                rep.skip("subscription with a client id or filter that is not valid UTF-8", f"sub[{i}]")
                continue
            s = Sub(cid, filt, min(rec["qos"], 2))
            self.subs.append(s)
            self.by_client.setdefault(cid, []).append(s)
        return expired

    def _read_queue(self, db: DbFile, expired: set[str]) -> None:
        """The outgoing QoS 1/2 deliveries of live clients, in file order; the rest is reported.

        Decided on the columns: only the reported rows are looked at one by one, and client
        ids (a few per batch, each repeated) are decoded once."""
        rep, queue = self.rep, self.queue
        names = Memo(lambda raw: raw.decode("utf-8", "surrogateescape"))  # an id repeats over its queue
        for cols in iter_columns(db, ChunkType.CLIENT_MSG):
            cids = list(map(names.__getitem__, cols.values_of("client_id", cols.data.tobytes())))
            ints = cols.ints
            qos, sids = ints["qos"], ints["store_id"].astype(np.uint64)
            live = np.ones(len(cids), dtype=bool)
            if expired and not expired.isdisjoint(cids):
                live = np.fromiter((c not in expired for c in cids), dtype=bool, count=len(cids))
            incoming = ints["direction"] == 0 if "direction" in ints else np.zeros(len(cids), dtype=bool)
            ok = live & ~incoming & (qos > 0)
            for i in np.flatnonzero(live & ~ok).tolist():
                if incoming[i]:
                    rep.skip("incoming QoS 2 message awaiting PUBREL (not a delivery)",
                             f"{cids[i]} mid {int(ints['mid'][i])}")
                else:
                    rep.skip("QoS 0 delivery (the plugin never deletes those: they would be re-sent on every "
                             "subscribe)", f"{cids[i]} store {int(sids[i])}")
            keep = np.flatnonzero(ok)
            if len(keep) < len(cids):
                cids = [cids[i] for i in keep.tolist()]
            queue.extend(zip(cids, sids[keep].tolist(), np.minimum(qos[keep], 2).tolist(),
                             ints["retain"][keep].tolist()))

    def _pair(self, cid: str, topic: str) -> tuple[tuple[str, ...], list[Sub]]:
        """(index keys, matching subscriptions) of a client's message on ``topic`` (cached: a client
        gets many messages on one topic)."""
        known = self._pairs.get((cid, topic))
        if known is None:
            matched = [s for s in self.by_client.get(cid, ()) if topic_matches(share_strip(s.filter), topic)]
            filters = [s.filter for s in matched] if self.opts.index_by == "filter" else []
            known = self._pairs[(cid, topic)] = (tuple(dict.fromkeys([topic, *filters])), matched)
        return known

    def messages(self) -> Iterator[Msg]:
        """The messages in delivery order (first appearance in the queues), each one final."""
        by_filter = self.opts.index_by == "filter"
        exact = {(s.client_id, s.filter) for s in self.subs}
        counts = collections.Counter(sid for _c, sid, _q, _r in self.queue)
        multi = {sid for sid, n in counts.items() if n > 1}  # queued for several clients (or twice)
        group: dict[int, list[tuple[str, int, int]]] = {}
        for cid, sid, qos, retain in self.queue if multi else ():
            if sid in multi:
                group.setdefault(sid, []).append((cid, qos, retain))
        seen: set[tuple[str, str]] = set()
        stores, gone, extra, orphans = self.stores, self.gone, self.extra, self.orphans
        for cid, sid, qos, retain in self.queue:
            st = stores.get(sid)
            if st is None:
                if sid not in gone:
                    self.rep.skip("queue entry refers to a store that is not in the file", f"{cid} store {sid}")
                continue
            sender, topic, payload, ts = st
            keys, matched = self._pair(cid, topic)
            if (cid, topic) not in seen:  # extra subscriptions, in the order their pairs first appear
                seen.add((cid, topic))
                for sub in matched if by_filter else ():
                    if sub.filter != topic and (cid, topic) not in extra:
                        extra[(cid, topic)] = Sub(cid, topic, sub.qos)
                if not matched and by_filter:
                    orphans[(cid, topic)] = Sub(cid, topic, qos)
            if not matched:
                self.unmatched += 1
            if sid in multi:
                entries = group.pop(sid, None)
                if entries is None:
                    continue  # already out
                clients = list(dict.fromkeys(c for c, _q, _r in entries))
                m = Msg(make_id(ts, sid), sid, sender, topic, max(q for _c, q, _r in entries),
                        any(r for _c, _q, r in entries), payload, ts,
                        list(dict.fromkeys(k for c in clients for k in self._pair(c, topic)[0])), clients)
            else:
                m = Msg(make_id(ts, sid), sid, sender, topic, qos, bool(retain), payload, ts, list(keys), [cid])
            if not by_filter:
                self.topic_miss += sum(1 for c in m.clients if (c, topic) not in exact)
            yield m

    def mysql_payload_type(self) -> str | None:
        """The payload type MySQL needs for the messages it will take, known before they are built
        (a live writer must widen the column before the first insert)."""
        big = {sid for sid, st in self.stores.items() if len(st[2]) > BLOB_MAX}
        if not big:
            return None
        clients: dict[int, list[str]] = {}
        for cid, sid, _q, _r in self.queue:
            if sid in big:
                clients.setdefault(sid, []).append(cid)
        sizes = []
        for sid, cids in clients.items():
            sender, topic, payload, _ts = self.stores[sid]
            if mysql_refusal(topic, sender, len(payload), cids, self.opts) is None:
                sizes.append(len(payload))
        return payload_type(sizes)

    def finish(self, msgs: list[Msg]) -> Plan:
        """The plan, once :meth:`messages` has run out (notes go to the report)."""
        opts, rep = self.opts, self.rep
        if self.unmatched:
            how = ("an exact-topic subscription was added for each so the plugin delivers them"
                   if opts.index_by == "filter" else "stored under the topic only")
            rep.notes.append(f"{self.unmatched:,} queued deliveries match none of their client's saved subscriptions "
                             f"(e.g. through a shared subscription, which Mosquitto does not save): {how}")
        if self.topic_miss:
            rep.notes.append(f"--index-by topic: {self.topic_miss:,} queued deliveries go to clients with no "
                             "subscription equal to the topic: the plugin delivers them only to a client "
                             "subscribing to the exact topic")
        return Plan(self.subs, msgs, len(self.clients), list(self.extra.values()), list(self.orphans.values()))


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


# ---------------------------------------------------------------- Redis commands


def resp(cmd: list[bytes]) -> bytes:
    parts = [b"*%d\r\n" % len(cmd)]
    for a in cmd:
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


_HSET = (b"*16\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n$2\r\nid\r\n$%d\r\n%s\r\n$4\r\nfrom\r\n$%d\r\n%s\r\n"
         b"$3\r\nqos\r\n$1\r\n%d\r\n$5\r\ntopic\r\n$%d\r\n%s\r\n$7\r\npayload\r\n$%d\r\n%s\r\n"
         b"$2\r\nts\r\n$%d\r\n%s\r\n$6\r\nretain\r\n$%d\r\n%s\r\n")
_ZADD = b"*4\r\n$4\r\nZADD\r\n%s$%d\r\n%s\r\n$%d\r\n%s\r\n"  # the key comes as a whole bulk string


def redis_commands(p: Plan, opts: EmqxOptions) -> Iterator[tuple[str, int, bytes]]:
    """(kind, replies, RESP bytes) in order: subscriptions, then per message HSET, EXPIRE and a ZADD per key."""
    yield from redis_sub_commands(p.subs + p.orphan_subs)
    yield from redis_msg_commands(p.msgs, opts)


def redis_sub_commands(subs: Iterable[Sub]) -> Iterator[tuple[str, int, bytes]]:
    for s in subs:
        yield "subs", 1, resp([b"HSET", f"mqtt:sub:{s.client_id}".encode(), s.filter.encode(), str(s.qos).encode()])


def redis_msg_commands(msgs: Iterable[Msg], opts: EmqxOptions) -> Iterator[tuple[str, int, bytes]]:
    """Per message, in delivery order: HSET, EXPIRE and a ZADD per index key."""
    base = int(time.time() * 1000) if opts.import_ms is None else opts.import_ms
    expire_tail = b"$%d\r\n%d\r\n" % (len(str(opts.ttl)), opts.ttl)
    texts: dict[str | None, bytes] = {None: b""}  # topics, senders and index keys repeat: encode each once
    zkeys: dict[str, bytes] = {}
    for i, m in enumerate(msgs):
        b62 = redis_id(m.hex_id).encode()
        key = b"mqtt:msg:" + b62
        sender = texts.get(m.sender)
        if sender is None:
            sender = texts[m.sender] = m.sender.encode()  # type: ignore[union-attr]
        topic = texts.get(m.topic)
        if topic is None:
            topic = texts[m.topic] = m.topic.encode()
        ts = b"%d" % m.ts_ms
        retain = b"true" if m.retain else b"false"
        score = b"%d" % (base + i)  # import time, increasing in delivery order
        parts = [_HSET % (len(key), key, len(b62), b62, len(sender), sender, m.qos, len(topic), topic,
                          len(m.payload), m.payload, len(ts), ts, len(retain), retain),
                 b"*3\r\n$6\r\nEXPIRE\r\n$%d\r\n%s\r\n" % (len(key), key) + expire_tail]
        for k in m.keys:
            zkey = zkeys.get(k)
            if zkey is None:
                z = b"mqtt:msg:" + k.encode()
                zkey = zkeys[k] = b"$%d\r\n%s\r\n" % (len(z), z)
            parts.append(_ZADD % (zkey, len(score), score, len(b62), b62))
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
    planner = Planner(db, opts, rep, prog)
    n_ret = 0 if db.empty else db.index.counts().get(ChunkType.RETAIN, 0)
    if n_ret:
        rep.notes.append(f"{n_ret:,} retained messages are not migrated: the plugin is no retained store "
                         "(use EMQX's retainer, e.g. republish them with retain)")
    rep.count("clients", len({s.client_id for s in planner.subs}))
    if kind == "mysql" and not dry_run:
        _stream_mysql(conf, planner, opts, rep, prog)
        return
    if kind == "redis" and not dry_run:
        _stream_redis(conf, planner, opts, rep, prog)
        return
    p = planner.finish(list(planner.messages()))
    if kind.startswith("mysql"):
        subs, msgs, widen = check_mysql_limits(p, opts, rep)
        _count_subs(rep, p, subs, widen, opts)
        if dry_run:
            rep.count("messages", len(msgs))
        else:
            _write_sql(conf["path"], mysql_statements(subs, msgs, widen, opts), rep, len(msgs), prog)
    else:
        _count_redis_subs(rep, p, opts)
        if dry_run:
            rep.count("messages", len(p.msgs))
        else:
            _write_resp(conf["path"], redis_commands(p, opts), rep, len(p.msgs), prog)


def _count_redis_subs(rep: MigrationReport, p: Plan, opts: EmqxOptions) -> None:
    rep.count("subscriptions", len(p.subs))
    if p.orphan_subs:
        rep.count("extra exact-topic subscriptions", len(p.orphan_subs))
    rep.notes.append(f"message hashes expire after {opts.ttl} s (--ttl) and zset scores are the import time: "
                     "clients must reconnect within the plugin's message_ttl")


def _count_subs(rep: MigrationReport, p: Plan, subs: list[Sub], widen: str | None, opts: EmqxOptions) -> None:
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


def _tally(rep: MigrationReport, msgs: int, replies: int) -> None:
    """Count ``msgs`` messages whose commands get ``replies`` replies (HSET, EXPIRE, a ZADD per key)."""
    if msgs:
        rep.count("messages", msgs)
        rep.count("index entries", replies - 2 * msgs)


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


def _stream_mysql(conf: dict[str, Any], planner: Planner, opts: EmqxOptions, rep: MigrationReport,
                  prog: Callable[[str, int, int], None]) -> None:
    """Write to a live server while the messages are still being built.

    Schema first (widened before any insert if a payload needs it), then the messages in
    delivery order: this thread builds each batch and its statement while ``opts.connections``
    connections run the previous ones side by side. Each row then gets an explicit id from a
    reserved range, so id order is delivery order whichever batch lands first (the plugin
    reads a topic's rows in id order). Then the subscriptions, known once every message is out.
    """
    import pymysql

    from exporters.migrate.mysql_writer import Inserter, reserve_ids

    widen = planner.mysql_payload_type() if opts.widen_payload else None
    total = len(planner.stores)
    cons = [_mysql_connect(conf)]
    try:
        con = cons[0]
        with con.cursor() as cur:
            for sql in (*MYSQL_SCHEMA, *MSGID_INDEX, *(widen_sql(widen) if widen else ())):
                _run(con, cur, "schema", sql)
            cur.execute("SELECT 1 FROM mqtt_msg LIMIT 1")  # an empty table at the start needs no id checks
            was_empty = cur.fetchone() is None
            base = None
            if opts.connections > 1 and planner.queue:
                try:
                    base = reserve_ids(cur, "mqtt_msg", len(planner.queue))
                except pymysql.MySQLError as exc:
                    rep.notes.append(f"one MySQL connection: no id range could be reserved ({exc.args[-1]})")
                else:
                    for _ in range(opts.connections - 1):
                        try:
                            cons.append(_mysql_connect(conf))
                        except CodecError as exc:  # e.g. max_connections: go on with those open
                            rep.notes.append(f"{len(cons)} MySQL connection(s) instead of {opts.connections}: {exc}")
                            break
            quoted = Memo(sql_str)  # topics and senders repeat: each quoted once
            lock = threading.Lock()
            present = [0]

            def write(wcur: Any, job: tuple[list[Msg], int | None, str]) -> None:
                batch, first, sql = job
                pos = range(len(batch)) if was_empty else _not_there(wcur, batch)
                if len(pos) < len(batch):
                    with lock:
                        present[0] += len(batch) - len(pos)
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
            rep.count("messages", done - present[0])
            p = planner.finish([])
            subs = mysql_sub_limits(p.subs + p.extra_subs + p.orphan_subs, rep)
            _count_subs(rep, p, subs, widen, opts)
            for b in _batches(subs, opts.batch, lambda s: 64):
                _run(con, cur, "subs", insert_subs_sql(b))
            con.commit()
    except pymysql.MySQLError as exc:  # a query outside a statement of ours: the id checks, a lost server
        raise CodecError(f"MySQL at {conf['host']}:{conf['port']}: {exc.args[-1]}") from None
    finally:
        for c in cons:
            c.close()
    if present[0]:
        rep.skip("message already in mqtt_msg (same msgid: an earlier run)", n=present[0])


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


def _write_sql(path: str, stmts: Iterable[tuple[str, str, int]], rep: MigrationReport, total: int,
               prog: Callable[[str, int, int], None]) -> None:
    from codec.writer import atomic_output

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
        self.pending = b""  # the start of a reply line not complete yet
        self.ready = 0  # complete replies read but not yet claimed by a batch
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
        """Wait for ``replies`` more one-line replies; keep the error lines (the rest are counted only)."""
        try:
            while self.ready < replies:
                got = self.sock.recv(1 << 20)
                if not got:
                    raise CodecError(f"{self.where} closed the connection")
                data = self.pending + got
                last = data.rfind(b"\r\n") + 2
                if last < 2:
                    self.pending = data
                    continue
                done, self.pending = data[:last], data[last:]
                self.ready += done.count(b"\r\n")
                if done.startswith(b"-") or b"\r\n-" in done:
                    self.errors += [ln for ln in done.split(b"\r\n") if ln.startswith(b"-")]
        except OSError as exc:
            raise CodecError(f"{self.where}: {exc.strerror or exc}") from None
        self.ready -= replies

    def close(self) -> None:
        self.sock.close()


def _resp_batches(cmds: Iterable[tuple[str, int, bytes]], rep: MigrationReport, batch: int
                  ) -> Iterator[tuple[bytes, int, int]]:
    """(RESP bytes, replies, messages) of ``batch`` messages at a time."""
    buf: list[bytes] = []
    replies = msgs = msg_replies = 0
    for kind, n, data in cmds:
        buf.append(data)
        replies += n
        if kind == "msgs":
            msgs += 1
            msg_replies += n
            if msgs == batch:
                _tally(rep, msgs, msg_replies)
                yield b"".join(buf), replies, msgs
                buf, replies, msgs, msg_replies = [], 0, 0, 0
    if buf:
        _tally(rep, msgs, msg_replies)
        yield b"".join(buf), replies, msgs


def _stream_redis(conf: dict[str, Any], planner: Planner, opts: EmqxOptions, rep: MigrationReport,
                  prog: Callable[[str, int, int], None]) -> None:
    """Messages go out while the rest are still being built; subscriptions (known at the end) last."""

    def cmds() -> Iterator[tuple[str, int, bytes]]:
        yield from redis_msg_commands(planner.messages(), opts)
        p = planner.finish([])
        _count_redis_subs(rep, p, opts)
        yield from redis_sub_commands(p.subs + p.orphan_subs)

    _run_redis(conf, cmds(), rep, len(planner.stores), opts, prog)


def _run_redis(conf: dict[str, Any], cmds: Iterable[tuple[str, int, bytes]], rep: MigrationReport, total: int,
               opts: EmqxOptions, prog: Callable[[str, int, int], None]) -> None:
    from exporters.migrate.pipeline import background

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
    from codec.writer import atomic_output

    done = 0
    f: BinaryIO
    with atomic_output(path) as f:
        for kind, n, data in cmds:
            f.write(data)
            if kind == "msgs":
                _tally(rep, 1, n)
                done += 1
                if done % 10_000 == 0:
                    prog("writing", done, total)
    prog("writing", done, total)
    os.chmod(path, 0o644)
