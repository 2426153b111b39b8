"""What a broker's loader restored from a file: rows in load order, the situations met, and how it ended.

Two producers fill it: the columnar pass over the chunks a broker reads exactly as the codec frames
them (:mod:`codec.broker.model`, fast on big files), and the emulation of the broker's own reads
(:mod:`codec.broker.loader`) from the first chunk where the two differ (damage, a NUL tail, a chunk
the broker reads out of step). Tests run the emulation over whole files and compare the two.

Rows carry ``pos``, the load order (the chunk number in the intact part, then counting on), so
order rules stay checkable: a client message or a retain finds only a stored message loaded
before it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

EVENT_CAP = 1000  # situations kept per rule (all are counted)

_COLUMNS = {
    "stores": (("pos", np.int64), ("store_id", np.uint64), ("expiry", np.int64), ("topic_off", np.int64),
               ("topic_len", np.int64), ("topic_null", np.bool_), ("offset", np.int64)),
    "retains": (("pos", np.int64), ("store_id", np.uint64), ("offset", np.int64)),
    "cmsgs": (("pos", np.int64), ("store_id", np.uint64), ("client", np.int64), ("direction", np.int64),
              ("qos", np.int64), ("offset", np.int64)),
    "subs": (("pos", np.int64), ("client", np.int64)),
    "clients": (("pos", np.int64), ("client", np.int64), ("expiry", np.int64), ("interval", np.int64),
                ("disconnect", np.int64), ("offset", np.int64)),
}


@dataclass
class Event:
    """A situation a rule names, met at one chunk (``pos``, file ``offset``), with the values its log line uses."""

    rule: str
    pos: int | None = None
    offset: int | None = None
    chunk_type: str | None = None
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class Stop:
    """The load ended before the file did: ``action`` refuses/crashes (fatal), or stops (the rest is not read)."""

    rule: str
    action: str
    log: list[str]
    pos: int | None = None
    offset: int | None = None
    chunk_type: str | None = None
    note: str = ""


class Table:
    """Rows of one kind: numpy parts (from column batches) and Python rows (from the emulation)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.names = [n for n, _ in _COLUMNS[kind]]
        self.dtypes = dict(_COLUMNS[kind])
        self.parts: list[dict[str, np.ndarray]] = []
        self.rows: list[tuple] = []

    def extend(self, **cols: np.ndarray) -> None:
        n = len(next(iter(cols.values())))
        if n:
            self.parts.append({k: np.asarray(cols[k], dtype=self.dtypes[k]) for k in self.names})

    def add(self, *row: Any) -> None:
        self.rows.append(row)

    def columns(self) -> dict[str, np.ndarray]:
        parts = list(self.parts)
        if self.rows:
            cols = list(zip(*self.rows, strict=True))
            parts.append({k: np.array(cols[i], dtype=self.dtypes[k]) for i, k in enumerate(self.names)})
            self.parts, self.rows = parts, []
        if not parts:
            return {k: np.zeros(0, dtype=self.dtypes[k]) for k in self.names}
        if len(parts) > 1:
            parts = [{k: np.concatenate([p[k] for p in parts]) for k in self.names}]
            self.parts = parts
        return parts[0]

    def __len__(self) -> int:
        return sum(len(p["pos"]) for p in self.parts) + len(self.rows)


@dataclass
class Loaded:
    """Everything a load produced; ``names`` maps a client code to the client id's bytes."""

    db_version: int
    names: list[bytes] = field(default_factory=list)
    codes: dict[bytes, int] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    stop: Stop | None = None
    read: Counter = field(default_factory=Counter)  # sub / client_msg chunks read without an error
    misread_at: int | None = None  # file offset where the broker's reads leave the chunk framing
    read_to: int | None = None  # file offset where the broker stopped reading (None: the end)
    tables: dict[str, Table] = field(default_factory=lambda: {k: Table(k) for k in _COLUMNS})
    expired: list[np.ndarray] = field(default_factory=list)  # ids of stored messages dropped as expired
    _expired_sorted: bool = False

    def add_expired(self, ids: np.ndarray) -> None:
        self.expired.append(np.asarray(ids, dtype=np.uint64))
        self._expired_sorted = False

    def expired_ids(self) -> np.ndarray:
        """Sorted ids of the expired stored messages (their references are not "dangling")."""
        if not self.expired:
            return np.zeros(0, dtype=np.uint64)
        if len(self.expired) > 1 or not self._expired_sorted:
            self.expired = [np.unique(np.concatenate(self.expired))]
            self._expired_sorted = True
        return self.expired[0]

    def code(self, client_id: bytes) -> int:
        c = self.codes.get(client_id)
        if c is None:
            c = self.codes[client_id] = len(self.names)
            self.names.append(client_id)
        return c

    def event(self, ev: Event, log: list[str] | None = None) -> None:
        self.counts[ev.rule] += 1
        if self.counts[ev.rule] <= EVENT_CAP:
            self.events.append(ev)
        if log:
            self.log.extend(log)

    def __getitem__(self, kind: str) -> Table:
        return self.tables[kind]


__all__ = ["EVENT_CAP", "Event", "Loaded", "Stop", "Table"]
