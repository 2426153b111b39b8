"""Helpers for bulk runs that build millions of small Python objects.

``background`` runs a producer a few items ahead in a thread, so encoding overlaps I/O or a
server's work (sqlite, sockets and zlib release the GIL); migrations run under
:func:`codec.progress.paused_gc` (rows, tuples and messages that never form cycles: the
cyclic collector's passes over the growing heap cost a third of a 200 k message EMQX plan).
``Memo`` computes a value once per key (client ids,
topics and their SQL literals repeat over millions of rows).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any


def background(it: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """Run a generator in a worker thread, ``depth`` items ahead; its exceptions re-raise here."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    end = object()
    stop = threading.Event()

    def work() -> None:
        try:
            for item in it:
                if stop.is_set():
                    return
                q.put((None, item))
        except BaseException as exc:  # handed to the consumer
            q.put((exc, None))
            return
        q.put((None, end))

    t = threading.Thread(target=work, daemon=True)
    t.start()
    try:
        while True:
            exc, item = q.get()
            if exc is not None:
                raise exc
            if item is end:
                return
            yield item
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(0.05)


class Memo(dict):
    """``memo[key]`` is ``fn(key)``, computed on first use (a dict lookup afterwards)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.fn(key)
        return value
