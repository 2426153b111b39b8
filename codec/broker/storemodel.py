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
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from codec.broker.conf import BrokerConf
from codec.broker.model import Prediction, Unknown, record_fate, session_fate
from codec.broker.rules import V21, Version
from codec.broker.versions import text as version_text
from codec.errors import CodecError
from codec.store.read import as_text
from codec.store.restore import IN, MQTT_MAX_PAYLOAD, OUT, QueueLimits, restore_drops

_NOT_READABLE = "not a readable sqlite database ("


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
        if not refusal.startswith(_NOT_READABLE):
            raise CodecError(refusal, path=path)
        pred.verdict = "refuses"  # init.c: the open, or its first statements, fail
        pred.log = [f"Sqlite persistence: Error opening database: {refusal[len(_NOT_READABLE):-1]}"]
        return pred
    with open_any(path) as store:
        v = store.figures.schema_version
        if v is not None and (v[0] != 1 or v[1] > 1):
            pred.verdict = "refuses"
            pred.log = [f"Sqlite persistence: Unknown database_schema version {v[0]}.{v[1]}.{v[2]}"]
            return pred
        problems = [t for r in store.con.execute("PRAGMA quick_check") if (t := as_text(r[0])) != "ok"]
        if problems:
            pred.verdict = "unknown"
            pred.unknown = Unknown(f"sqlite integrity: {problems[0]}: which rows the broker reaches before the "
                                   "damage, and what it does there, is not modelled")
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
    n_wills = con.execute("SELECT count(*) FROM wills").fetchone()[0] if has_wills else 0
    per: dict[int, dict[str, int]] = {OUT: {}, IN: {}}  # direction -> client -> entries
    for raw, direction, n in con.execute(
            "SELECT q.client_id, CAST(IFNULL(q.direction, 0) AS INTEGER), count(*) FROM client_msgs q "
            f"JOIN base_msgs b ON b.store_id = CAST(IFNULL(q.store_id, 0) AS INTEGER) AND b.store_id != 0 "
            f"WHERE {live} AND q.rowid NOT IN (SELECT value FROM json_each(?)) GROUP BY 1, 2", (json.dumps(dropped),)):
        if raw in kept and direction in per:
            per[direction][as_text(raw)] = n
    pred.queued, pred.incoming = per[OUT], per[IN]
    pred.retained = retained
    if n_wills:  # will__set's checks and a publish of each are not modelled: its count line is not predicted
        pred.undefined.append(f"{n_wills:,} will message(s): which the broker sets on their sessions or publishes at "
                              "start is not modelled")
    pred.log = [f"sqlite: Restored {n_base - n_base_failed} base messages ({n_base_failed} failed)",
                f"sqlite: Restored {n_retains_found} retained messages ({n_retains - n_retains_found} failed)",
                f"sqlite: Restored {len(rows)} clients ({n_clients - len(rows)} failed)",
                f"sqlite: Restored {n_subs_found} subscriptions ({n_subs - n_subs_found} failed)",
                f"sqlite: Restored {n_cmsgs - len(dropped)} client messages ({len(dropped)} failed)",
                *([] if n_wills else ["sqlite: Restored 0 will messages (0 failed)"]),
                *(f"Expiring client {cid} due to timeout." for cid in expiring)]


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
