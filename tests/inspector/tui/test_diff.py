"""Marking what differs from a second file: ``inspect FILE --diff OTHER`` / ``v``.

The second file is made by a real command (``mosqdb rm-retained``) or a one-field variant, and the
rows expected to be marked are found by reading the records (topics, client ids), not by the diff
code: a row is ``+`` when the other file lacks its content, ``~`` when the other holds it otherwise;
what only the other file holds is counted in the header and listed by ``V``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from codec import DbFile
from inspector.tui.features.diffing import DiffScreen

from support.cli import run_in_process
from support.clock import AT
from support.paths import INCOMING, V6
from support.tui import keys, make_app, running, settle, status, type_text, until
from support.variants import make

TOPIC = "corp/retained/plain"


def header(app) -> str:  # type: ignore[no-untyped-def]
    return str(app.query_one("#summary").render())


def line_of(app, row: int) -> str:  # type: ignore[no-untyped-def]
    """The chunk list's text for a row (the first columns: edit mark, diff mark, index)."""
    return "".join(seg.text for seg in app.chunks._row_segments(row, 80))


def retained_rows(path: Path, topic: str) -> set[int]:
    """The msg_store chunk holding the retained message ``topic`` and the RETAIN chunks pointing at it."""
    with DbFile(path) as db:
        recs = [(c.index, c.record) for c in db.stream()]
    sids = {r["store_id"] for _i, r in recs if r.kind == "retain"}
    store = next(i for i, r in recs if r.kind == "msg_store" and r["topic"] == topic and r["store_id"] in sids)
    sid = recs[store][1]["store_id"]
    return {store} | {i for i, r in recs if r.kind == "retain" and r["store_id"] == sid}


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """(the real file, the real file after `mosqdb rm-retained TOPIC`)."""
    a = tmp_path / "before.db"
    shutil.copyfile(V6, a)
    b = tmp_path / "after.db"
    r = run_in_process("rm-retained", a, TOPIC, "-o", b)
    assert r.returncode == 0, r.stderr
    return a, b


@pytest.mark.parametrize("where", ["thread", "process"])
async def test_rows_the_other_file_lacks_are_marked(pair: tuple[Path, Path], where: str) -> None:
    before, after = pair
    expected = retained_rows(before, TOPIC)
    app = make_app(before)
    app.diff_other = str(after)
    app.check_process_from = 0 if where == "process" else None
    async with app.run_test(size=(140, 30)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: app.diff is not None, "the comparison")
        await settle(pilot)
        assert set(app.diff.added.tolist()) == expected and not len(app.diff.changed)
        assert header(app).splitlines()[2].startswith(f"≠ after.db: {len(expected)} rows not in it (+), 0 changed (~); "
                                                      "only in it: nothing")
        for row in range(app.doc.count()):
            assert line_of(app, row)[1] == ("+" if row in expected else " "), row
        app.jump(min(expected))
        await settle(pilot)
        assert "+ not in after.db" in str(app.query_one("#mode").render())


async def test_what_only_the_other_holds_is_counted_and_listed(pair: tuple[Path, Path]) -> None:
    """The other way round: nothing here is marked; the header counts the retained message and its store
    that only the other file holds, and V lists the topic."""
    before, after = pair
    app = make_app(after)
    app.diff_other = str(before)
    async with app.run_test(size=(140, 36)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: app.diff is not None, "the comparison")
        assert not len(app.diff.added) and not len(app.diff.changed)
        assert "only in it: 1 retained, 1 stored message" in header(app)
        await keys(pilot, "V")
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        texts = [str(o.prompt) for o in screen.query_one("#diff-list").options]
        assert f"- retained {TOPIC!r}" in texts
        await keys(pilot, "escape")
        assert not isinstance(app.screen, DiffScreen)


async def test_a_changed_session_is_marked_and_v_list_jumps_to_it(tmp_path: Path) -> None:
    """interval-zero changes one field of a-sub-q1's client chunk: that chunk alone is ~."""
    changed = make("interval-zero", V6, tmp_path / "changed.db", AT)
    with DbFile(changed) as db:
        client = next(c.index for c in db.stream() if c.record.kind == "client" and c.record["client_id"] == "a-sub-q1")
    async with running(changed, size=(140, 36)) as pilot:
        app = pilot.app
        await keys(pilot, "v")
        await pilot.press("ctrl+u")
        await type_text(pilot, str(V6))
        await keys(pilot, "enter")
        await until(pilot, lambda: app.diff is not None, "the comparison")
        assert app.diff.changed.tolist() == [client] and not len(app.diff.added)
        assert "1 changed (~)" in header(app) and line_of(app, client)[1] == "~"
        await keys(pilot, "V")
        option_list = app.screen.query_one("#diff-list")
        target = next(k for k, o in enumerate(option_list.options) if o.id == f"row:{client}")
        option_list.highlighted = target
        await keys(pilot, "enter")
        assert app.item == client and "changed from 2.0.20-a.db" in status(app)
        # an empty answer ends the comparison: the column and the line go
        await keys(pilot, "v")
        await pilot.press("ctrl+u")
        await keys(pilot, "enter")
        assert app.diff_other is None and len(header(app).splitlines()) == 2
        assert line_of(app, client)[1] != "~"


async def test_save_compares_again(pair: tuple[Path, Path]) -> None:
    """Delete the retained message the other file lacks: until the save the line says it is of the file on
    disk; after it the files hold the same content."""
    before, after = pair
    rows = sorted(retained_rows(before, TOPIC))
    app = make_app(before)
    app.diff_other = str(after)
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: app.diff is not None, "the comparison")
        app.doc.delete(rows, "delete the retained message")
        app.refresh_after_edit()
        assert "unsaved edits not included" in header(app)
        await keys(pilot, "ctrl+s")
        await until(pilot, lambda: app.diff is not None, "the comparison of the saved file")
        assert app.diff.same and "= after.db: same content" in header(app)


async def test_a_store_is_compared_and_a_damaged_file_is_refused(tmp_path: Path, damaged_copy: Path) -> None:
    """The other file may be a 2.1 sqlite store (read as its records); a damaged one is refused in one line."""
    app = make_app(INCOMING / "2.1.2-a.db", read_only=True)
    app.diff_other = str(INCOMING / "2.1.2-a.sqlite3")
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: app.diff is not None, "the comparison")
        counts = app.diff.report.counts()
        # as `mosqdb diff` reports them: 7 sessions changed; a shared subscription only the store holds
        assert counts["sessions"]["changed"] == 7 and counts["subscriptions"]["removed"] == 1
        assert len(app.diff.changed) >= 7 and "only in it: 1 subscription" in header(app)
        app.set_diff(str(damaged_copy))
        await settle(pilot)
        await until(pilot, lambda: "not compared" in header(app), "the refusal")
        assert "damaged" in header(app) and app.diff is None
        app.set_diff(str(tmp_path / "missing.db"))
        assert "no such file" in status(app)


def test_cli_refuses_a_missing_other_file(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    shutil.copyfile(V6, db)
    r = run_in_process("inspect", db, "--diff", tmp_path / "nope.db")
    assert r.returncode == 2 and "nope.db" in r.stderr and len(r.stderr.strip().splitlines()) == 1
