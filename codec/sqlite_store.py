"""Mosquitto 2.1 persist-sqlite stores, read: the schema, and a store turned into v6 records.

The mapping is the format doc's §12. Writing a store (``mosqdb migrate --to sqlite``) is a sink
and lives in ``exporters.migrate.sqlite``; it shares the schema and the report from here.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from codec.engine import Record
from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.properties import Property
from codec.sources import connect_readonly, is_sqlite_file
from codec.values import NEVER, unsigned64
from codec.writer import write_records

SCHEMA_VERSION = ("database_schema", 1, 1, 0)


# The exact statements a real Mosquitto 2.1.2 broker creates (persist-sqlite-schema.sql).
SCHEMA = (
    "CREATE TABLE base_msgs (store_id INT64 PRIMARY KEY,expiry_time INT64,topic STRING NOT NULL,payload BLOB,"
    "source_id STRING,source_username STRING,payloadlen INTEGER,source_mid INTEGER,source_port INTEGER,"
    "qos INTEGER,retain INTEGER,properties STRING)",
    "CREATE TABLE retains (topic STRING PRIMARY KEY,store_id INT64)",
    "CREATE TABLE clients (client_id TEXT PRIMARY KEY,username TEXT,connection_time INT64,will_delay_time INT64,"
    "session_expiry_time INT64,listener_port INT,max_packet_size INT,max_qos INT,retain_available INT,"
    "session_expiry_interval INT,will_delay_interval INT)",
    "CREATE TABLE subscriptions (client_id TEXT NOT NULL,topic TEXT NOT NULL,subscription_options INTEGER,"
    "subscription_identifier INTEGER,PRIMARY KEY (client_id, topic) )",
    "CREATE TABLE client_msgs (client_id TEXT NOT NULL,cmsg_id INT64,store_id INT64,dup INTEGER,direction INTEGER,"
    "mid INTEGER,qos INTEGER,retain INTEGER,state INTEGER,subscription_identifier INTEGER)",
    "CREATE INDEX client_msgs_client_id ON client_msgs(client_id)",
    "CREATE INDEX client_msgs_store_id ON client_msgs(store_id,client_id)",
    "CREATE INDEX retains_storeid ON retains(store_id)",
    "CREATE TABLE version_info (component TEXT NOT NULL,major INTEGER NOT NULL,minor INTEGER NOT NULL,"
    "patch INTEGER NOT NULL)",
    "CREATE TABLE wills (client_id TEXT PRIMARY KEY,payload BLOB,topic STRING NOT NULL,payloadlen INTEGER,"
    "qos INTEGER,retain INTEGER,properties STRING)",
)


# The property kinds the plugin's restore code reads back (others are written without a value).
JSON_NAMES = {1: "payload-format-indicator", 3: "content-type", 8: "response-topic", 9: "correlation-data",
              38: "user-property"}


BY_JSON_NAME = {v: k for k, v in JSON_NAMES.items()}


SUB_ID = 11


EXAMPLES = 5


@dataclass
class MigrationReport:
    """What a migration wrote and what it left out, with the reasons (shared by all targets)."""

    source: str
    target: str
    dry_run: bool = False
    written: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, what: str, n: int = 1) -> None:
        self.written[what] = self.written.get(what, 0) + n

    def skip(self, reason: str, example: str | None = None, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n
        if example is not None:
            ex = self.examples.setdefault(reason, [])
            if len(ex) < EXAMPLES:
                ex.append(example)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "dry_run": self.dry_run, "written": self.written,
                "skipped": [{"reason": r, "count": n, "examples": self.examples.get(r, [])}
                            for r, n in self.skipped.items()],
                "notes": self.notes, "seconds": round(self.seconds, 3)}

    def lines(self) -> list[str]:
        verb = "would write" if self.dry_run else "wrote"
        out = [f"{self.source} -> {self.target}: {verb} "
               + (", ".join(f"{n:,} {k}" for k, n in self.written.items()) or "nothing")
               + f" in {self.seconds:.2f} s"]
        for r, n in self.skipped.items():
            ex = self.examples.get(r)
            out.append(f"  skipped {n:,}: {r}" + (f" (e.g. {'; '.join(ex)})" if ex else ""))
        out.extend(f"  note: {n}" for n in self.notes)
        return out


def _s(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def _b(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return bytes(value)


def json_props(textv: Any, where: str) -> list[Property] | None:
    if textv is None or textv == "":
        return None
    try:
        items = json.loads(_s(textv) or "")
    except ValueError as exc:
        raise CodecError(f"{where}.properties: not JSON ({exc.msg})") from None
    props: list[Property] = []
    for it in items if isinstance(items, list) else []:
        pid = BY_JSON_NAME.get(it.get("identifier")) if isinstance(it, dict) else None
        if pid is None or "value" not in it:
            continue  # the plugin's restore skips these too
        val = it["value"]
        if pid == 38:
            props.append(Property.make(pid, (str(it.get("name", "")), str(val))))
        elif pid == 9:
            try:
                props.append(Property.make(pid, bytes.fromhex(str(val))))
            except ValueError:
                raise CodecError(f"{where}.properties: correlation-data {val!r} is not hex") from None
        elif pid == 1:
            props.append(Property.make(pid, int(val)))
        else:
            props.append(Property.make(pid, str(val)))
    return props or None


def read_sqlite(src_path: str | os.PathLike[str]) -> sqlite3.Connection:
    path = os.fspath(src_path)
    if not is_sqlite_file(path):
        raise CodecError("not a sqlite database", path=path)
    try:
        con = connect_readonly(path)
    except (OSError, sqlite3.DatabaseError) as exc:
        raise CodecError(f"cannot open the sqlite store ({exc})", path=path) from None
    con.text_factory = lambda b: b.decode("utf-8", "surrogateescape")
    try:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        con.close()
        raise CodecError(f"not a readable sqlite database ({exc})", path=path) from None
    lacking = [t for t in ("base_msgs", "retains", "clients", "subscriptions", "client_msgs") if t not in names]
    if lacking:
        con.close()
        raise CodecError(f"not a Mosquitto 2.1 persistence store: no table {', '.join(lacking)}", path=path)
    return con


def sqlite_records(con: sqlite3.Connection, rep: MigrationReport | None = None) -> Iterator[Record]:
    """v6 records for a 2.1 store, in the order Mosquitto 2.0 writes them."""
    v6 = 6
    stored: set[int] = set()
    cfg_id = con.execute("SELECT max(store_id), min(store_id) FROM base_msgs").fetchone()
    last = max(unsigned64(cfg_id[0] or 0), unsigned64(cfg_id[1] or 0))
    yield Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": last}, v6)
    for row in con.execute("SELECT store_id,expiry_time,topic,payload,source_id,source_username,source_mid,"
                           "source_port,qos,retain,properties,rowid FROM base_msgs ORDER BY rowid"):
        where = f"base_msgs rowid {row[11]}"
        stored.add(unsigned64(row[0] or 0))
        yield Record(int(ChunkType.MSG_STORE), {
            "store_id": unsigned64(row[0] or 0), "expiry_time": int(row[1] or 0), "source_mid": int(row[6] or 0),
            "source_id": _s(row[4]) or None, "source_username": _s(row[5]) or None, "source_port": int(row[7] or 0),
            "topic": _s(row[2]) or "", "qos": int(row[8] or 0), "retain": int(row[9] or 0), "payload": _b(row[3]),
            "properties": json_props(row[10], where)}, v6)
        if rep is not None:
            rep.count("messages")
    queues: dict[str, list[tuple]] = {}
    for row in con.execute("SELECT client_id,store_id,dup,direction,mid,qos,retain,state,subscription_identifier "
                           "FROM client_msgs ORDER BY rowid"):
        queues.setdefault(_s(row[0]) or "", []).append(row)
    clients = list(con.execute("SELECT client_id,username,session_expiry_time,listener_port,session_expiry_interval "
                               "FROM clients ORDER BY rowid"))

    def cmsgs(cid: str) -> Iterator[Record]:
        for r in queues.pop(cid, []):
            if unsigned64(r[1] or 0) not in stored:
                if rep is not None:
                    rep.skip("queue entry whose base_msgs row is missing (Mosquitto would drop it)",
                             f"{cid} store {unsigned64(r[1] or 0)}")
                continue
            sub_id = int(r[8] or 0)
            yield Record(int(ChunkType.CLIENT_MSG), {
                "client_id": cid, "store_id": unsigned64(r[1] or 0), "mid": int(r[4] or 0), "qos": int(r[5] or 0),
                "state": int(r[7] or 0), "direction": int(r[3] or 0), "retain": int(r[6] or 0), "dup": int(r[2] or 0),
                "properties": [Property.make(SUB_ID, sub_id)] if sub_id else None}, v6)
            if rep is not None:
                rep.count("queued")

    for cid_v, user, exp_t, port, interval in clients:
        cid = _s(cid_v) or ""
        # as the broker restores it (plugin_public.c, mosquitto_persist_client_msg_add): the mid of the
        # last outgoing QoS 1/2 entry in rowid order whose message exists; incoming mids are the peer's
        mids = [int(r[4] or 0) for r in queues.get(cid, [])
                if int(r[3] or 0) == 1 and int(r[5] or 0) > 0 and unsigned64(r[1] or 0) in stored]
        yield Record(int(ChunkType.CLIENT), {
            "client_id": cid, "last_mid": (mids[-1] if mids else 0) & 0xFFFF, "session_expiry_time": int(exp_t or 0),
            "session_expiry_interval": int(interval or 0) & NEVER, "listener_port": int(port or 0) & 0xFFFF,
            "username": _s(user) or None}, v6)
        if rep is not None:
            rep.count("clients")
        yield from cmsgs(cid)
    for cid in list(queues):
        if rep is not None:
            rep.skip("queue entries of a client without a session row (written without one)", cid, n=len(queues[cid]))
        yield from cmsgs(cid)
    for cid_v, topic, opts, ident in con.execute(
            "SELECT client_id,topic,subscription_options,subscription_identifier FROM subscriptions ORDER BY rowid"):
        o = int(opts or 0)
        yield Record(int(ChunkType.SUB), {"client_id": _s(cid_v) or "", "topic": _s(topic) or "", "qos": o & 3,
                                          "options": o & 0xFC, "identifier": int(ident or 0)}, v6)
        if rep is not None:
            rep.count("subscriptions")
    for (sid,) in con.execute("SELECT store_id FROM retains ORDER BY rowid"):
        if unsigned64(sid or 0) not in stored:
            if rep is not None:
                rep.skip("retain whose base_msgs row is missing (Mosquitto would drop it)", f"store {unsigned64(sid or 0)}")
            continue
        yield Record(int(ChunkType.RETAIN), {"store_id": unsigned64(sid or 0)}, v6)
        if rep is not None:
            rep.count("retains")


def sqlite_to_db(src_path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> MigrationReport:
    """Write a v6 mosquitto.db holding everything a 2.1 sqlite store holds that a db can."""
    t0 = time.perf_counter()
    rep = MigrationReport(os.fspath(src_path), os.fspath(out_path))
    con = read_sqlite(src_path)
    try:
        try:
            n_wills = con.execute("SELECT count(*) FROM wills").fetchone()[0]
        except sqlite3.DatabaseError:
            n_wills = 0
        if n_wills:
            rep.skip("will message (a mosquitto.db has no place for wills)", n=n_wills)
        try:
            write_records(out_path, 6, sqlite_records(con, rep))
        except sqlite3.DatabaseError as exc:
            raise CodecError(f"reading the sqlite store failed: {exc}", path=os.fspath(src_path)) from None
    finally:
        con.close()
    rep.seconds = time.perf_counter() - t0
    return rep

