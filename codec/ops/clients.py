"""Per client: session, subscriptions, queue length and bytes; generated ids grouped; bridge backlogs.

``stats --by client`` answers "who fills this file": the clients with the longest queues (count and
payload bytes of their outgoing entries), biggest first. Files that grew out of control often hold
hundreds of thousands of sessions whose ids a library made up (``mosq-Hx8kQ2mZpL0aB3cD``,
``mqttjs_3f9a1b2c``, ``auto-<uuid>``); those are grouped by the shape of their id (:func:`id_shape`)
so one row says "mosq-* : 366,112 sessions, 0 queued" instead of a page of noise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.broker.bridges import ORPHANED, BridgeMap, classify, expires_at_start_2_1, names_local
from codec.broker.conf import BrokerConf
from codec.columnar import ColumnReader, batches
from codec.layouts import ChunkType
from codec.ops.queues import IN, OUT, Queues, read_queues, store_facts
from codec.reader import DbFile
from codec.textscan import TextColumn
from codec.values import column

# ---------------------------------------------------------------- generated ids

# client-id generators whose prefix is known: Mosquitto's clients ("mosq-" + 16 random characters
# in 2.x, "mosqsub|PID-host" / "mosqpub|PID-host" in 1.x), the broker's own ids for clients that
# give none ("auto-" + UUID), MQTT.js, MQTTX, Paho, HiveMQ's and EMQX's tools.
KNOWN_PREFIXES = ("mosq-", "mosqsub|", "mosqpub|", "auto-", "mqttjs_", "mqttx_", "paho-", "paho", "hivemq-",
                  "emqx_")
_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
_TOKEN = re.compile(r"[0-9A-Za-z]+")
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
MIN_TOKEN = 8


def _classes(token: str) -> list[int]:
    return [0 if c.isdigit() else 1 if c.islower() else 2 for c in token]


def random_token(token: str) -> bool:
    """A run of letters and digits that a random generator made, not a person.

    At least 8 characters, and either hexadecimal with at least 2 digits and 2 letters
    (``3f9a1b2c``, a MAC's ``A1B2C3D4E5F6``), or switching between digits, lower and upper case
    at least once every 3 characters (``Hx8kQ2mZpL0aB3cD``). Names and serial numbers are not
    random: ``dev00010``, ``sensor17``, ``12345678``, ``deadbeef``, ``Kitchen``.
    """
    n = len(token)
    if n < MIN_TOKEN:
        return False
    digits = sum(c.isdigit() for c in token)
    letters = n - digits
    if _HEX.fullmatch(token) and digits >= 2 and letters >= 2:
        return True
    cls = _classes(token)
    switches = sum(1 for a, b in zip(cls, cls[1:]) if a != b)
    return switches * 3 >= n - 1 and len(set(cls)) >= 2


def id_shape(client_id: str) -> str | None:
    """The group of an id that looks generated (its random parts as ``*``), or None for a chosen name.

    A known generator's prefix followed by at least 6 characters gives ``prefix*``; otherwise every
    UUID and every random token (:func:`random_token`) is replaced by ``*`` (``edge-<uuid>-rx`` →
    ``edge-*-rx``); an id with nothing replaced is a chosen name.
    """
    for p in KNOWN_PREFIXES:
        if client_id.startswith(p) and len(client_id) >= len(p) + 6:
            return p + "*"
    shape = _UUID.sub("*", client_id)
    shape = _TOKEN.sub(lambda m: "*" if random_token(m.group(0)) else m.group(0), shape)
    return shape if "*" in shape else None


# ---------------------------------------------------------------- the per-client table


@dataclass
class ClientTable:
    """Every client id the file names (CLIENT, SUB or CLIENT_MSG chunks), with its numbers."""

    names: list[str]
    session: np.ndarray  # has a CLIENT chunk
    subscriptions: np.ndarray
    queued: np.ndarray  # outgoing entries (in flight or waiting)
    queued_bytes: np.ndarray  # their stored payloads' bytes
    in_flight: np.ndarray
    incoming: np.ndarray  # incoming QoS 2 entries awaiting release
    expiry: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)  # id -> (time, interval)

    def row(self, i: int) -> dict[str, Any]:
        return {"client_id": self.names[i], "session": bool(self.session[i]),
                "subscriptions": int(self.subscriptions[i]), "queued": int(self.queued[i]),
                "queued_bytes": int(self.queued_bytes[i]), "in_flight": int(self.in_flight[i]),
                "incoming": int(self.incoming[i])}

    def index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}


def _sub_codes(cols: ColumnReader, table: dict[bytes, int]) -> np.ndarray:
    """Per SUB chunk: its client's number in ``table`` (new ids are added)."""
    parts = [np.zeros(0, np.int64)]
    sub_idx = np.flatnonzero(cols.types == int(ChunkType.SUB))
    for s in batches(len(sub_idx)):
        g = cols.gather(sub_idx[s], int(ChunkType.SUB), ("client_id",))
        parts.append(TextColumn(g, "client_id").codes(table))
        cols.release()
    return np.concatenate(parts)


def client_table(db: DbFile, *, cols: ColumnReader | None = None, queues: Queues | None = None) -> ClientTable:
    """Sessions, subscriptions and queues per client id, from column gathers (CLIENT chunks one by one:
    the v6 CLIENT layout depends on the writer's ABI)."""
    cols = cols or ColumnReader(db)
    q = queues if queues is not None else read_queues(cols)
    table: dict[bytes, int] = {n.encode("utf-8", "surrogateescape"): i for i, n in enumerate(q.names)}
    expiry: dict[str, tuple[int | None, int | None]] = {}
    session_codes = []
    for i in np.flatnonzero(cols.types == int(ChunkType.CLIENT)).tolist():
        rec = db.chunk(i).record
        cid = rec["client_id"]
        session_codes.append(table.setdefault(cid.encode("utf-8", "surrogateescape"), len(table)))
        expiry.setdefault(cid, (rec.get("session_expiry_time"), rec.get("session_expiry_interval")))
    sub_codes = _sub_codes(cols, table)
    n = len(table)
    names = [b.decode("utf-8", "surrogateescape") for b in table]
    session = np.zeros(n, bool)
    session[np.array(session_codes, np.int64)] = True
    subs = np.bincount(sub_codes, minlength=n)

    def pad(a: np.ndarray) -> np.ndarray:
        return np.concatenate([a, np.zeros(n - len(a), np.int64)])

    out = q.direction == OUT
    plen = store_facts(cols, q.store_id[out]).payload_len if out.any() else np.zeros(0, np.int64)
    weights = np.zeros(len(q), np.int64)
    weights[out] = plen
    flying = q.in_flight()
    return ClientTable(names, session, subs.astype(np.int64), pad(q.per_client(out)), pad(q.per_client(out, weights)),
                       pad(q.per_client(out & flying)), pad(q.per_client(q.direction == IN)), expiry)


@dataclass
class ClientRows:
    """``stats --by client``: the biggest queues first, generated ids grouped by shape."""

    clients: list[dict[str, Any]]  # top rows: a client, or a group {"group": shape, "clients": n, ...}
    groups: list[dict[str, Any]]  # every group of generated ids
    total_clients: int
    generated: int  # ids in a group

    def to_json(self) -> dict[str, Any]:
        return {"clients": self.clients, "groups": self.groups, "total_clients": self.total_clients,
                "generated_ids": self.generated}

    def lines(self) -> list[str]:
        out = [f"{'client (generated ids grouped)':<34}{'sessions':>9}{'subs':>7}{'queued':>10}{'in flight':>10}"
               f"{'queued bytes':>14}"]
        for r in self.clients:
            name = r["client_id"] if "client_id" in r else f"{r['group']}  ({r['clients']:,} generated ids)"
            if r.get("bridge"):
                name = f"{name} [{r['bridge']}]"
            sessions = ("yes" if r["session"] else "no") if "client_id" in r else f"{r['sessions']:,}"
            out.append(f"{column(name, 34)}{sessions:>9}{r['subscriptions']:>7,}{r['queued']:>10,}{r['in_flight']:>10,}"
                       f"{r['queued_bytes']:>14,}")
        out.append(f"{self.total_clients:,} client ids, {self.generated:,} of them generated-looking in "
                   f"{len(self.groups):,} group(s) (random-looking ids grouped by shape, * = the random part)")
        return out


_SUMS = ("subscriptions", "queued", "queued_bytes", "in_flight", "incoming")


def _order(r: dict[str, Any]) -> tuple:
    return (-r["queued_bytes"], -r["queued"], r.get("client_id", r.get("group", "")))


def client_rows(t: ClientTable, top: int = 10, marks: dict[str, str] | None = None) -> ClientRows:
    """Clients sorted by queued bytes then queued count; generated-looking ids summed per shape.

    ``marks``: client id -> a note shown with it (bridge sessions: never grouped).
    """
    marks = marks or {}
    groups: dict[str, dict[str, Any]] = {}
    single: list[dict[str, Any]] = []
    for i, name in enumerate(t.names):
        shape = None if name in marks else id_shape(name)
        if shape is None:
            row = t.row(i)
            if name in marks:
                row["bridge"] = marks[name]
            single.append(row)
            continue
        g = groups.setdefault(shape, {"group": shape, "clients": 0, "sessions": 0, **dict.fromkeys(_SUMS, 0)})
        g["clients"] += 1
        g["sessions"] += int(t.session[i])
        for k in _SUMS:
            g[k] += int(getattr(t, k)[i])
    grouped = sorted(groups.values(), key=_order)
    rows = sorted(single + grouped, key=_order)[:top]
    return ClientRows(rows, grouped, len(t.names), sum(g["clients"] for g in grouped))


# ---------------------------------------------------------------- bridges with their backlog


def bridge_map(db: DbFile, conf: BrokerConf | None, at: float, *, table: ClientTable | None = None,
               hostname: str | None = None) -> BridgeMap:
    """The bridge sessions of ``db`` (as ``conf`` maps them, or by name without it) with their backlogs,
    and which of them Mosquitto 2.1 would expire at start-up (``at``: the start).

    Without ``conf`` only sessions with a queue or a subscription are looked at (a bare ``local.*``
    CLIENT chunk holds no backlog), so a file without any costs one gather of client ids.
    """
    bm = BridgeMap(conf.path if conf else None)
    if db.empty:
        bm.sessions = classify(conf, [], hostname)
        return bm
    t = table
    if t is None:
        cols = ColumnReader(db)
        if conf is None and not names_local(cols):  # no local.* queue or subscription: nothing to show
            return bm
        t = client_table(db, cols=cols)
    where = t.index()
    pce = conf.persistent_client_expiration if conf else None
    for s in classify(conf, t.names, hostname):
        i = where.get(s.client_id)
        if s.present and i is not None:
            row = t.row(i)
            s.queued, s.queued_bytes, s.in_flight = row["queued"], row["queued_bytes"], row["in_flight"]
            s.incoming, s.subscriptions = row["incoming"], row["subscriptions"]
            s.session_expiry_time, s.session_expiry_interval = t.expiry.get(s.client_id, (None, None))
            s.expires_at_start_2_1 = s.status != ORPHANED and expires_at_start_2_1(
                s.session_expiry_time, s.session_expiry_interval, at, pce)
        bm.sessions.append(s)
    return bm


__all__ = ["ClientRows", "ClientTable", "KNOWN_PREFIXES", "bridge_map", "client_rows", "client_table", "id_shape",
           "random_token"]
