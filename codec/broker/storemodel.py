"""What Mosquitto 2.1 with its persist-sqlite plugin does with a store (``mosquitto.sqlite3``): the broker model of
the plugin's restore, as :mod:`codec.broker.model` is the model of the .db loader.

The plugin opens the store (``init.c``: an open or a statement that fails, or a ``version_info`` schema other than
1.x with x <= 1, stops the broker), restores base messages, retained messages (``ORDER BY topic``), clients,
subscriptions, client messages (``ORDER BY rowid``) and wills (``restore.c``) through the broker's calls
(``plugin_public.c``), and the broker then drops expired sessions and retained messages (``mosquitto.c``:
``session_expiry__check``, ``retain__expire``). Unlike a .db's, a store's expired messages are restored and never
sent, and its queue entries go through the broker's queueing under the configuration's limits
(:mod:`codec.store.restore`). A store sqlite cannot read through (``PRAGMA quick_check`` errors) is ``unknown``:
which rows the broker reaches before a bad page, and what it does there, is not modelled.

Wills (``will_restore``): set on their session by ``will__set`` and, when it was connected at the stop (no expiry time,
no will delay), published at start; a client's without a session is published at start (``publish_will_msg``: its
payload copied before anything checks it, so a payload length with no payload crashes the broker); a session that
expires at start sends its will. What is published is in ``Prediction.at_start``, a retained one among the topics
served.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.broker.conf import BrokerConf
from codec.broker.loaded import Stop
from codec.broker.model import Prediction, Unknown, record_fate, session_fate
from codec.broker.rules import V21, Version
from codec.broker.versions import text as version_text
from codec.errors import CodecError
from codec.store.connect import NOT_READABLE
from codec.store.read import SALVAGE_HINT, as_text, first_and_more, integrity_lines
from codec.store.restore import IN, MQTT_MAX_PAYLOAD, OUT, QueueLimits, restore_drops


def predict_store(path: str, version: Version, *, at: float | None = None, conf: BrokerConf | None = None,
                  hostname: str | None = None, topics: bool = True) -> Prediction:
    """What Mosquitto ``version`` (2.1 or later, with its persist-sqlite plugin) does with the store at ``path``
    when it starts at ``at`` (default: now) with the configuration ``conf``; ``topics=False``: the retained topics
    served are counted, not listed. A sqlite file that is not a store raises :class:`CodecError` (the plugin would
    add its tables to it: not a case the faces take)."""
    from codec.sources import open_any, store_refusal

    pred = Prediction(path=path, broker=version_text(version), version=version, at=time.time() if at is None else at,
                      format_key="sqlite")
    if version < V21:
        pred.verdict = "unknown"
        pred.unknown = Unknown(f"Mosquitto {pred.broker} has no persist-sqlite plugin (2.1 and later): it does not "
                               "read a store")
        return pred
    refusal = store_refusal(path)
    if refusal is not None:
        if not refusal.startswith(NOT_READABLE):
            raise CodecError(refusal, path=path)
        pred.verdict = "refuses"  # init.c: the open, or its first statements, fail
        said = refusal[len(NOT_READABLE) + 2:].removesuffix(SALVAGE_HINT)[:-1]  # sqlite's words, in its parentheses
        pred.log = [f"Sqlite persistence: Error opening database: {said}"]
        return pred
    with open_any(path) as store:
        v = store.figures.schema_version
        if v is not None and (v[0] != 1 or v[1] > 1):
            pred.verdict = "refuses"
            pred.log = [f"Sqlite persistence: Unknown database_schema version {v[0]}.{v[1]}.{v[2]}"]
            return pred
        problems = integrity_lines(r[0] for r in store.con.execute("PRAGMA quick_check"))
        if problems:
            pred.verdict = "unknown"
            pred.unknown = Unknown(f"sqlite integrity: {first_and_more(problems)}: which rows the broker reaches "
                                   "before the damage, and what it does there, is not modelled")
            return pred
        _restore(pred, store.con, conf, hostname, topics)
    return pred


def _restore(pred: Prediction, con: Any, conf: BrokerConf | None, hostname: str | None, topics: bool) -> None:
    """Sessions, queues and retained topics as the restore and the start-up sweeps leave them."""
    at = int(pred.at)
    limits = QueueLimits.of(conf)
    # base messages: one over MQTT's maximum payload is refused; an expired one is restored, then never sent
    n_base, n_base_failed = con.execute(
        f"SELECT count(*), IFNULL(SUM(CAST(IFNULL(payloadlen, 0) AS INTEGER) > {MQTT_MAX_PAYLOAD}), 0) "
        "FROM base_msgs").fetchone()
    short = con.execute("SELECT count(*) FROM base_msgs WHERE CAST(IFNULL(payloadlen, 0) AS INTEGER) > "
                        "IFNULL(length(CAST(payload AS BLOB)), 0)").fetchone()[0]
    if short:
        pred.undefined.append(f"{short:,} base message(s) whose payloadlen exceeds the payload: the plugin copies "
                              "payloadlen bytes from the blob (reading past its end)")
    live = (f"CAST(IFNULL(b.payloadlen, 0) AS INTEGER) <= {MQTT_MAX_PAYLOAD} AND "
            f"(IFNULL(b.expiry_time, 0) = 0 OR CAST(b.expiry_time AS INTEGER) >= {at})")
    served = ("FROM retains r JOIN base_msgs b ON b.store_id = CAST(IFNULL(r.store_id, 0) AS INTEGER) "
              f"AND b.store_id != 0 WHERE r.topic IS NOT NULL AND {live}")
    retained = [as_text(r[0]) for r in con.execute(f"SELECT r.topic {served} ORDER BY r.topic")] if topics else []
    pred.retained_count = len(retained) if topics else con.execute(f"SELECT count(*) {served}").fetchone()[0]
    n_retains, n_retains_found = con.execute(
        "SELECT count(*), IFNULL(SUM(r.topic IS NOT NULL AND EXISTS (SELECT 1 FROM base_msgs b WHERE b.store_id = "
        "CAST(IFNULL(r.store_id, 0) AS INTEGER) AND b.store_id != 0 AND CAST(IFNULL(b.payloadlen, 0) AS INTEGER) <= "
        f"{MQTT_MAX_PAYLOAD})), 0) FROM retains r").fetchone()
    # sessions: every clients row (a client id is its primary key), kept or dropped as the .db model decides
    n_clients = con.execute("SELECT count(*) FROM clients").fetchone()[0]
    rows = con.execute("SELECT client_id, CAST(IFNULL(session_expiry_time, 0) AS INTEGER), "
                       "CAST(IFNULL(session_expiry_interval, 0) AS INTEGER) & 4294967295 FROM clients "
                       "WHERE client_id IS NOT NULL ORDER BY rowid").fetchall()
    cols = {"expiry": np.array([r[1] for r in rows], np.int64), "interval": np.array([r[2] for r in rows], np.int64)}
    kept: set[Any] = set()
    expiring: list[str] = []
    for k, (raw, _e, _i) in enumerate(rows):
        cid = as_text(raw)
        if record_fate(pred, cid, *session_fate(pred, 6, k, cols, conf, hostname, cid), expiring):
            kept.add(raw)
    n_subs, n_subs_found = con.execute(
        "SELECT count(*), IFNULL(SUM(s.client_id IS NOT NULL AND s.client_id != '' AND s.topic IS NOT NULL AND "
        "s.topic != '' AND EXISTS (SELECT 1 FROM clients c WHERE c.client_id = s.client_id)), 0) "
        "FROM subscriptions s").fetchone()
    # queues: what the restore queues (its drops left out), of the sessions kept, that has not expired
    dropped = [d.rowid for d in restore_drops(con, limits)]
    n_cmsgs = con.execute("SELECT count(*) FROM client_msgs").fetchone()[0]
    has_wills = con.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'wills'").fetchone()[0]
    per: dict[int, dict[str, int]] = {OUT: {}, IN: {}}  # direction -> client -> entries
    for raw, direction, n in con.execute(
            "SELECT q.client_id, CAST(IFNULL(q.direction, 0) AS INTEGER), count(*) FROM client_msgs q "
            f"JOIN base_msgs b ON b.store_id = CAST(IFNULL(q.store_id, 0) AS INTEGER) AND b.store_id != 0 "
            f"WHERE {live} AND q.rowid NOT IN (SELECT value FROM json_each(?)) GROUP BY 1, 2", (json.dumps(dropped),)):
        if raw in kept and direction in per:
            per[direction][as_text(raw)] = n
    pred.queued, pred.incoming = per[OUT], per[IN]
    wills = _wills(con, {r[0] for r in rows}, set(expiring)) if has_wills else _Wills()
    served_now = set(retained) if topics else None
    for w in wills.at_start:
        pred.at_start.append(w.text())
        if w.retain and served_now is not None:  # a retained publish: the topic's retained message, or none if empty
            (served_now.add if w.payloadlen else served_now.discard)(w.topic)
    if wills.at_start:
        if topics:
            retained = sorted(served_now or ())
        elif any(w.retain for w in wills.at_start):
            pred.undefined.append("the retained wills published at start change the retained topics served: counted "
                                  "without them (list the topics to have them counted)")
        reached = _reached(con, kept, wills.at_start)
        if reached:
            pred.undefined.append(f"the will message(s) published at start reach the queues of {len(reached):,} kept "
                                  f"session(s) subscribed to their topics ({_few(reached)}): the queue counts leave "
                                  "them out")
    pred.retained_count = len(retained) if topics else pred.retained_count
    pred.retained = retained
    pred.undefined.extend(wills.undefined)
    if wills.crash is not None:  # publish_will_msg copies the payload before anything checks it
        pred.verdict = "crashes"
        pred.stop = Stop("will-without-payload", "crashes", [], chunk_type="wills",
                         note=f"the will of {wills.crash!r}, a client without a session, has a payloadlen and no "
                              "payload: the plugin copies payloadlen bytes from a NULL payload (SIGSEGV)")
        pred.kept, pred.dropped, pred.queued, pred.incoming, pred.retained = [], [], {}, {}, []
        pred.retained_count, pred.at_start, pred.undefined = 0, [], []
    pred.log = [f"sqlite: Restored {n_base - n_base_failed} base messages ({n_base_failed} failed)",
                f"sqlite: Restored {n_retains_found} retained messages ({n_retains - n_retains_found} failed)",
                f"sqlite: Restored {len(rows)} clients ({n_clients - len(rows)} failed)",
                f"sqlite: Restored {n_subs_found} subscriptions ({n_subs - n_subs_found} failed)",
                f"sqlite: Restored {n_cmsgs - len(dropped)} client messages ({len(dropped)} failed)",
                *([f"sqlite: Restored {wills.restored} will messages ({wills.failed} failed)"]
                  if has_wills and wills.crash is None else []),
                *(f"Expiring client {cid} due to timeout." for cid in expiring if wills.crash is None)]


# mosquitto_property_check_command(CMD_WILL, ...): payload format, message expiry, content type, response topic,
# correlation data, will delay, user property
_WILL_PROPERTIES = frozenset({1, 2, 3, 8, 9, 24, 38})
_TOPIC_LEVELS = 200  # TOPIC_HIERARCHY_LIMIT: the '/' a topic may have


@dataclass
class _Will:
    """A will the broker publishes at start: a client's with no session (``restore.c`` publishes it), with a session
    that was connected when the broker stopped (no expiry time, no will delay: published and set), or set on a session
    that expires at start (``session_expiry__check`` sends it)."""

    client_id: str
    topic: str
    qos: int
    retain: bool
    payloadlen: int
    why: str

    def text(self) -> str:
        flag = ", retained" if self.retain and self.payloadlen else ", clearing the retained message" if self.retain \
            else ""
        return f"publishes the will of {self.client_id!r} on {self.topic!r} (QoS {self.qos}{flag}): {self.why}"


@dataclass
class _Wills:
    restored: int = 0
    failed: int = 0
    at_start: list[_Will] = field(default_factory=list)
    undefined: list[str] = field(default_factory=list)
    crash: str | None = None  # the client whose will the broker crashes on


def _wills(con: Any, sessions: set[Any], expiring: set[str]) -> _Wills:
    """The ``wills`` rows as ``will_restore`` (restore.c) takes them: a client with a session gets its will set
    (``will__set``: a topic a publish may use, valid UTF-8, a payload length in range, the properties a will may have)
    and, when it has neither a session expiry time nor a will delay, published too; a will of a client without one
    is published (``mosquitto_broker_publish``: QoS 0-2, a payload where the length says so). Each that fails counts
    as failed."""
    out = _Wills()
    for raw, topic, no_payload, payloadlen, qos, retain, props, has_client, expiry_time, delay in con.execute(
            "SELECT w.client_id, CAST(w.topic AS BLOB), w.payload IS NULL, CAST(IFNULL(w.payloadlen, 0) AS INTEGER), "
            "CAST(IFNULL(w.qos, 0) AS INTEGER), CAST(IFNULL(w.retain, 0) AS INTEGER), w.properties, "
            "c.client_id IS NOT NULL, CAST(IFNULL(c.session_expiry_time, 0) AS INTEGER), "
            "CAST(IFNULL(c.will_delay_interval, 0) AS INTEGER) FROM wills w LEFT JOIN clients c ON c.client_id = "
            "w.client_id ORDER BY w.rowid"):
        if raw is None:
            out.undefined.append("a will without a client id: the plugin looks up a NULL client id (undefined)")
            continue
        qos = _c_int(qos)
        cid = as_text(raw)
        text = None if topic is None else bytes(topic).split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        has_payload = not (payloadlen > 0 and no_payload)  # a length needs a payload to copy
        publishable = text is not None and payloadlen >= 0 and has_payload and 0 <= qos <= 2
        published = None  # why it is published at start, if it is
        if has_client and raw in sessions:
            ok = (0 <= payloadlen <= MQTT_MAX_PAYLOAD and has_payload and _will_topic_ok(text)
                  and _will_properties_ok(props))
            if ok and expiry_time == 0 and _c_int(delay) == 0:
                ok = publishable
                published = "its session was connected when the broker stopped"
            elif ok and cid in expiring:
                published = "its session expires at start"
        else:
            if not has_payload:  # publish_will_msg: memcpy(payload_mosq, NULL, payloadlen)
                out.crash = cid
                return out
            ok = publishable
            published = "its client has no session"
        if ok and published is not None:
            out.at_start.append(_Will(cid, text or "", qos, bool(_c_int(retain)), payloadlen, published))
        if ok:
            out.restored += 1
        else:
            out.failed += 1
    short = con.execute("SELECT count(*) FROM wills WHERE payload IS NOT NULL AND CAST(IFNULL(payloadlen, 0) AS "
                        "INTEGER) > length(CAST(payload AS BLOB))").fetchone()[0]
    if short:
        out.undefined.append(f"{short:,} will(s) whose payloadlen exceeds the payload: the broker copies payloadlen "
                             "bytes from the blob (reading past its end)")
    if any(w.qos and not _will_topic_ok(w.topic) for w in out.at_start):
        out.undefined.append("a will published at start on a topic a client may not publish to: what the broker's "
                             "queueing does with it is not modelled")
    return out


def _c_int(v: int) -> int:
    """An integer as ``sqlite3_column_int`` hands it over (the low 32 bits, signed)."""
    v &= 0xFFFF_FFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _will_topic_ok(topic: str | None) -> bool:
    """``mosquitto_pub_topic_check`` and ``mosquitto_validate_utf8`` of a will's topic."""
    if not topic:
        return False
    raw = topic.encode("utf-8", "surrogateescape")
    if b"+" in raw or b"#" in raw or len(raw) > 65535 or raw.count(b"/") > _TOPIC_LEVELS:
        return False
    return _mqtt_utf8(raw)


def _mqtt_utf8(raw: bytes) -> bool:
    """``mosquitto_validate_utf8``: valid UTF-8 without U+0000, U+D800-U+DFFF, U+0001-U+001F, U+007F-U+009F or
    non-characters (U+FDD0-U+FDEF, and U+xFFFE, U+xFFFF in every plane)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    for ch in text:
        o = ord(ch)
        if o < 0x20 or 0x7F <= o <= 0x9F or 0xFDD0 <= o <= 0xFDEF or (o & 0xFFFF) >= 0xFFFE:
            return False
    return True


def _will_properties_ok(props: Any) -> bool:
    from codec.store.schema import restored_properties

    got, _problems = restored_properties(props)
    return got is None or all(p.id in _WILL_PROPERTIES for p in got)


def _reached(con: Any, kept: set[Any], wills: list[_Will]) -> list[str]:
    """The kept sessions with a subscription that matches the topic of a will published at start."""
    from codec.views.select import hits_by_filter

    subs = [(raw, as_text(flt)) for raw, flt in con.execute("SELECT client_id, topic FROM subscriptions "
                                                            "WHERE client_id IS NOT NULL AND topic IS NOT NULL")
            if raw in kept]
    hits = hits_by_filter({_unshared(f) for _raw, f in subs}, [w.topic for w in wills])
    return sorted({as_text(raw) for raw, f in subs if len(hits[_unshared(f)])})


def _unshared(flt: str) -> str:
    """A shared subscription's filter (``$share/GROUP/FILTER``)."""
    if flt.startswith("$share/"):
        parts = flt.split("/", 2)
        return parts[2] if len(parts) == 3 else flt
    return flt


def _few(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3:,} more" if len(names) > 3 else "")


def auto_release(path: str) -> Version | None:
    """The release ``--broker auto`` models for a store (only 2.1's plugin reads one: the release of 2.1's clock-based
    ids), None for any other file (its header's db version decides)."""
    from codec.broker.versions import AUTO_CLOCK_IDS
    from codec.sources import is_sqlite_file

    return AUTO_CLOCK_IDS if is_sqlite_file(path) else None


def predict_any(path: str, version: Version, **kw: Any) -> Prediction:
    """:func:`predict_store` for a sqlite store, :func:`codec.broker.model.predict` for anything else (a .db, or a
    file the .db loader reads as bytes). ``kw``: what both take (``at``, ``conf``, ``hostname``); the .db model's
    own keywords are passed to it alone."""
    from codec.broker.model import predict
    from codec.sources import is_sqlite_file

    if is_sqlite_file(path):
        return predict_store(path, version, **{k: kw[k] for k in ("at", "conf", "hostname", "topics") if k in kw})
    return predict(path, version, **kw)


__all__ = ["auto_release", "predict_any", "predict_store"]
