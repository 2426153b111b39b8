"""Before a save: would the saved file hold errors that the file has not now?

The save writes its temp file as always (:func:`codec.writer.save`); its ``verify`` hook runs the
checker on that temp file before the rename and compares the errors with the open file's own
(checked once per opened file). An error is new when the file had none of that rule on the same
chunk and field; chunks are matched across the edit (deleted chunks gone, inserted ones new), so
a RETAIN added with store id 0 or a stored message deleted under its references is new, damage
the file already had is not. New errors raise :class:`NewErrors`: nothing is renamed, and the
app asks before it saves again without the hook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from codec import CodecError, DbFile
from codec.writer import Overlay


class NewErrors(CodecError):
    """The written file would have errors the open one has not (``errors``: the new findings;
    ``where``: each one's place as the inspector numbers chunks, ``retain[new]`` for an inserted one)."""

    def __init__(self, errors: list[Any], where: list[str]) -> None:
        super().__init__(f"{len(errors)} new error(s)")
        self.errors = errors
        self.where = where


def where_before(f: Any, mapping: np.ndarray) -> str:
    """A finding's place with the open file's chunk numbers (what the list shows), not the saved file's."""
    if f.chunk_index is None or f.chunk_type is None:
        return f.where()
    i = int(mapping[f.chunk_index]) if 0 <= f.chunk_index < len(mapping) else -1
    return f"{f.chunk_type}[{'new' if i < 0 else i}]" + (f".{f.field}" if f.field else "")


def after_to_before(count: int, overlay: Overlay) -> np.ndarray:
    """For each chunk of the saved file, the chunk of the open file it is (-1: an inserted chunk)."""
    keep = np.ones(count, dtype=bool)
    gone = np.fromiter((i for i in overlay.deleted if 0 <= i < count), dtype=np.int64)
    keep[gone] = False
    kept = np.flatnonzero(keep)
    at = sorted(overlay.inserted)
    if not at:
        return kept
    where = np.searchsorted(kept, np.array(at, dtype=np.int64))
    reps = [len(overlay.inserted[i]) for i in at]
    return np.insert(kept, np.repeat(where, reps), -1)


def error_keys(findings: list[Any], mapping: np.ndarray | None = None) -> list[tuple[Any, ...]]:
    """What identifies an error across an edit: rule, chunk (as the open file numbers it), field;
    a finding of no chunk by its rule and message."""
    keys = []
    for f in findings:
        if f.chunk_index is None:
            keys.append((f.rule, f.message))
        else:
            i = f.chunk_index
            if mapping is not None:
                i = int(mapping[i]) if 0 <= i < len(mapping) else -1
            keys.append((f.rule, i, f.field))
    return keys


class SaveCheck:
    """The open file's errors (checked once) and the ``verify`` hook that compares a save against them.

    Files of ``process_from`` chunks and more are checked in a child process, as the check panel
    checks them (:mod:`inspector.tui.model.checkproc`): the checker's memory never joins the TUI's.
    """

    def __init__(self, at: float | None, process_from: int | None = 200_000) -> None:
        self.at = at
        self.process_from = process_from
        self._before: tuple[DbFile, set[tuple[Any, ...]]] | None = None

    def errors(self, db: DbFile) -> list[Any]:
        from codec.ops.check import Finding, check_file  # loaded when a save first needs it

        if self.process_from is not None and len(db.index) >= self.process_from:
            from inspector.tui.model.checkproc import run_check

            found = (Finding(**f) for f in run_check(db.path, db.endian, self.at, lambda _d, _t: None,
                                                      lambda: False))
        else:
            found = iter(check_file(db, at=self.at))
        return [f for f in found if f.severity == "error"]

    def before(self, db: DbFile) -> set[tuple[Any, ...]]:
        if self._before is None or self._before[0] is not db:
            self._before = (db, set(error_keys(self.errors(db))))
        return self._before[1]

    def hook(self, db: DbFile, overlay: Overlay) -> Callable[[str], None]:
        """A ``verify`` for :func:`codec.writer.save`: raises :class:`NewErrors` for a temp file with new errors."""
        before = self.before(db)
        count = len(db.index)

        def verify(tmp: str) -> None:
            with DbFile(tmp, endian=db.endian) as out:
                after = self.errors(out)
            mapping = after_to_before(count, overlay)
            new = [f for f, key in zip(after, error_keys(after, mapping), strict=True) if key not in before]
            if new:
                raise NewErrors(new, [where_before(f, mapping) for f in new])

        return verify


__all__ = ["NewErrors", "SaveCheck", "after_to_before", "error_keys", "where_before"]
