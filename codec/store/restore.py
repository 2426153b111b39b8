"""Which queue entries of a store Mosquitto 2.1 drops as its persist-sqlite plugin restores them.

A .db's client messages are put back on their queues as they were (``persist_read.c``); a store's go through
the broker's own queueing (``restore.c`` ``client_msg_restore`` -> ``plugin_public.c``
``mosquitto_persist_client_msg_add`` -> ``database.c`` ``db__message_insert_outgoing`` / ``_incoming``), for
sessions that are all offline at that moment, in ``client_msgs`` rowid order. So the configuration decides
what comes back: a QoS 0 entry only with ``queue_qos0_messages true``; QoS 1 and 2 entries while the session's
queue holds fewer than ``max_queued_messages`` of them (and ``max_queued_bytes`` of their payloads); an
incoming entry in flight while ``max_inflight_messages`` allows, else queued as above; with
``allow_duplicate_messages false`` a second outgoing copy of one message for one session is skipped. An entry
whose session or base message is missing is not found. Each of these the broker counts as ``failed`` in
``sqlite: Restored N client messages (M failed)`` (a skipped duplicate as restored). A message past its expiry
is restored (and counts towards the queue) and then never sent.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, fields
from typing import Any

from codec.broker.conf import BrokerConf
from codec.store.connect import file_identities

MQTT_MAX_PAYLOAD = 268_435_455  # mqtt_protocol.h: a base message over it is refused (its entries not found)
OUT, IN = 1, 0  # client_msgs.direction (mosq_md_out, mosq_md_in)

REASONS = {
    "no-session": "its session has no clients row",
    "no-message": "its base message is missing",
    "qos0": "QoS 0 while its session is offline (queue_qos0_messages false)",
    "queue-full": "past its session's max_queued_messages / max_queued_bytes",
    "direction": "a direction other than 0 (in) or 1 (out)",
}
"""Why an entry does not come back, in the words reports use."""


CRASHING_WILL = ("w.payload IS NULL AND CAST(IFNULL(w.payloadlen, 0) AS INTEGER) > 0 AND NOT EXISTS "
                 "(SELECT 1 FROM clients c WHERE c.client_id = w.client_id)")
"""The ``wills w`` rows 2.1.2's restore crashes on (SIGSEGV, measured): a client without a session, whose will's
``payloadlen`` ``publish_will_msg`` copies from a NULL payload (codec.broker.storemodel models it)."""

_DEFAULT = {f.name: f.default for f in fields(BrokerConf)}  # what the broker takes when its conf says nothing


@dataclass(frozen=True)
class QueueLimits:
    """The settings the restore queues by (Mosquitto's defaults, as :class:`BrokerConf` holds them, unless a
    configuration says otherwise)."""

    queue_qos0_messages: bool = _DEFAULT["queue_qos0_messages"]
    max_queued_messages: int = _DEFAULT["max_queued_messages"]
    max_queued_bytes: int = _DEFAULT["max_queued_bytes"]
    max_inflight_messages: int = _DEFAULT["max_inflight_messages"]
    max_inflight_bytes: int = _DEFAULT["max_inflight_bytes"]
    allow_duplicate_messages: bool = _DEFAULT["allow_duplicate_messages"]
    source: str = "Mosquitto's defaults"

    @classmethod
    def of(cls, conf: Any) -> QueueLimits:
        """The limits of a :class:`codec.broker.conf.BrokerConf` (None: the defaults)."""
        if conf is None:
            return cls()
        return cls(conf.queue_qos0_messages, conf.max_queued_messages, conf.max_queued_bytes,
                   conf.max_inflight_messages, conf.max_inflight_bytes, conf.allow_duplicate_messages,
                   f"the settings of {conf.path}")

    def describe(self) -> str:
        return (f"queue_qos0_messages {'true' if self.queue_qos0_messages else 'false'}, max_queued_messages "
                f"{self.max_queued_messages}, max_queued_bytes {self.max_queued_bytes}: {self.source}")


@dataclass
class _Session:
    """A session's counters as ``struct mosquitto_msg_data`` keeps them during the restore."""

    out_count12: int = 0
    out_bytes12: int = 0
    in_count12: int = 0
    in_bytes12: int = 0
    in_quota: int = 0
    in_flight_count: int = 0
    in_flight_bytes: int = 0
    in_flight_bytes12: int = 0
    sent: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Drop:
    """One ``client_msgs`` row the restore leaves out."""

    rowid: int
    client_id: Any
    store_id: int
    reason: str


def _ready_for_queue(s: _Session, qos: int, out: bool, lim: QueueLimits) -> bool:
    """``db__ready_for_queue`` for an offline session (nothing in flight is subtracted)."""
    if lim.max_queued_messages == 0 and lim.max_queued_bytes == 0:
        return True
    if qos == 0 and not lim.queue_qos0_messages:
        return False
    count, size = (s.out_count12, s.out_bytes12) if out else (s.in_count12, s.in_bytes12)
    valid_count = count < lim.max_queued_messages
    valid_bytes = size < lim.max_queued_bytes
    if lim.max_queued_bytes == 0:
        return valid_count
    if lim.max_queued_messages == 0:
        return valid_bytes
    return valid_count and valid_bytes


def _ready_for_flight_in(s: _Session, qos: int, lim: QueueLimits) -> bool:
    """``db__ready_for_flight`` of an incoming entry."""
    if lim.max_inflight_messages == 0 and lim.max_inflight_bytes == 0:
        return True
    if qos == 0:
        if lim.max_queued_messages == 0 and lim.max_inflight_bytes == 0:
            return True
        valid_bytes = s.in_flight_bytes - lim.max_inflight_bytes < lim.max_queued_bytes
        valid_count = s.in_flight_count - lim.max_inflight_messages < lim.max_queued_messages
        if lim.max_queued_messages == 0:
            return valid_bytes
        if lim.max_queued_bytes == 0:
            return valid_count
    else:
        valid_bytes = s.in_flight_bytes12 < lim.max_inflight_bytes
        valid_count = s.in_quota > 0
        if lim.max_inflight_messages == 0:
            return valid_bytes
        if lim.max_inflight_bytes == 0:
            return valid_count
    return valid_bytes and valid_count


_SID = "CAST(IFNULL(q.store_id, 0) AS INTEGER)"  # as sqlite3_column_int64 reads them
_DIR = "CAST(IFNULL(q.direction, 0) AS INTEGER)"
_QOS = "(CAST(IFNULL(q.qos, 0) AS INTEGER) & 255)"


def _bounded_sessions(lim: QueueLimits) -> str:
    """SQL for the sessions whose queue counters may reach a limit as they are restored (the others keep every entry
    with a session, a message and a direction, QoS 0 ones as ``queue_qos0_messages`` says): counted generously
    (entries that will not be found included), so that no session left out could have reached one."""
    out_any = lim.max_queued_bytes > 0 or not lim.allow_duplicate_messages
    in_any = lim.max_inflight_bytes > 0 or lim.max_queued_bytes > 0
    tests = []
    if out_any:
        tests.append(f"SUM({_DIR} = 1) > 0")
    elif lim.max_queued_messages > 0:  # every QoS 0 entry is checked against the QoS 1/2 count too
        tests.append(f"SUM({_DIR} = 1 AND {_QOS} > 0) >= {lim.max_queued_messages}")
    if in_any:
        tests.append(f"SUM({_DIR} = 0) > 0")
    elif lim.max_inflight_messages > 0:  # past the in-flight quota, incoming entries are queued under the limits
        tests.append(f"SUM({_DIR} = 0) > {lim.max_inflight_messages}")
    having = " OR ".join(tests) or "0"
    return f"SELECT q.client_id FROM client_msgs q GROUP BY q.client_id HAVING {having}"


_last: tuple[tuple[Any, ...], list[Drop]] | None = None  # the last answer, by the store's identity and the limits


def restore_drops(con: sqlite3.Connection, limits: QueueLimits | None = None) -> list[Drop]:
    """The ``client_msgs`` rows of the store open on ``con`` that Mosquitto 2.1's restore leaves out, in rowid
    order (see the module). ``check --broker`` asks it twice of one store (the check's warnings, the model): the
    last answer is kept for the same file (path, inode, size and time, its -wal's too) and limits."""
    global _last
    lim = limits or QueueLimits()
    key = _identity(con, lim)
    if key is not None and _last is not None and _last[0] == key:
        return list(_last[1])
    drops = _restore_drops(con, lim)
    _last = (key, drops) if key is not None else None
    return list(drops)


def _identity(con: sqlite3.Connection, lim: QueueLimits) -> tuple[Any, ...] | None:
    """What tells a store file apart from any other and from itself changed; None for one in memory."""
    try:
        path = next((row[2] for row in con.execute("PRAGMA database_list") if row[1] == "main"), "")
        return (path, lim, *map(tuple, file_identities(path))) if path else None
    except (sqlite3.Error, OSError):
        return None


def _restore_drops(con: sqlite3.Connection, lim: QueueLimits) -> list[Drop]:
    sessions: dict[Any, _Session] = {}
    drops: list[Drop] = []
    # a base message stored with id 0 is given a new one as it is restored: no entry finds it
    rows = con.execute(
        f"SELECT q.rowid, q.client_id, {_SID}, {_DIR}, {_QOS}, CAST(IFNULL(q.retain, 0) AS INTEGER), "
        "b.store_id IS NOT NULL, CAST(IFNULL(b.payloadlen, 0) AS INTEGER), CAST(IFNULL(b.qos, 0) AS INTEGER) & 255, "
        "c.client_id IS NOT NULL, CAST(IFNULL(c.max_qos, 0) AS INTEGER) & 255 "
        f"FROM client_msgs q LEFT JOIN base_msgs b ON b.store_id = {_SID} AND b.store_id != 0 "
        "LEFT JOIN clients c ON c.client_id = q.client_id "
        # the rows that can be dropped: all of a session whose counters may reach a limit, else only the odd ones
        f"WHERE q.client_id IN ({_bounded_sessions(lim)}) OR q.client_id IS NULL OR c.client_id IS NULL "
        f"OR b.store_id IS NULL OR IFNULL(b.payloadlen, 0) > {MQTT_MAX_PAYLOAD} OR {_DIR} NOT IN (0, 1) "
        f"OR ({_DIR} = 1 AND {_QOS} = 0 AND {0 if lim.queue_qos0_messages else 1}) "
        "ORDER BY q.rowid")
    for rowid, cid, sid, direction, qos, retain, has_base, size, base_qos, has_client, max_qos in rows:
        store_id = int(sid)
        reason = None
        if cid is None or not has_client:
            reason = "no-session"
        elif not has_base or size > MQTT_MAX_PAYLOAD:
            reason = "no-message"
        else:
            s = sessions.get(cid)
            if s is None:
                s = sessions[cid] = _Session(in_quota=lim.max_inflight_messages)
            kept_qos = min(qos, max_qos)  # the entry's qos as the session's max_qos caps it
            if direction == OUT:
                if not lim.allow_duplicate_messages and not retain and store_id in s.sent:
                    continue  # "already sent this message to this client": counted as restored, not queued
                if (qos == 0 and not lim.queue_qos0_messages) or not _ready_for_queue(s, qos, True, lim):
                    reason = "qos0" if qos == 0 and not lim.queue_qos0_messages else "queue-full"
                else:
                    if kept_qos:
                        s.out_count12 += 1
                        s.out_bytes12 += size
                    if not lim.allow_duplicate_messages and not retain:
                        s.sent.add(store_id)
            elif direction == IN:
                kept_in = min(base_qos, max_qos)
                if _ready_for_flight_in(s, base_qos, lim):
                    s.in_flight_count += 1
                    s.in_flight_bytes += size
                    if kept_in:
                        s.in_flight_bytes12 += size
                    if base_qos and s.in_quota > 0:
                        s.in_quota -= 1
                elif base_qos and _ready_for_queue(s, base_qos, False, lim):
                    if kept_in:
                        s.in_count12 += 1
                        s.in_bytes12 += size
                    if s.in_quota > 0:
                        s.in_quota -= 1
                else:
                    reason = "queue-full"
            else:
                reason = "direction"
        if reason is not None:
            drops.append(Drop(int(rowid), cid, store_id, reason))
    return drops


__all__ = ["CRASHING_WILL", "REASONS", "Drop", "QueueLimits", "restore_drops"]
