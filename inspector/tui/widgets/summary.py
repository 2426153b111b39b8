"""The header: file, size, db version, shutdown flag, counts per chunk type (unsaved edits counted),
index progress, and any lines other features add.

Features that have something to say about the whole file (a broker's verdict, the store a view
reads, what differs from another file) add a line with :meth:`SummaryBar.set_line` under a key
of their own and remove it with ``None``; the header grows by that line and shrinks back.
"""

from __future__ import annotations

import os

import numpy as np
from rich.text import Text
from textual.widgets import Static

from codec.values import printable
from inspector.tui.model.document import Document
from inspector.tui.model.rows import TYPE_SHORT


def type_counts(doc: Document) -> dict[int, int]:
    idx = doc.index()
    if idx is None or not len(idx):
        return {}
    types = idx.types_array()[: len(idx)]
    values, counts = np.unique(types, return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts, strict=True)}


def edited_counts(doc: Document, counts: dict[int, int]) -> tuple[dict[int, int], int]:
    """Counts per type and the total as the file would be saved: deleted chunks out, inserted ones in."""
    idx = doc.index()
    out = dict(counts)
    total = sum(counts.values())
    if idx is not None and doc.overlay.deleted:
        gone = np.fromiter((i for i in doc.overlay.deleted if 0 <= i < len(idx)), dtype=np.int64)
        values, n = np.unique(idx.types_array()[gone], return_counts=True)
        for t, k in zip(values.tolist(), n.tolist(), strict=True):
            out[t] = out.get(t, 0) - k
        total -= len(gone)
    for rec in doc.new_records.values():
        out[rec.type] = out.get(rec.type, 0) + 1
        total += 1
    return out, total


class SummaryBar(Static):
    """The header lines at the top of the screen (two, plus those features add)."""

    DEFAULT_CSS = "SummaryBar { height: auto; }"

    _counts: tuple[object, dict[int, int]] | None = None

    def __init__(self, **kw: str) -> None:
        super().__init__(**kw)
        self.extra: dict[str, Text] = {}
        self._doc: Document | None = None

    def set_line(self, key: str, line: Text | str | None) -> None:
        """Add, replace (same key) or remove (None) a header line of a feature's own."""
        if line is None:
            self.extra.pop(key, None)
        else:
            self.extra[key] = line if isinstance(line, Text) else Text(line)
        if self._doc is not None:
            self.refresh_summary(self._doc)

    def counts(self, doc: Document) -> dict[int, int]:
        """Counts per type, computed once per complete index (a sort of millions of types)."""
        idx = doc.index()
        if self._counts is None or self._counts[0] is not idx:
            self._counts = (idx, type_counts(doc))
        return self._counts[1]

    def refresh_summary(self, doc: Document) -> None:
        self._doc = doc
        db = doc.db
        idx = doc.index()
        name = printable(os.path.basename(doc.path))
        line1 = Text.assemble(("mosqdb ", "bold"), (name, "bold cyan"), f"  {db.size:,} bytes  ")
        heading = doc.heading()
        if heading is not None:  # the file's own figures (a store's schema, journal, rows per table)
            line1.append(heading[0])
            if doc.read_only:
                line1.append(" READ-ONLY ", style="bold black on yellow")
            elif doc.is_dirty():
                line1.append(f" {len(doc.undo_stack)} unsaved edit(s) ", style="bold black on dark_orange")
            self.update(Text("\n").join([line1, Text(heading[1]), *self.extra.values()]))
            return
        if db.empty:
            line1.append("empty file (0 bytes): the broker starts with no saved state", style="yellow")
            self.update(Text("\n").join([line1, *self.extra.values()]))
            return
        line1.append(f"db v{db.version}  ")
        if doc.count() and idx is not None and idx.types[0] == 1:
            rec = doc.record(0)
            if rec is not None:
                clean = rec.values.get("shutdown")
                line1.append(f"shutdown={clean} ({'clean' if clean else 'NOT clean'})  ",
                             style="green" if clean else "yellow")
        if doc.read_only:
            line1.append(" READ-ONLY ", style="bold black on yellow")
        elif doc.is_dirty():
            line1.append(f" {len(doc.undo_stack)} unsaved edit(s) ", style="bold black on dark_orange")
        line2 = Text()
        if idx is None or not idx.complete:
            done = (idx.end if idx is not None else 0) / max(db.size, 1)
            line2.append(f"indexing… {doc.count():,} chunks ({done:.0%})", style="bold yellow")
        else:
            base = self.counts(doc)
            counts, total = edited_counts(doc, base)
            changed = counts != base
            line2.append(f"{total:,} chunks{' (unsaved)' if changed else ''}: ")
            for t, n in sorted(counts.items()):
                line2.append(f"{TYPE_SHORT.get(t, f'type{t}')} {n:,}  ",
                             style="bold" if n != base.get(t, 0) else "")
            if idx.error is not None:
                line2.append(f"⚠ damaged from offset {idx.end} (chunk {len(idx)}); {db.size - idx.end} bytes unread",
                             style="bold red")
            elif idx.trailing:
                line2.append(f"⚠ {idx.trailing} trailing bytes", style="yellow")
        self.update(Text("\n").join([line1, line2, *self.extra.values()]))
