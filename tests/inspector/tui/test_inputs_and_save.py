"""Inputs keep the focus until accepted or cancelled; ctrl+s keeps a backup, the undo history and the filter.

Each test drives the keys an operator pressed when it went wrong: a rejected filter or prompt gave the
focus back to the chunk list, so the corrected text ran as commands; a save kept no backup, cleared the
undo history and dropped the filter.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import Input

from codec import DbFile
from inspector.tui.screens.confirm import ConfirmSave
from inspector.tui.screens.prompt import PromptScreen

from support.paths import SQLITE_STORES, V6
from support.tui import keys, running, settle, status, type_text


async def test_a_rejected_filter_keeps_the_focus_in_the_filter_bar(v6_copy: Path) -> None:
    async with running(v6_copy) as pilot:
        app = pilot.app
        await keys(pilot, "f")
        await type_text(pilot, "type:retian")
        await keys(pilot, "enter")
        assert "did you mean retain?" in status(app)
        box = app.query_one("#filter", Input)
        assert app.focused is box and box.display
        # the corrected text goes into the bar: no key runs as a command (a adds a chunk, i edits bytes)
        await pilot.press("ctrl+u")
        await type_text(pilot, "type:retain")
        await keys(pilot, "enter")
        assert not app.doc.is_dirty() and not app.doc.new_records
        assert app.filter_text == "type:retain"
        assert app.focused is app.chunks
        assert {app.doc.record(int(r)).kind for r in app.chunks.rows} == {"retain"}


async def test_a_rejected_goto_keeps_its_prompt_open() -> None:
    async with running(V6) as pilot:
        app = pilot.app
        for bad in ("zz", "99999", "#424242"):
            await keys(pilot, "g")
            await type_text(pilot, bad)
            await keys(pilot, "enter")
            assert isinstance(app.screen, PromptScreen), bad
            assert isinstance(app.focused, Input) and app.focused.value == bad
            assert app.screen.query_one("#prompt-error").display
            await keys(pilot, "escape")
            assert not isinstance(app.screen, PromptScreen)
        await keys(pilot, "g")
        await type_text(pilot, "12")
        await keys(pilot, "enter")
        assert not isinstance(app.screen, PromptScreen) and app.item == 12


async def test_a_refused_field_value_keeps_the_edit_prompt_open(v6_copy: Path) -> None:
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.apply_filter("type:msg_store")
        await settle(pilot)
        item = app.item
        app.fields.focus()
        node = next(n for _s, _z, n in app.fields.nodes_by_span if n.data.name == "qos")
        app.fields.move_cursor(node)
        await keys(pilot, "e")
        await pilot.press("ctrl+u")
        await type_text(pilot, "7")
        await keys(pilot, "enter")
        assert isinstance(app.screen, PromptScreen)
        assert "out of range" in str(app.screen.query_one("#prompt-error").render())
        assert not app.doc.is_dirty()
        await pilot.press("ctrl+u")
        await type_text(pilot, "1")
        await keys(pilot, "enter")
        assert not isinstance(app.screen, PromptScreen)
        assert app.doc.record(item)["qos"] == 1


async def test_a_refused_chunk_kind_keeps_the_add_prompt_open(v6_copy: Path) -> None:
    async with running(v6_copy) as pilot:
        app = pilot.app
        await keys(pilot, "A")
        await type_text(pilot, "retian")
        await keys(pilot, "enter")
        assert isinstance(app.screen, PromptScreen) and not app.doc.new_records
        await pilot.press("ctrl+u")
        await type_text(pilot, "retain")
        await keys(pilot, "enter")
        assert not isinstance(app.screen, PromptScreen) and len(app.doc.new_records) == 1


async def test_save_keeps_a_backup_the_undo_history_and_the_filter(v6_copy: Path) -> None:
    original = v6_copy.read_bytes()
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.apply_filter("type:retain")
        await settle(pilot)
        first = app.item
        topic = app.chunks.rows[0]
        await keys(pilot, "d")
        assert app.doc.overlay.deleted == {first}
        await keys(pilot, "ctrl+s")
        assert "saved" in status(app)
        backup = Path(f"{v6_copy}.bak")
        assert backup.read_bytes() == original  # as --in-place keeps it
        after_first = v6_copy.read_bytes()
        assert after_first != original
        assert app.filter_text == "type:retain"
        assert {app.doc.record(int(r)).kind for r in app.chunks.rows} == {"retain"}
        assert len(app.chunks.rows) == 9
        assert not app.doc.is_dirty() and app.doc.undo_stack
        # undo after the save brings the deleted retain back; a further save writes it
        await keys(pilot, "u")
        assert app.doc.is_dirty()
        assert len(app.chunks.rows) == 10 and topic is not None
        await keys(pilot, "ctrl+s")
        assert Path(f"{v6_copy}.bak.1").read_bytes() == after_first  # never over the older backup
        assert backup.read_bytes() == original
    assert v6_copy.read_bytes() == original


async def test_save_keeps_undo_across_saves_of_inserted_and_edited_chunks(v6_copy: Path) -> None:
    original = v6_copy.read_bytes()
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.do_edit(0, "shutdown", "0")
        await keys(pilot, "ctrl+s")
        app.jump(5)
        await settle(pilot)
        await keys(pilot, "a")  # a copy of chunk 5 after it
        assert len(app.doc.new_records) == 1
        await keys(pilot, "ctrl+s")
        assert isinstance(app.screen, ConfirmSave)  # a second msg_store with its store id: a new error
        await keys(pilot, "s")
        assert status(app).startswith("saved"), status(app)
        with DbFile(v6_copy) as db:
            assert len(db) == 91 and db.raw(5) == db.raw(6)
        await keys(pilot, "u")  # the copy goes
        await keys(pilot, "u")  # the shutdown edit goes
        assert app.doc.is_dirty()
        await keys(pilot, "ctrl+s")
        await keys(pilot, "U")  # redo after a save is a new edit again: nothing to redo
    assert v6_copy.read_bytes() == original


async def test_store_save_keeps_a_backup_and_the_filter(tmp_path: Path) -> None:
    store = tmp_path / "mosquitto.sqlite3"
    shutil.copyfile(SQLITE_STORES[0], store)
    async with running(store) as pilot:
        app = pilot.app
        app.apply_filter("type:retain")
        await settle(pilot)
        n = len(app.chunks.rows)
        await keys(pilot, "d")
        await keys(pilot, "ctrl+s")
        assert "saved" in status(app)
        assert Path(f"{store}.bak").exists()
        assert app.filter_text == "type:retain" and len(app.chunks.rows) == n - 1
