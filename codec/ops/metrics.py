"""A db's figures as Prometheus text exposition, for node_exporter's textfile collector.

What an operator alerts on without starting the broker: the file's size and what fills it (chunks
and bytes per kind), retained messages, sessions by expiry, the queues (in total and for the
clients with the most queued bytes), the oldest queued message (Mosquitto 2.1's store ids are its
clock), the format check's findings, and with a release the broker model's verdict and what that
release keeps. Everything is computed on the columnar engine (:mod:`codec.ops.stats`,
:mod:`codec.ops.clients`, :mod:`codec.ops.queues`): no Python object per chunk.

Names follow Prometheus' conventions: the ``mosquitto_db_`` prefix, base units in the name
(``_bytes``, ``_seconds``, ``_timestamp_seconds``), gauges only (a file is a snapshot: nothing here
only goes up, so no ``_total``), an enumeration as one series per state valued 1 or 0, and every
series labelled with the db's ``file`` so that several dbs can share one collector directory. A
metric's HELP text never depends on the file or the options: the collector refuses a metric whose
HELP differs between two of its files.
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.broker.versions import CLOCK_ID_MIN
from codec.errors import CodecError
from codec.values import NEVER

PREFIX = "mosquitto_db_"
VERDICTS = ("loads", "refuses", "crashes")
# Mosquitto 2.1's store ids: node id (10 bits) | seconds since this epoch (31 bits) | fraction (23 bits)
CLOCK_EPOCH = 1_637_168_273
TOP = 10
_SIZE = "Size of the persistence file."
_MTIME = "When the persistence file was last written (its mtime)."
_COMPUTED = "The reference time of the expiry and age figures (--at, default: now)."
_READABLE = ("1 when mosqdb could read the file as a Mosquitto db or 2.1 store; 0 when it could not (missing, not "
             "a db, a damaged header, an I/O error): the other figures are then absent, not stale.")


@dataclass
class Family:
    """One metric: its samples share the name, the type and the help text."""

    name: str
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)
    type: str = "gauge"

    def add(self, value: float, **labels: str) -> Family:
        self.samples.append((labels, value))
        return self


def clock_time(store_id: int) -> int | None:
    """When Mosquitto 2.1 made a store id (Unix seconds), None for a 2.0-and-older counter id."""
    if store_id < CLOCK_ID_MIN:
        return None
    return CLOCK_EPOCH + ((store_id >> 23) & ((1 << 31) - 1))


class Metrics:
    """The families of one db file, in the order they are written."""

    def __init__(self, path: str) -> None:
        self.file = path
        self.families: dict[str, Family] = {}

    def family(self, name: str, help_text: str) -> Family:
        full = PREFIX + name
        fam = self.families.get(full)
        if fam is None:
            fam = self.families[full] = Family(full, help_text)
        return fam

    def set(self, name: str, help_text: str, value: float, **labels: str) -> None:
        self.family(name, help_text).add(value, file=self.file, **labels)

    def text(self) -> str:
        return exposition(self.families.values())


def collect(db: Any, *, at: float, top: int = TOP, prediction: Any = None, findings: dict[str, int] | None = None,
            release: str | None = None, fmt: str = "db") -> Metrics:
    """The metrics of an open db (a :class:`codec.reader.DbFile`; a 2.1 store as its v6 image).

    ``at``: the reference time of expiry and ages. ``prediction``: the broker model's
    :class:`codec.broker.model.Prediction` for ``release``; ``findings``: the format check's
    counts per severity. ``fmt``: "db", or "sqlite" for a 2.1 store read as ``db``. Parts a damaged file cannot give are left out (the check's errors say why).
    """
    path = os.path.abspath(getattr(db, "source_path", None) or db.path)
    m = Metrics(path)
    st = os.stat(path)
    m.set("readable", _READABLE, 1)
    m.set("file_size_bytes", _SIZE, st.st_size)
    m.set("file_modified_timestamp_seconds", _MTIME, st.st_mtime)
    m.set("info", "The file's format (db, or sqlite: a Mosquitto 2.1 store) and db version; always 1.", 1,
          format=fmt, db_version=str(db.version or 0))
    m.set("computed_timestamp_seconds", _COMPUTED, at)
    if findings is not None:
        for severity in ("error", "warning"):
            m.set("check_findings", "Findings of mosqdb check, by severity.", findings.get(severity, 0),
                  severity=severity)
    if prediction is not None and release is not None:
        _broker(m, prediction, release)
    if db.empty:
        return m
    with contextlib.suppress(CodecError):  # damaged: what was read stays, the check's findings say what is wrong
        _contents(m, db, at, top)
    return m


def unreadable(path: str, at: float) -> Metrics:
    """The metrics of a file that could not be read at all: ``readable`` 0, and its size and mtime when it is a
    file. Written where the figures of the file would go, so that a collector never keeps serving the last good
    ones."""
    m = Metrics(os.path.abspath(path))
    m.set("readable", _READABLE, 0)
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        m.set("file_size_bytes", _SIZE, st.st_size)
        m.set("file_modified_timestamp_seconds", _MTIME, st.st_mtime)
    m.set("computed_timestamp_seconds", _COMPUTED, at)
    return m


def _contents(m: Metrics, db: Any, at: float, top: int) -> None:
    from codec.ops.clients import client_table
    from codec.ops.queues import OUT, read_queues, store_facts
    from codec.ops.stats import by_type
    from codec.sources import column_reader
    from codec.views.timeview import expiry_counts

    kinds = by_type(db)
    for kind, v in kinds.items():
        m.set("chunks", "Chunks in the file, by kind.", v["count"], kind=kind)
    for kind, v in kinds.items():
        m.set("chunk_bytes", "Bytes the chunks of each kind take (headers included).", v["bytes"], kind=kind)
    m.set("stored_messages", "Stored messages (MSG_STORE chunks).", kinds.get("msg_store", {}).get("count", 0))
    m.set("retained_messages", "Retained messages (RETAIN chunks).", kinds.get("retain", {}).get("count", 0))
    expiry = expiry_counts(db, at) if db.index.error is None else None
    if expiry is not None:
        e = expiry["msg_store"]
        m.set("stored_messages_expired", "Stored messages whose expiry time has passed (the broker drops them on "
              "load).", e["expired"])
    cols = column_reader(db)
    q = read_queues(cols)
    t = client_table(db, cols=cols, queues=q)
    never = pending = expired = 0
    soonest: int | None = None
    for i, name in enumerate(t.names):
        if not t.session[i]:
            continue
        when, interval = t.expiry.get(name, (None, None))
        if not when or interval == NEVER:
            never += 1
        elif when <= at:
            expired += 1
        else:
            pending += 1
            soonest = when if soonest is None else min(soonest, when)
    help_sessions = ("Sessions (CLIENT chunks) by expiry: never (no expiry time), pending (expires later), expired "
                     "(its time has passed: Mosquitto 2.0.15 and later drop it on load).")
    for state, n in (("never", never), ("pending", pending), ("expired", expired)):
        m.set("sessions", help_sessions, n, expiry=state)
    if soonest is not None:
        m.set("session_next_expiry_timestamp_seconds", "When the next session that has not expired yet expires.",
              soonest)
    out = q.direction == OUT
    m.set("queued_messages", "Messages queued or in flight to clients (outgoing CLIENT_MSG chunks).",
          int(out.sum()))
    m.set("queued_bytes", "Payload bytes of the messages queued or in flight to clients.", int(t.queued_bytes.sum()))
    order = sorted((i for i in range(len(t.names)) if t.queued[i]),
                   key=lambda i: (-int(t.queued_bytes[i]), -int(t.queued[i]), t.names[i]))[:top]
    for i in order:
        m.set("client_queued_messages", "Messages queued or in flight to a client (the clients with the most "
              "queued bytes, --top of them).", int(t.queued[i]), client_id=t.names[i])
    for i in order:
        m.set("client_queued_bytes", "Payload bytes queued or in flight to a client (the clients with the most "
              "queued bytes, --top of them).", int(t.queued_bytes[i]), client_id=t.names[i])
    if out.any():
        ids = q.store_id[out]
        found = store_facts(cols, ids).found
        oldest = int(ids[found].min()) if found.any() else None
        when = None if oldest is None else clock_time(oldest)
        if when is not None:
            m.set("queued_oldest_message_timestamp_seconds", "When the oldest queued message was stored (Mosquitto "
                  "2.1's store ids hold the clock; absent for older releases).", when)
            m.set("queued_oldest_message_age_seconds", "Age of the oldest queued message at the reference time "
                  "(Mosquitto 2.1 store ids only).", max(at - when, 0))


def _broker(m: Metrics, pred: Any, release: str) -> None:
    for verdict in VERDICTS:
        m.set("broker_verdict", "What the release does with the file (broker model): 1 for its verdict, 0 for the "
              "others.", 1 if pred.verdict == verdict else 0, broker=release, verdict=verdict)
    if pred.verdict != "loads":
        return
    kept, dropped = len(pred.kept), len(pred.dropped)
    for fate, n in (("kept", kept), ("dropped", dropped)):
        m.set("broker_sessions", "Sessions the release keeps or drops on load (broker model).", n, broker=release,
              fate=fate)
    m.set("broker_retained_messages", "Retained topics the release serves after loading (broker model).",
          pred.retained_count or len(pred.retained), broker=release)
    m.set("broker_queued_messages", "Messages the release holds queued for clients after loading (broker model).",
          sum(pred.queued.values()), broker=release)
    seconds = load_seconds(pred)
    if seconds is not None:
        m.set("broker_load_seconds", "Predicted time for the release to load the file (CPU seconds of its restore; broker cost model).", seconds,
              broker=release)


def load_seconds(pred: Any) -> float | None:
    """The model's predicted load time when it has one (a ``cost`` with ``load_seconds``), else None."""
    cost = getattr(pred, "cost", None)
    value = cost.get("load_seconds") if isinstance(cost, dict) else getattr(cost, "load_seconds", None)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


# ---------------------------------------------------------------- the text format


def label_value(text: str) -> str:
    """A label value in the text format: UTF-8 (bytes that were not are shown as \\xNN), ``\\``, ``"`` and
    newline escaped."""
    raw = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return raw.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def exposition(families: Iterable[Family]) -> str:
    """The Prometheus text format (version 0.0.4, what the textfile collector reads): per family a HELP
    and a TYPE line, then its samples."""
    lines = []
    for fam in families:
        help_text = fam.help.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"# HELP {fam.name} {help_text}")
        lines.append(f"# TYPE {fam.name} {fam.type}")
        for labels, value in fam.samples:
            body = ",".join(f'{k}="{label_value(v)}"' for k, v in labels.items())
            lines.append(f"{fam.name}{{{body}}} {number(value)}" if body else f"{fam.name} {number(value)}")
    return "\n".join(lines) + "\n"


__all__ = ["CLOCK_EPOCH", "Family", "Metrics", "clock_time", "collect", "exposition", "label_value", "load_seconds",
           "unreadable"]
