"""Long jobs (index scan, filter, search, check, export) in thread workers: one way to report, one way to stop.

A job's worker makes a :class:`Progress` and hands it to the loop that does the work (codec and
exporter functions take a ``progress`` callable). Each call posts a
:class:`~inspector.tui.messages.ScanProgress` at most ``rate`` times a second, which the app shows
as a progress bar with "N found", and raises :class:`Cancelled` once the worker is cancelled: by
Esc, by a newer job of the same kind, or by quitting, which cancels every worker. The worker
catches it and returns. Quitting does not wait for that either: the workers' threads come from
:class:`JobThreads`, daemon threads that the interpreter does not join at exit, so a job stuck in a
long step with no progress call (the checker's final pass on a big file) cannot hold the terminal.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from textual.worker import get_current_worker

from inspector.tui.messages import ScanProgress

JOB_TITLES = {"index": "indexing", "filter": "filtering", "search": "searching", "check": "checking",
              "export": "exporting", "broker": "predicting the broker",
              "diff": "comparing"}


class Cancelled(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a job's progress callback: the worker was cancelled (Esc, a newer job, quitting)."""


class Progress:
    """The progress callback of the job running in the current thread worker.

    ``progress(done, total)`` or ``progress(done, total, found)``: how far, of how much, and how many
    results so far. Messages are posted at most ``rate`` times a second (the first at once);
    :meth:`finish` posts the last one. ``stop`` is an extra reason to stop (a newer filter).
    """

    def __init__(self, app: Any, job: str, total: int = 0, *, rate: float = 10.0,
                 stop: Callable[[], bool] | None = None) -> None:
        self.app = app
        self.job = job
        self.worker = get_current_worker()
        self.total = total
        self.done = 0
        self.found = 0
        self.interval = 1.0 / rate
        self.stop = stop
        self.last = 0.0
        self.stopped = False

    def cancelled(self) -> bool:
        return self.worker.is_cancelled or (self.stop is not None and self.stop())

    def check(self) -> None:
        """Raise :class:`Cancelled` if the job should stop."""
        if self.cancelled():
            self.stopped = True
            raise Cancelled(self.job)

    def __call__(self, done: int, total: int | None = None, found: int | None = None) -> None:
        self.check()
        self.done = done
        if total is not None:
            self.total = total
        if found is not None:
            self.found = found
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self.post(False)

    def post(self, finished: bool) -> None:
        self.app.post_message(ScanProgress(self.job, self.done, self.total, self.found, finished, self.worker))

    def finish(self) -> None:
        """The job is through (or stopped): the app hides its bar."""
        self.post(True)

    def deliver(self, compute: Callable[[], Any], errors: tuple[type[Exception], ...],
                failed: Callable[[str], None], ready: Callable[[Any], None]) -> None:
        """Run a whole-file job's ``compute`` in this worker, then on the app's thread hand its result to
        ``ready`` or one of ``errors``' text to ``failed``; a stopped job ends quietly, the bar hidden."""
        try:
            result = compute()
        except Cancelled:
            return
        except errors as exc:
            self.app.call_from_thread(failed, str(exc))
            return
        finally:
            self.finish()
        if result is not None and not self.cancelled():
            self.app.call_from_thread(ready, result)


class JobThreads(ThreadPoolExecutor):
    """The event loop's default executor for the app's thread workers: one daemon thread per job.

    asyncio's default pool is joined when the loop closes (``asyncio.run`` waits for it) and again
    at interpreter exit, so a quit waited for every worker thread to return. These threads are
    never joined: a cancelled job stops at its next progress call, or with the process.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task, as the pool does
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name="mosqdb-job", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to wait for: the threads are daemons (see the class)."""


__all__ = ["JOB_TITLES", "Cancelled", "JobThreads", "Progress"]
