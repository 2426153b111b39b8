"""The write operations on a persistence file, whichever format holds it: remove retained messages, drop
sessions, prune sessions, trim queues, renew expiry times.

:func:`edits_for` gives the file's :class:`Edits` (the format chosen by :func:`codec.sources.format_of`):

* a mosquitto.db (:class:`DbEdits`) is read and a new file streamed from it (:mod:`codec.ops.surgery`,
  :mod:`codec.ops.trim`, :mod:`codec.ops.renew` with :func:`codec.writer.save`); ``in_place`` writes over
  the file after keeping a copy (:func:`codec.safefile.keep_backup`), removed again when the operation
  fails or changes nothing;
* a Mosquitto 2.1 sqlite store (:class:`StoreEdits`) is changed in one transaction
  (:class:`codec.store.edit.StoreEdit`, which keeps its own backup inside the change).

Every operation takes ``out`` (the edited copy; None with ``in_place`` false: a dry run), ``in_place``,
``backup`` and a ``progress`` callable, and returns the report the .db operation returns; afterwards
:attr:`Edits.written` says where the result went and :attr:`Edits.backup` where the original was kept.
Only a .db's result can be written to a stream (:attr:`Edits.streams`: a caller writes it to a scratch
file and copies that); a store is a database file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

import codec.safefile as safefile
from codec.errors import CodecError
from codec.ops.renew import Policy, RenewPlan
from codec.ops.session_filter import SessionCriteria
from codec.ops.surgery import Removal
from codec.ops.trim import TrimReport, TrimRules
from codec.progress import Progress
from codec.reader import DbFile
from codec.sources import format_of

T = TypeVar("T")


@runtime_checkable
class Edits(Protocol):
    """The write operations on one file (see the module doc)."""

    path: str
    format_name: str
    streams: bool  # its result can be written to a stream (the bytes of a .db)
    empty: bool
    version: int | None
    written: str | None  # where the last operation's result went (None: nowhere)
    backup: str | None  # where ``in_place`` kept the original (None: no backup kept)

    def close(self) -> None: ...

    def __enter__(self) -> Edits: ...

    def __exit__(self, *exc: object) -> None: ...

    def rm_retained(self, filters: list[str], out: str | None, *, in_place: bool = False, backup: bool = True,
                    progress: Progress | None = None) -> Removal: ...

    def drop_clients(self, client_ids: list[str], criteria: SessionCriteria | None, out: str | None, *,
                     in_place: bool = False, backup: bool = True, progress: Progress | None = None) -> Removal: ...

    def prune_sessions(self, criteria: SessionCriteria, out: str | None, *, in_place: bool = False,
                       backup: bool = True, progress: Progress | None = None) -> Removal: ...

    def trim_queue(self, rules: TrimRules, out: str | None, *, in_place: bool = False, backup: bool = True,
                   progress: Progress | None = None) -> TrimReport: ...

    def renew(self, policy: Policy, out: str | None, *, in_place: bool = False, backup: bool = True,
              progress: Progress | None = None) -> RenewPlan: ...


def edits_for(path: str, open_db: Callable[[], DbFile]) -> Edits:
    """The write operations on ``path``: a store's own, or a .db's on the DbFile ``open_db()`` opens (the
    caller's opener, which may refuse a file read in the wrong byte order)."""
    fmt = format_of(path)
    if not fmt.chunk_bytes:
        return StoreEdits(path)
    return DbEdits(open_db())


def same_bytes(a: str, b: str) -> bool:
    """Do the regular files ``a`` and ``b`` hold the same bytes (read without following links)?"""
    fds = []
    try:
        for p in (a, b):
            d, name = safefile.SafeDir.of(p)
            with d:
                fds.append(d.open_read(name))
        if os.fstat(fds[0]).st_size != os.fstat(fds[1]).st_size:
            return False
        offset = 0
        while True:
            x, y = os.pread(fds[0], 1 << 20, offset), os.pread(fds[1], 1 << 20, offset)
            if x != y:
                return False
            if not x:
                return True
            offset += len(x)
    except (CodecError, OSError):
        return False
    finally:
        for fd in fds:
            os.close(fd)


def with_backup(path: str, work: Callable[[], T], changed: Callable[[T], bool] | None = None) -> tuple[T, str | None]:
    """Keep a copy of ``path`` (:func:`codec.safefile.keep_backup`), then run ``work()`` (which writes over
    it); the copy is removed again if the work fails or changed nothing (``changed(result)`` false or,
    without ``changed``, the file holding the same bytes as before). Returns the result and the backup kept."""
    backup: str | None = safefile.keep_backup(path)
    try:
        result = work()
    except BaseException:
        with contextlib.suppress(CodecError):
            safefile.remove(backup)  # type: ignore[arg-type]
        raise
    assert backup is not None
    if not (changed(result) if changed is not None else not same_bytes(path, backup)):
        with contextlib.suppress(CodecError):
            safefile.remove(backup)
        backup = None
    return result, backup


class DbEdits:
    """The write operations on a mosquitto.db: the file is read, a new one streamed to ``out`` (or over it)."""

    format_name = DbFile.format_name
    streams = True

    def __init__(self, db: DbFile) -> None:
        self.db = db
        self.path = db.path
        self.written: str | None = None
        self.backup: str | None = None

    @property
    def empty(self) -> bool:
        return self.db.empty

    @property
    def version(self) -> int | None:
        return self.db.version

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> DbEdits:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, work: Callable[[str | None], T], out: str | None, in_place: bool, backup: bool,
             changed: Callable[[T], bool] | None) -> T:
        self.written = self.backup = None
        if in_place and backup:
            result, self.backup = with_backup(self.path, lambda: work(self.path), changed)
        else:
            result = work(self.path if in_place else out)
        self.written = self.path if in_place else out
        return result

    def rm_retained(self, filters: list[str], out: str | None, *, in_place: bool = False, backup: bool = True,
                    progress: Progress | None = None) -> Removal:
        from codec.ops.surgery import rm_retained

        return self._run(lambda o: rm_retained(self.db, filters, o, progress=progress), out, in_place, backup,
                         _changed)

    def drop_clients(self, client_ids: list[str], criteria: SessionCriteria | None, out: str | None, *,
                     in_place: bool = False, backup: bool = True, progress: Progress | None = None) -> Removal:
        from codec.ops.surgery import drop_clients

        return self._run(lambda o: drop_clients(self.db, client_ids, o, criteria=criteria, progress=progress), out,
                         in_place, backup, _changed)

    def prune_sessions(self, criteria: SessionCriteria, out: str | None, *, in_place: bool = False,
                       backup: bool = True, progress: Progress | None = None) -> Removal:
        from codec.ops.surgery import prune_sessions

        return self._run(lambda o: prune_sessions(self.db, o, criteria, progress=progress), out, in_place, backup,
                         _changed)

    def trim_queue(self, rules: TrimRules, out: str | None, *, in_place: bool = False, backup: bool = True,
                   progress: Progress | None = None) -> TrimReport:
        from codec.ops.trim import trim_queue

        return self._run(lambda o: trim_queue(self.db, rules, o, progress=progress), out, in_place, backup, _changed)

    def renew(self, policy: Policy, out: str | None, *, in_place: bool = False, backup: bool = True,
              progress: Progress | None = None) -> RenewPlan:
        """The plan (read from the file), then the file with it applied written (the result is checked
        before the rename: damage is never copied silently)."""
        from codec.ops.check import output_verifier
        from codec.ops.renew import plan_renew
        from codec.writer import save

        plan = plan_renew(self.db, policy, progress=progress)

        def write(o: str | None) -> RenewPlan:
            if o is not None:
                save(self.db, o, plan.overlay, progress=progress, verify=output_verifier(self.db.endian))
            return plan

        return self._run(write, out, in_place, backup, None)


def _changed(report: Removal | TrimReport) -> bool:
    return report.changed


class StoreEdits:
    """The write operations on a Mosquitto 2.1 sqlite store: one transaction each (:class:`codec.store.edit.StoreEdit`)."""

    streams = False
    empty = False
    version = 6  # its rows are read as v6 chunks

    def __init__(self, path: str) -> None:
        from codec.store.read import StoreFile

        self.format_name = StoreFile.format_name
        self.path = path
        self.written: str | None = None
        self.backup: str | None = None

    def close(self) -> None:
        """Nothing stays open between the operations (each opens the store for its change)."""

    def __enter__(self) -> StoreEdits:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _edit(self, work: Callable[[Any], T], out: str | None, in_place: bool, backup: bool) -> T:
        from codec.store.edit import StoreEdit

        ed = StoreEdit(self.path, out, in_place=in_place, backup=in_place and backup)
        with ed:
            result = work(ed)
        self.written = ed.written
        self.backup = ed.backup if ed.written else None
        return result

    def _removal(self, work: Callable[[Any], Any], out: str | None, in_place: bool, backup: bool) -> Any:
        rem = self._edit(work, out, in_place, backup)
        rem.written = self.written
        rem.size_after = os.path.getsize(self.written) if self.written else rem.size_before
        return rem

    def rm_retained(self, filters: list[str], out: str | None, *, in_place: bool = False, backup: bool = True,
                    progress: Progress | None = None) -> Removal:
        from codec.store import edit

        return self._removal(lambda ed: edit.rm_retained(ed, filters), out, in_place, backup)

    def drop_clients(self, client_ids: list[str], criteria: SessionCriteria | None, out: str | None, *,
                     in_place: bool = False, backup: bool = True, progress: Progress | None = None) -> Removal:
        from codec.store import edit

        return self._removal(lambda ed: edit.drop_clients(ed, client_ids, criteria), out, in_place, backup)

    def prune_sessions(self, criteria: SessionCriteria, out: str | None, *, in_place: bool = False,
                       backup: bool = True, progress: Progress | None = None) -> Removal:
        from codec.store import edit

        return self._removal(lambda ed: edit.prune_sessions(ed, criteria), out, in_place, backup)

    def trim_queue(self, rules: TrimRules, out: str | None, *, in_place: bool = False, backup: bool = True,
                   progress: Progress | None = None) -> TrimReport:
        from codec.store import trim

        return self._removal(lambda ed: trim.trim_queue(ed, rules), out, in_place, backup)

    def renew(self, policy: Policy, out: str | None, *, in_place: bool = False, backup: bool = True,
              progress: Progress | None = None) -> RenewPlan:
        from codec.store import edit

        return self._edit(lambda ed: edit.renew(ed, policy), out, in_place, backup)


__all__ = ["DbEdits", "Edits", "StoreEdits", "edits_for", "same_bytes", "with_backup"]
