"""Messages the inspector's widgets and workers post to the app (Textual message passing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    import numpy as np


@dataclass(eq=False)  # messages are compared by identity
class ScanProgress(Message):
    """How far a long job has got: the index scan, a filter, a search, the checker or an export.

    Posted from the job's thread worker a few times a second (see :class:`~inspector.tui.model.jobs.Progress`);
    the app shows running jobs as a progress bar with "N found" and hides it when ``finished``.
    ``total`` 0 means unknown (an indeterminate bar). ``worker`` is the posting worker, so the
    app can drop what a cancelled job still had in flight.
    """

    job: str  # "index", "filter", "search", "check", "export"
    done: int  # units of work done (chunks or bytes, as ``total``)
    total: int
    found: int = 0  # rows, matches or findings so far (-1: not known until the end)
    finished: bool = False
    worker: Any = field(default=None, compare=False, repr=False)


class FilterProgress(Message):
    """A filter worker found more matching chunks (``done`` when the file is through).

    The rows themselves; how far the filter has got is a :class:`ScanProgress` of job "filter".
    """

    def __init__(self, generation: int, rows: np.ndarray, done: bool, replace: bool = False,
                 keep: int | None = None) -> None:
        self.generation = generation
        self.rows = rows
        self.done = done
        self.replace = replace
        self.keep = keep  # the chunk to keep the cursor on, if the rows have it
        super().__init__()


class RowHighlighted(Message):
    """The chunk list cursor moved to a chunk (``item`` is its index, -1 for the damage row)."""

    def __init__(self, item: int | None) -> None:
        self.item = item
        super().__init__()


class SpanSelected(Message):
    """A field was selected in the field tree; its bytes should be highlighted."""

    def __init__(self, name: str | None, start: int, size: int) -> None:
        self.name = name
        self.start = start
        self.size = size
        super().__init__()


class HexCursorMoved(Message):
    """The hex cursor moved to a byte (relative to the start of what the hex view shows)."""

    def __init__(self, pos: int) -> None:
        self.pos = pos
        super().__init__()


class HexByteTyped(Message):
    """A full byte was typed over the cursor in the hex view (overwrite mode)."""

    def __init__(self, pos: int, value: int) -> None:
        self.pos = pos
        self.value = value
        super().__init__()


class HexModeChanged(Message):
    """The hex view entered or left byte-edit mode (the footer and the mode line follow)."""

    def __init__(self, editing: bool) -> None:
        self.editing = editing
        super().__init__()


class CheckFindings(Message):
    """The checker's findings, in batches as they come (``finished`` with the last one).

    ``more``: per severity, findings past what the panel lists (counted, not kept).
    """

    def __init__(self, findings: list[Any], finished: bool, worker: Any = None,
                 more: dict[str, int] | None = None) -> None:
        self.findings = findings
        self.finished = finished
        self.worker = worker
        self.more = more or {}
        super().__init__()
