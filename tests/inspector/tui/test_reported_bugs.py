"""The inspector bugs an operator reported, each driven with the keys that showed it.

Each test failed on the code before its fix (the commit that fixed it says how).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from textual.screen import ModalScreen

from codec import DbFile
from codec.ops.check import check_file
from codec.ops.surgery import drop_clients
from codec.writer import Overlay, save

from support.clock import AT
from support.paths import V6
from support.tui import keys, make_app, running, settle, status, type_text


def hex_rows(app) -> list[tuple[int, bytes]]:  # type: ignore[no-untyped-def]
    """The hex view's visible rows as (offset label, bytes shown)."""
    rows = []
    for y in range(app.hex.size.height):
        text = "".join(seg.text for seg in app.hex.render_line(y))
        left = text.split("|")[0].split()
        if len(left) < 2:
            continue
        rows.append((int(left[0], 16), bytes.fromhex("".join(left[1:]))))
    return rows


def screen_text(screen) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(str(w.render()) for w in screen.query("*") if hasattr(w, "render"))


async def test_hex_rows_follow_the_width_after_a_resize() -> None:
    """Bug 1: at 120x40 a row holds 8 bytes; widened to 200x60 rows are 16 bytes apart and must hold
    those 16 bytes (they held 8 stale ones: row 00000708 showed the bytes of 0x6e8)."""
    data = V6.read_bytes()
    async with running(V6, size=(120, 40)) as pilot:
        app = pilot.app
        await keys(pilot, "g")
        await type_text(pilot, "20")
        await keys(pilot, "enter")
        assert app.item == 20
        before = hex_rows(app)
        assert before and all(data[off:off + len(b)] == b for off, b in before)
        await pilot.resize_terminal(200, 60)
        await settle(pilot)
        after = hex_rows(app)
        assert len(after) > 2 and after[1][0] - after[0][0] == 16
        for off, shown in after:
            assert shown == data[off:off + len(shown)], f"row {off:08x} shows other bytes"
            assert len(shown) == 16 or off + len(shown) == app.doc.view(20).offset + len(app.doc.view(20).data)


async def test_command_keys_in_the_hex_view_are_commands_not_byte_edits() -> None:
    """Bug 2: `g 27` Enter, Tab Tab End, then `f` `type:retain` made two byte edits (fe, ea) and ran
    follow (r). Outside byte-edit mode, f opens the filter; the text goes into it."""
    async with running(V6, size=(120, 40)) as pilot:
        app = pilot.app
        await keys(pilot, "g")
        await type_text(pilot, "27")
        await keys(pilot, "enter", "tab", "tab", "end")
        assert app.hex.has_focus
        await keys(pilot, "f")
        await type_text(pilot, "type:retain")
        await settle(pilot)
        assert not app.doc.is_dirty(), [e.label for e in app.doc.undo_stack]
        box = app.query_one("#filter")
        assert box.has_focus and box.value == "type:retain"
        await keys(pilot, "enter")
        assert app.filter_text == "type:retain"
        assert {app.doc.record(int(i)).kind for i in app.chunks.rows} == {"retain"}


async def test_esc_leaves_byte_editing_without_a_half_typed_nibble() -> None:
    """Bug 2: Esc must not leave a half-typed nibble (`f_`) on screen; editing bytes is a mode."""
    async with running(V6, size=(120, 40)) as pilot:
        app = pilot.app
        app.jump(27)
        await settle(pilot)
        app.hex.focus()
        await keys(pilot, "i")  # start editing bytes
        assert app.hex.editing
        await keys(pilot, "f")
        line = "".join(seg.text for seg in app.hex.render_line(0))
        assert "f_" in line
        await keys(pilot, "escape")
        assert not app.hex.editing
        line = "".join(seg.text for seg in app.hex.render_line(0))
        assert "f_" not in line and not app.doc.is_dirty()


async def test_saving_a_file_with_new_errors_asks_first(v6_copy: Path) -> None:
    """Bug 3: `A`, `retain`, Enter, ctrl+s saved a RETAIN pointing at store id 0 (a check error).
    Saving checks first and asks before writing a file with new errors, listing them."""
    before = v6_copy.read_bytes()
    async with running(v6_copy) as pilot:
        app = pilot.app
        await keys(pilot, "A")
        await type_text(pilot, "retain")
        await keys(pilot, "enter", "ctrl+s")
        await settle(pilot)
        assert v6_copy.read_bytes() == before, "saved without asking"
        assert isinstance(app.screen, ModalScreen)
        text = screen_text(app.screen)
        assert "dangling" in text and "store id 0" in text
        await keys(pilot, "escape")  # go back: nothing written, the edit is kept
        assert v6_copy.read_bytes() == before and app.doc.is_dirty()
        await keys(pilot, "ctrl+s")
        await settle(pilot)
        await keys(pilot, "s")  # save anyway
        await settle(pilot)
    with DbFile(v6_copy) as db:
        assert len(db.index) == 91
        assert any(f.rule == "dangling" and f.severity == "error" for f in check_file(db, at=AT))


def test_quitting_during_a_long_check_does_not_wait_for_it(v6_copy: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Bug 4: quitting during a check (one that reports no progress for a long while, like the big
    file's final pass) left the terminal blank until the check ended: the app must return at once."""
    import codec.ops.check as check

    release, entered = threading.Event(), threading.Event()

    def stuck(db, **kw):  # type: ignore[no-untyped-def]
        entered.set()
        release.wait(300)
        return []

    monkeypatch.setattr(check, "check_file", stuck)
    app = make_app(v6_copy)
    app.check_process_from = None

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("c")
            for _ in range(3000):
                if entered.is_set():
                    break
                await pilot.pause(0.01)
            assert entered.is_set()
            await pilot.press("ctrl+q")

    returned = threading.Event()

    def run() -> None:
        asyncio.run(scenario())
        returned.set()

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        # the bound only ends a hang: the app must return while the check is still stuck
        assert returned.wait(60), "quitting waited for the check to finish"
        assert not release.is_set()
    finally:
        release.set()
        runner.join(60)


async def test_quit_dialog_shows_its_keys(v6_copy: Path) -> None:
    """Bug 5: the quit dialog's key hints ([s] [d] [esc]) were swallowed as markup."""
    from textual.widgets import Button

    async with running(v6_copy) as pilot:
        app = pilot.app
        app.do_edit(0, "shutdown", "0")
        await keys(pilot, "q")
        labels = " ".join(str(b.label) for b in app.screen.query(Button))
        assert "[s]" in labels and "[d]" in labels and "[esc]" in labels, labels


async def test_esc_clears_the_filter_message() -> None:
    """Bug 5: after Esc clears a filter the status still said "filter applied"."""
    async with running(V6) as pilot:
        app = pilot.app
        await keys(pilot, "f")
        await type_text(pilot, "type:retain")
        await keys(pilot, "enter")
        assert "filter" in status(app)
        await keys(pilot, "escape")
        assert app.filter_text == "" and "filter applied" not in status(app)


async def test_header_counts_include_unsaved_additions_and_deletions(v6_copy: Path) -> None:
    """Bug 5: the header's counts ignored unsaved additions."""
    async with running(v6_copy, size=(120, 30)) as pilot:
        app = pilot.app
        header = lambda: str(app.query_one("#summary").render())  # noqa: E731
        assert "msg 31 " in header() and "90 chunks" in header()
        app.jump(1)
        await keys(pilot, "a")  # a copy of msg_store[1]
        assert "msg 32 " in header() and "91 chunks" in header()
        app.jump(80)
        await keys(pilot, "d")  # delete a retain
        assert "ret 9 " in header()
        await keys(pilot, "u", "u")
        assert "msg 31 " in header() and "ret 10 " in header()


def damaged_in_the_middle(tmp_path: Path) -> Path:
    """2.0.20-a with chunk 21's length made absurd: the index stops there, 100 KB follow raw."""
    data = bytearray(V6.read_bytes())
    with DbFile(V6) as db:
        off = db.index.offsets[21]
    data[off + 4:off + 8] = b"\xff\xff\xff\x7f"
    out = tmp_path / "damaged-middle.db"
    out.write_bytes(bytes(data))
    return out


async def test_goto_an_offset_inside_the_damage_moves_the_hex_view_there(tmp_path: Path) -> None:
    """Bug 5: `g 0xb000` inside a damaged region said "went to damage" but the hex view stayed."""
    path = damaged_in_the_middle(tmp_path)
    async with running(path) as pilot:
        app = pilot.app
        start = app.doc.index().end
        assert start < 0xB000 < app.doc.db.size
        await keys(pilot, "g")
        await type_text(pilot, "0xb000")
        await keys(pilot, "enter")
        assert "damage" in status(app)
        assert app.hex.cursor == 0xB000 - start
        shown = [off for off, _b in hex_rows(app)]
        assert any(off <= 0xB000 < off + app.hex.per_row for off in shown), [hex(o) for o in shown]


async def test_check_panel_lists_errors_before_warnings(tmp_path: Path) -> None:
    """Bug 5: the one error was listed after 26 warnings."""
    from inspector.tui.screens.check import CheckScreen

    path = tmp_path / "dangling.db"
    with DbFile(V6) as db:
        store = next(c.index for c in db.stream() if c.kind == "msg_store" and c.record["store_id"] == 63)
        save(db, path, Overlay({}, {store}, {}))
    with DbFile(path) as db:
        raw = [f.severity for f in check_file(db, at=AT)]
    assert raw.index("error") > raw.index("warning")  # the checker's own order puts it after a warning
    async with running(path) as pilot:
        app = pilot.app
        await keys(pilot, "c")
        panel = app.screen
        assert isinstance(panel, CheckScreen)
        for _ in range(2000):
            if not panel.running:
                break
            await pilot.pause(0.01)
        await settle(pilot)
        assert [f.severity for f in panel.findings][0] == "error"
        first = panel.query_one("#check-list").get_option_at_index(0)
        assert str(first.prompt).startswith("error")


async def test_deleting_a_client_removes_its_unreferenced_stores_as_drop_client_does(v6_copy: Path,
                                                                                  tmp_path: Path) -> None:
    """Bug 6: deleting a client in the TUI left its now unreferenced stored messages; the CLI's
    drop-client removes them. The TUI's save is byte for byte drop-client's output."""
    expected = tmp_path / "dropped.db"
    with DbFile(v6_copy) as db:
        rem = drop_clients(db, ["a-sub-q2"], expected)
        client = next(c.index for c in db.stream() if c.kind == "client" and c.record["client_id"] == "a-sub-q2")
    assert rem.stores == 6
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.jump(client)
        await keys(pilot, "d")
        await settle(pilot)
        assert "6 stored message" in status(app)
        await keys(pilot, "ctrl+s")
        await settle(pilot)
    assert v6_copy.read_bytes() == expected.read_bytes()


def test_the_pre_save_check_in_a_child_process_finds_what_one_in_a_thread_does(tmp_path: Path) -> None:
    """Big files (200 k chunks and more) are checked before a save in a child process, as the panel does."""
    from inspector.tui.model.savecheck import SaveCheck

    path = tmp_path / "dangling.db"
    with DbFile(V6) as db:
        store = next(c.index for c in db.stream() if c.kind == "msg_store" and c.record["store_id"] == 63)
        save(db, path, Overlay({}, {store}, {}))
    with DbFile(path) as db:
        thread = SaveCheck(AT, None).errors(db)
        child = SaveCheck(AT, 0).errors(db)
    assert [f.rule for f in thread] == ["dangling"]
    assert [(f.rule, f.chunk_index, f.message) for f in child] == [(f.rule, f.chunk_index, f.message) for f in thread]
