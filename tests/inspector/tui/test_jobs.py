"""Long jobs: the job bar (progress and found), Esc stops a job, quitting stops it at once, the
check panel fills as findings come. Checks are asserted by how far a job got, never by timings."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from textual.widgets import ProgressBar

from inspector.tui.screens.check import CheckScreen
from inspector.tui.widgets.jobbar import JobBar

from support.tui import keys, make_app, running, settle, status, until


async def stopped(app, job: str, rounds: int = 1000) -> None:  # type: ignore[no-untyped-def]
    """Wait until the job's worker thread has stopped on its cancel (it records how far it got).

    A worker that runs on to its end never records it: the test fails after the rounds.
    """
    for _ in range(rounds):
        if app.stopped_at.get(job) is not None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the {job} worker ran on after it was cancelled")


def pace_checker(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The column checker can finish before a test sees it run: pace its batches (20 ms each in a thread,
    200 ms in the child process, whose batches are 16 times bigger)."""
    import codec.ops.check as check

    real = check.check_file

    def paced(db, *, progress=None, **kw):  # type: ignore[no-untyped-def]
        def slow(done: int, total: int) -> None:
            time.sleep(0.02)
            progress(done, total)
        return real(db, progress=slow if progress is not None else None, **kw)

    monkeypatch.setattr(check, "check_file", paced)
    monkeypatch.setenv("MOSQDB_TEST_CHECK_PACE", "0.2")


@pytest.mark.parametrize("where", ["thread", "process"])
async def test_quitting_during_check_stops_the_checker(many_chunks: Path, monkeypatch, where: str) -> None:  # type: ignore[no-untyped-def]
    import codec.ops.checker as checker

    monkeypatch.setattr(checker, "BATCH", 1024)  # in a thread, a cancel is seen within 1024 chunks
    pace_checker(monkeypatch)
    app = make_app(many_chunks)
    app.check_process_from = 0 if where == "process" else None
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        total = app.doc.db.size  # the checker reports bytes read, as every codec progress callback
        await pilot.press("c")
        await until(pilot, lambda: app.jobs.get("check") is not None and app.jobs["check"].done > 0,
                         "the checker reported progress")
        await pilot.press("ctrl+q")  # quit, as from anywhere
    # run_test returned: the app is gone; its worker thread notices and stops where it was
    await stopped(app, "check")
    assert 0 < app.stopped_at["check"] < total


async def test_a_check_in_a_child_process_finds_what_one_in_a_thread_does(v6_copy: Path) -> None:
    found = {}
    for where, threshold in (("thread", None), ("process", 0)):
        app = make_app(v6_copy)
        app.check_process_from = threshold
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await keys(pilot, "c")
            panel = app.screen
            assert isinstance(panel, CheckScreen)
            await until(pilot, lambda: not panel.running, "the check ended")  # noqa: B023
            found[where] = [(f.rule, f.chunk_index, f.message) for f in panel.findings]
            assert status(app) == f"check: {len(found[where])} finding(s)"
    assert found["process"] == found["thread"] and found["thread"]


async def test_esc_stops_the_check_and_hides_the_bar(many_chunks: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import codec.ops.checker as checker

    monkeypatch.setattr(checker, "BATCH", 1024)
    pace_checker(monkeypatch)
    async with running(many_chunks) as pilot:
        app = pilot.app
        total = app.doc.db.size  # the checker reports bytes read, as every codec progress callback
        await pilot.press("c")
        assert isinstance(app.screen, CheckScreen)
        bar = app.screen.query_one(JobBar)
        await until(pilot, lambda: bar.display and bar.shown is not None and bar.shown.done > 0,
                         "the check panel's progress bar moved")
        progress = bar.query_one(ProgressBar)
        assert progress.total == total and 0 < (progress.percentage or 0) < 1
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, CheckScreen)
        assert "check stopped" in status(app)
        assert not app.jobs and not app.query_one("#jobs", JobBar).display
        await stopped(app, "check")
        assert 0 < app.stopped_at["check"] < total


async def test_check_panel_fills_as_findings_come(v6_copy: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A checker that yields findings one by one: the first is listed while the check still runs."""
    import codec.ops.check as check

    release = threading.Event()

    def slow_check(db, *, at=None, progress=None):  # type: ignore[no-untyped-def]
        yield check.Finding("warning", "first", "found early", chunk_index=1)
        release.wait(30)  # until the test has looked at the panel
        if progress is not None:
            progress(1, 1)
        yield check.Finding("error", "second", "found late", chunk_index=2)

    monkeypatch.setattr(check, "check_file", slow_check)
    async with running(v6_copy) as pilot:
        app = pilot.app
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CheckScreen)
        try:
            await until(pilot, lambda: len(screen.findings) == 1, "the first finding in the panel", rounds=300)
            assert screen.running and "so far" in str(screen.query_one("#check-title").render())
        finally:
            release.set()
        await settle(pilot)
        # errors are listed first, also when one comes after a warning already shown
        assert [f.rule for f in screen.findings] == ["second", "first"] and not screen.running
        assert status(app) == "check: 2 finding(s)"
        assert not app.query_one("#jobs", JobBar).display


async def test_the_index_scan_shows_in_the_job_bar_then_hides(many_chunks: Path) -> None:
    app = make_app(many_chunks)
    app.scan_step = 1000  # many steps, so the bar gets messages before the end
    seen: list = []
    original = app.refresh_jobs

    def spy() -> None:
        original()
        bar = app.query_one("#jobs", JobBar)
        seen.append((bar.display, bar.shown.job if bar.shown else None))

    app.refresh_jobs = spy  # type: ignore[method-assign]
    app.job_bar_delay = 0  # at once (a fast machine could index these 600,000 chunks within the delay)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert (True, "index") in seen
        assert seen[-1] == (False, None)
        assert not app.query_one("#jobs", JobBar).display


async def test_the_check_panel_lists_a_limited_number_and_counts_the_rest(v6_copy: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import codec.ops.check as check

    def many(db, *, at=None, progress=None):  # type: ignore[no-untyped-def]
        return [check.Finding("error" if k % 2 else "warning", "rule", f"finding {k}", chunk_index=k) for k in range(5)]

    monkeypatch.setattr(check, "check_file", many)
    monkeypatch.setattr(CheckScreen, "LIMIT", 3)
    async with running(v6_copy) as pilot:
        app = pilot.app
        await keys(pilot, "c")
        panel = app.screen
        assert isinstance(panel, CheckScreen)
        assert [f.message for f in panel.findings] == ["finding 1", "finding 0", "finding 2"]  # errors first
        assert panel.more == {"error": 1, "warning": 1}
        assert str(panel.query_one("#check-title").render()).startswith("check: 2 error(s), 3 warning(s)")
        options = panel.query_one("#check-list")
        assert options.option_count == 4 and options.get_option_at_index(3).id == "more"
        assert status(app) == "check: 5 finding(s)"


async def test_a_job_that_is_through_at_once_does_not_flash_the_bar(v6_copy: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    app = make_app(v6_copy)
    app.job_bar_delay = 3600  # "at once": anything sooner than this
    shown: list = []
    original = JobBar.show

    def spy(bar: JobBar, msg) -> None:  # type: ignore[no-untyped-def]
        original(bar, msg)
        if bar.id == "jobs" and bar.display:
            shown.append(msg.job)

    monkeypatch.setattr(JobBar, "show", spy)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.apply_filter("topic:corp/#")  # a text filter: a worker
        await settle(pilot)
        assert len(app.filter_rows) and not shown
