"""The one progress bar of every long command: Rich on stderr, only on a terminal, off with ``-q``.

    with progress(args, "checking") as bar:      # bar is None when no bar is shown
        check_file(db, progress=bar)              # the codec calls bar(done, total) now and then

The codec and the exporters take a plain ``progress: Callable[[int, int], None] | None``
(``done``/``total`` in bytes read, unless the caller says otherwise) and call it every few
thousand chunks; the bar redraws at most ten times a second. It is transient: when the
command ends the bar is erased, so what stays on the terminal (and everything on stdout)
is the same with or without it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

REFRESH = 0.1  # seconds between redraws at most


def add_quiet(p: argparse.ArgumentParser) -> None:
    """``-q/--quiet``: no progress bar (commands that print a summary on stderr drop it too)."""
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def wanted(args: argparse.Namespace | None = None) -> bool:
    """A bar is shown when stderr is a terminal and ``-q`` was not given."""
    if args is not None and getattr(args, "quiet", False):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Bar:
    """``bar(done, total)`` moves the bar; ``bar.stage(text)`` renames it (a new stage of the same work)."""

    def __init__(self, progress: Any, label: str, unit: str) -> None:
        self._progress = progress
        self._label = label
        self._task = progress.add_task(label, total=None)
        self._unit = unit
        self._stage: str | None = None
        self._last = 0.0

    def __call__(self, done: int, total: int, stage: str | None = None, *, note: str | None = None) -> None:
        """Move the bar; a new ``stage`` renames it at once, ``note`` (a count, say) is shown beside the name."""
        now = time.monotonic()
        new_stage = stage is not None and stage != self._stage
        if not new_stage and not (total and done >= total) and now - self._last < REFRESH:
            return
        self._last = now
        if new_stage:
            self._stage = stage
        fields = {}
        if new_stage or note is not None:
            fields["description"] = " ".join(x for x in (self._stage or self._label, note) if x)
        self._progress.update(self._task, completed=done, total=max(total, 1), **fields)

    def stage(self, text: str) -> None:
        self._stage = text
        self._progress.update(self._task, description=text, completed=0)
        self._last = 0.0


@contextmanager
def progress(args: argparse.Namespace | None, label: str, *, unit: str = "bytes",
             enabled: bool = True) -> Iterator[Bar | None]:
    """A transient Rich progress bar on stderr; yields None (no bar, no cost) unless :func:`wanted`.

    ``unit``: ``bytes`` (shown as MB/GB read) or ``items`` (shown as done/total).
    """
    if not enabled or not wanted(args):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    amount = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
    with Progress(TextColumn("{task.description}"), BarColumn(), amount, TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True, refresh_per_second=10,
                  redirect_stdout=False) as p:  # stdout stays the command's own, byte for byte
        yield Bar(p, label, unit)
