"""What differs from a second file, as marks on this file's rows: the content diff (:mod:`codec.ops.diff`).

``mosqdb inspect FILE --diff OTHER`` (or ``v``) compares by content, as ``mosqdb diff OTHER FILE``
does — never by offsets or store ids: each file becomes hashed tables (:func:`codec.ops.diff.snapshot`)
and :func:`codec.ops.diff.match` pairs their rows. A row of this file is *added* when the other file
has nothing with its content (a retained topic, a session, a subscription, a queued copy, a stored
message it lacks) and *changed* when the other has it with other values (a payload, an expiry, a
session's fields, a queued entry's state). What only the other file holds cannot be marked here:
it is counted (:attr:`DiffMarks.removed`) and listed from the report (:func:`codec.ops.diff.compare`).

A retained message is a RETAIN chunk and the msg_store it points at: both are marked. A 2.1 sqlite
store is compared through its v6 records (:func:`codec.store.todb.store_records`, which names the row
each record comes from), so its rows are marked too. This module imports no Textual: the big files'
diff runs it in a child process (:mod:`inspector.tui.model.checkproc`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

STEPS = 4
"""Steps reported to ``progress``: the other file read, this file read, compared, rows marked."""

_EMPTY = np.zeros(0, np.int64)


@dataclass
class DiffMarks:
    """This file's rows that differ from ``other``, and what only ``other`` holds."""

    path: str
    other: str
    added: np.ndarray = field(default_factory=lambda: _EMPTY)  # row numbers, sorted: content the other lacks
    changed: np.ndarray = field(default_factory=lambda: _EMPTY)  # row numbers, sorted: the other has other values
    report: Any = None  # codec.ops.diff.Diff from the other file to this one (removed = only in the other)

    def mark(self, row: int) -> str | None:
        """``added``, ``changed`` or None for row ``row``."""
        for name, rows in (("added", self.added), ("changed", self.changed)):
            k = int(np.searchsorted(rows, row))
            if k < len(rows) and int(rows[k]) == row:
                return name
        return None

    def removed(self) -> dict[str, int]:
        """What only the other file holds, per kind (retained, sessions, subscriptions, queued, stored)."""
        if self.report is None:
            return {}
        return {kind: n["removed"] for kind, n in self.report.counts().items()}

    @property
    def same(self) -> bool:
        return bool(self.report is not None and self.report.same)


def _rows(table: Any, which: np.ndarray) -> np.ndarray:
    return np.asarray(table.rows[which], np.int64)


def retain_rows(db: Any, stores: Any, store_rows: np.ndarray) -> np.ndarray:
    """The RETAIN chunks of ``db`` that point at the msg_store chunks ``store_rows`` (their first store id)."""
    from codec.columnar import iter_columns
    from codec.layouts import ChunkType

    if not len(store_rows):
        return _EMPTY
    want = np.unique(store_rows)
    out = []
    for c in iter_columns(db, ChunkType.RETAIN):
        pos, found = stores.find(c.ints["store_id"].astype(np.uint64))
        hit = found & np.isin(stores.rows[pos], want)
        out.append(c.index[hit].astype(np.int64))
    return np.concatenate(out) if out else _EMPTY


def marks_of(sa: Any, sb: Any) -> tuple[np.ndarray, np.ndarray]:
    """(added, changed) rows of snapshot ``sb`` against ``sa`` (codec.ops.diff snapshots), each sorted."""
    from codec.ops.diff import match

    added: list[np.ndarray] = []
    changed: list[np.ndarray] = []
    for name in ("stored", "sessions", "subs", "queued"):
        m = match(getattr(sa, name), getattr(sb, name))
        added.append(_rows(getattr(sb, name), m.added))
        changed.append(_rows(getattr(sb, name), m.changed_b))
    m = match(sa.retained, sb.retained)
    new, other = _rows(sb.retained, m.added), _rows(sb.retained, m.changed_b)
    added += [new, retain_rows(sb.db, sb.stores, new)]
    changed += [other, retain_rows(sb.db, sb.stores, other)]
    plus = np.unique(np.concatenate(added))
    tilde = np.setdiff1d(np.unique(np.concatenate(changed)), plus)  # added wins
    return plus, tilde


def diff_marks(path: str, other: str, *, endian: str = "little",
               progress: Callable[[int, int], None] | None = None) -> DiffMarks:
    """Compare the file ``path`` with ``other`` (a .db or a 2.1 sqlite store) by content; raises CodecError
    for a file that cannot be compared (damaged: ``mosqdb repair`` first), OSError for one not read."""
    from codec import DbFile
    from codec.ops.diff import compare, snapshot
    from codec.safefile import private_dir
    from codec.sources import as_db, open_any, records_image

    def step(k: int) -> None:
        if progress is not None:
            progress(k, STEPS)

    step(0)
    with private_dir("mosqdb-diff-") as tmp:
        # a store: its records as a .db, each chunk naming its row (a .db: itself)
        mine, rows = records_image(path, os.path.join(tmp, "store.db"))
        with as_db(open_any(other, endian=endian), endian=endian) as b, DbFile(mine, endian=endian) as a:
            sa = snapshot(b)
            step(1)
            sb = snapshot(a)
            step(2)
            report = compare(sa, sb, details=False)
            step(3)
            added, changed = marks_of(sa, sb)
            step(STEPS)
    if rows is not None:
        added, changed = (np.unique(rows[m][rows[m] >= 0]) for m in (added, changed))
    report.a, report.b = os.fspath(other), os.fspath(path)
    return DiffMarks(os.fspath(path), os.fspath(other), added, changed, report)


__all__ = ["STEPS", "DiffMarks", "diff_marks", "marks_of", "retain_rows"]
