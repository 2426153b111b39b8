"""Batches to a MySQL server over one or more connections at once.

A server parses and inserts one connection's statements on one core, which bounds what a
single connection can write; with several, each connection takes whole batches in turn and
the server works on them side by side. The caller keeps its rows' order through explicit ids
(see :func:`reserve_ids`), so it does not matter which connection lands a batch first.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

COMMIT_EVERY = 20  # batches per transaction on each connection


def reserve_ids(cur: Any, table: str, n: int) -> int:
    """The first of ``n`` free AUTO_INCREMENT ids after every row of ``table``; the table's
    counter is moved past them, so a concurrent writer (a live plugin) cannot take one.

    A row that landed inside the range between reading the top id and moving the counter
    makes it try again above that row.
    """
    while True:
        cur.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
        top = int(cur.fetchone()[0])
        cur.execute(f"ALTER TABLE {table} AUTO_INCREMENT = {top + n + 1}")
        cur.execute(f"SELECT COUNT(*) FROM {table} WHERE id > {top} AND id <= {top + n}")
        if int(cur.fetchone()[0]) == 0:
            return top + 1


class Inserter:
    """Worker threads, one per connection, running ``write(cursor, job)`` on the jobs given to
    :meth:`put` (a few wait in a queue) and committing every ``COMMIT_EVERY`` jobs.

    The first error stops every worker: the rest of the queue is dropped, uncommitted work is
    rolled back, and :meth:`put` / :meth:`close` raise it in the caller's thread.
    """

    def __init__(self, cons: list[Any], write: Callable[[Any, Any], None]) -> None:
        self.write = write
        self.jobs: queue.Queue[Any] = queue.Queue(maxsize=2 * len(cons))
        self.error: BaseException | None = None
        self.stopped = False
        self.threads = [threading.Thread(target=self._work, args=(c,), daemon=True) for c in cons]
        for t in self.threads:
            t.start()

    def _work(self, con: Any) -> None:
        n = 0
        with con.cursor() as cur:
            while (job := self.jobs.get()) is not None:
                if self.error is not None or self.stopped:
                    continue  # drain: put() must never block on a stopped worker
                try:
                    self.write(cur, job)
                    n += 1
                    if n % COMMIT_EVERY == 0:
                        con.commit()
                except BaseException as exc:  # handed to the caller's thread
                    self.error = self.error or exc
            try:
                if self.error is None and not self.stopped:
                    con.commit()
                else:
                    con.rollback()
            except BaseException as exc:
                self.error = self.error or exc

    def put(self, job: Any) -> None:
        self._raise()
        self.jobs.put(job)

    def close(self, ok: bool = True) -> None:
        """Let the workers finish (``ok``) or drop what is queued (the caller failed), then wait."""
        self.stopped = not ok
        for _ in self.threads:
            self.jobs.put(None)
        for t in self.threads:
            t.join()
        if ok:
            self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error
