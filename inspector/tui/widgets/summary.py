"""Header lines: file, size, db version, shutdown flag, counts per chunk type, index progress."""

from __future__ import annotations

import os

import numpy as np
from rich.text import Text
from textual.widgets import Static

from codec.values import printable
from inspector.tui.document import Document
from inspector.tui.rows import TYPE_SHORT


def type_counts(doc: Document) -> dict[int, int]:
    idx = doc.index()
    if idx is None or not len(idx):
        return {}
    types = idx.arrays()[1][: len(idx)]
    values, counts = np.unique(types, return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts, strict=True)}


class SummaryBar(Static):
    """Two lines at the top of the screen."""

    _counts: tuple[object, dict[int, int]] | None = None

    def counts(self, doc: Document) -> dict[int, int]:
        """Counts per type, computed once per complete index (a sort of millions of types)."""
        idx = doc.index()
        if self._counts is None or self._counts[0] is not idx:
            self._counts = (idx, type_counts(doc))
        return self._counts[1]

    def refresh_summary(self, doc: Document) -> None:
        db = doc.db
        idx = doc.index()
        name = printable(os.path.basename(doc.path))
        line1 = Text.assemble(("mosqdb ", "bold"), (name, "bold cyan"), f"  {db.size:,} bytes  ")
        if db.empty:
            line1.append("empty file (0 bytes): the broker starts with no saved state", style="yellow")
            self.update(line1)
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
            counts = self.counts(doc)
            line2.append(f"{len(idx):,} chunks: ")
            for t, n in sorted(counts.items()):
                line2.append(f"{TYPE_SHORT.get(t, f'type{t}')} {n:,}  ")
            if idx.error is not None:
                line2.append(f"⚠ damaged from offset {idx.end} (chunk {len(idx)}); {db.size - idx.end} bytes unread",
                             style="bold red")
            elif idx.trailing:
                line2.append(f"⚠ {idx.trailing} trailing bytes", style="yellow")
        self.update(Text("\n").join([line1, line2]))
