"""What every writing operation reports besides its own counts (surgery, trim, repair, convert), and repair's report
(a .db's salvage and a store's, :mod:`codec.store.salvage`, report alike).

Keyword-only fields, so each report keeps its own positional ones (``Removal("rm-retained")``,
``RepairReport(path, version)``) first; each report still spells its JSON and text itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(kw_only=True)
class WriteReport:
    """The file's size before and after, where the result went (None: a dry run, or refused), how long the
    work took, and notes for the user."""

    size_before: int = 0
    size_after: int = 0
    written: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


@dataclass
class Dropped:
    offset: int
    size: int
    kind: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "size": self.size, "kind": self.kind, "reason": self.reason}


@dataclass
class RepairReport(WriteReport):
    path: str
    version: int | None
    chunks_found: int = 0
    kept: dict[str, int] = field(default_factory=dict)
    dropped: list[Dropped] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    valid: bool = False
    remaining_errors: list[str] = field(default_factory=list)
    warnings_after: int = 0
    recoverable_retained: int = 0  # retained messages --recover-retained would have kept (0 when it was given)
    lost: list[str] = field(default_factory=list)  # a store's rows on damaged pages, by table and rowid range
    unit: str = "chunk"  # what ``kept`` counts: a .db's chunks, a store's rows

    @property
    def changed(self) -> bool:
        return bool(self.dropped or self.fixes or self.lost)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path, "version": self.version, "size_before": self.size_before,
            "chunks_found": self.chunks_found, "kept": self.kept, "dropped": [d.to_json() for d in self.dropped],
            "fixes": self.fixes, "notes": self.notes, "valid": self.valid, "remaining_errors": self.remaining_errors,
            "warnings_after": self.warnings_after, "written": self.written, "size_after": self.size_after,
            "recoverable_retained": self.recoverable_retained, "seconds": round(self.seconds, 3),
            **({"lost": self.lost} if self.unit == "row" else {}),
        }

    def lines(self) -> list[str]:
        out = [f"dropped {d.kind} at offset {d.offset} ({d.size:,} bytes): {d.reason}" for d in self.dropped[:200]]
        if len(self.dropped) > 200:
            out.append(f"... and {len(self.dropped) - 200:,} more dropped")
        out.extend(self.lost)
        out.extend(f"fixed: {f}" for f in self.fixes)
        kept = ", ".join(f"{k} {n:,}" for k, n in self.kept.items() if n)
        if self.unit == "row":
            out.append(f"kept {sum(self.kept.values()):,} row(s) ({kept or 'none'}); {len(self.lost):,} damaged "
                       "stretch(es) of rows lost")
        else:
            out.append(f"kept {sum(self.kept.values()):,} chunk(s) ({kept or 'none'}); dropped {len(self.dropped):,} "
                       "chunk(s) or region(s)")
        if not self.changed:
            out.append("nothing to repair: the file was already valid")
        out.extend(self.notes)
        return out
