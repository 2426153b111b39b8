"""Long loops: progress reporting (a plain optional callable, no UI) and a paused cyclic GC.

Functions that walk a whole file take ``progress: Progress | None = None`` and call
``progress(done, total)`` (bytes of the input read so far, the input's size) every
:data:`EVERY` + 1 chunks and once at the end; the caller decides how (and whether) to show it.
"""

from __future__ import annotations

import contextlib
import gc
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


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic GC disabled for the block (reference counting still frees everything acyclic): loops
    that make millions of short-lived tuples and no cycles (a dump, a migration) spend a few per cent
    of their CPU in its passes otherwise."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
