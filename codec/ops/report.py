"""What every writing operation reports besides its own counts (surgery, trim, repair, convert).

Keyword-only fields, so each report keeps its own positional ones (``Removal("rm-retained")``,
``RepairReport(path, version)``) first; each report still spells its JSON and text itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(kw_only=True)
class WriteReport:
    """The file's size before and after, where the result went (None: a dry run, or refused), how long the
    work took, and notes for the user."""

    size_before: int = 0
    size_after: int = 0
    written: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
