"""Progress reporting for long loops: a plain optional callable, no UI.

Functions that walk a whole file take ``progress: Progress | None = None`` and call
``progress(done, total)`` (bytes of the input read so far, the input's size) every
:data:`EVERY` + 1 chunks and once at the end; the caller decides how (and whether) to show it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

Progress = Callable[[int, int], None]
EVERY = 0x3FFF  # report every 16,384 chunks: a few hundred calls for millions of chunks


class _Located(Protocol):
    offset: int


def tick(chunks: Iterable[_Located], progress: Progress | None, total: int) -> Iterator[_Located]:
    """Pass ``chunks`` through, reporting ``(chunk.offset, total)`` every so often and ``(total, total)`` at the end."""
    if progress is None:
        yield from chunks
        return
    for n, c in enumerate(chunks):
        if not n & EVERY:
            progress(c.offset, total)
        yield c
    progress(total, total)
