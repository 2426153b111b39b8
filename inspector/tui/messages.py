"""Messages the inspector's widgets and workers post to the app (Textual message passing)."""

from __future__ import annotations

from textual.message import Message


class ScanProgress(Message):
    """The index worker found more chunks (``done`` once the whole file is indexed)."""

    def __init__(self, count: int, done: bool) -> None:
        self.count = count
        self.done = done
        super().__init__()


class FilterProgress(Message):
    """A filter worker found more matching chunks (``done`` when the file is through)."""

    def __init__(self, generation: int, rows: list[int], done: bool, replace: bool = False,
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
