"""Discoverable: a person who reads only the key bar and `?` can do the common tasks.

The task tests press only keys the key bar or the help screen shows (and arrows), and check
each key was on screen before pressing it.
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from codec import DbFile
from codec.ops.check import check_file
from codec.ops.surgery import drop_clients
from inspector.tui.actions import TABLE, actions, help_text, key_names
from inspector.tui.screens.check import CheckScreen
from inspector.tui.screens.help import HelpScreen
from inspector.tui.screens.prompt import PromptScreen
from inspector.tui.widgets.keybar import KeyBar

from support.clock import AT
from support.paths import V6
from support.tui import keys, running, settle, status, type_text

TOPIC = "corp/retained/température/salle-1"


def bar(app) -> list[str]:  # type: ignore[no-untyped-def]
    return app.query_one(KeyBar).shown()


def mode(app) -> str:  # type: ignore[no-untyped-def]
    return str(app.query_one("#mode", Static).render())


def rows_text(app) -> list[str]:  # type: ignore[no-untyped-def]
    """The chunk list's visible lines as shown."""
    return ["".join(seg.text for seg in app.chunks.render_line(y)) for y in range(app.chunks.size.height)]


async def offered(pilot, app, label: str, *presses: str) -> None:  # type: ignore[no-untyped-def]
    """Press keys only after checking the key bar offers ``label``."""
    assert label in bar(app), f"{label!r} is not on the key bar: {bar(app)}"
    await keys(pilot, *presses)


async def test_key_bar_follows_the_focused_pane_and_keeps_save_undo_help_at_80x24() -> None:
    async with running(V6, size=(80, 24)) as pilot:
        app = pilot.app
        seen = {}
        seen["list"] = bar(app)
        await keys(pilot, "tab")
        seen["fields"] = bar(app)
        await keys(pilot, "tab")
        seen["hex"] = bar(app)
        await keys(pilot, "i")
        seen["bytes"] = bar(app)
        assert "EDITING BYTES" in mode(app)
        await keys(pilot, "escape", "f")
        seen["filter"] = bar(app)
        assert "FILTER BAR" in mode(app)
        for pane, labels in seen.items():
            assert labels[:3] == ["Save", "Undo", "Help"], (pane, labels)
        assert {"Delete", "Ref", "Filter"} <= set(seen["list"])
        assert "Edit" in seen["fields"] and "Delete" not in seen["fields"]
        assert "Edit bytes" in seen["hex"]
        assert {"type a byte", "Done"} <= set(seen["bytes"]) and "Quit" not in seen["bytes"]
        assert {"Apply", "Clear"} <= set(seen["filter"])


async def test_help_and_palette_list_every_action_with_its_key() -> None:
    async with running(V6, size=(80, 24)) as pilot:
        app = pilot.app
        await keys(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = str(app.screen.query_one("#help-text", Static).render())
        for a in TABLE:
            if a.group:
                assert all(k in shown for k in key_names(a)), a
        assert shown.startswith(str(Static(help_text()).render()))  # the help is the table's
        await keys(pilot, "escape")
        titles = {c.title for c in app.get_system_commands(app.screen)}
        for a in actions():
            assert f"{a.title}  ({' '.join(key_names(a))})" in titles


async def test_find_a_retained_message_by_topic_change_its_payload_and_save(v6_copy: Path) -> None:
    async with running(v6_copy, size=(80, 24)) as pilot:
        app = pilot.app
        await offered(pilot, app, "Filter", "f")
        assert "retain" in str(app.query_one("#filter-help", Static).render())  # the types are listed
        await type_text(pilot, "type:retain corp/retained/tem")  # a bare word: topics starting with it
        await offered(pilot, app, "Apply", "enter")
        assert len(app.chunks.rows) == 1 and app.doc.record(int(app.chunks.rows[0])).kind == "retain"
        assert any("→#59 corp/retained/te" in line for line in rows_text(app))  # the retain row shows its topic
        await offered(pilot, app, "Ref", "r")  # follow to the stored message
        rec = app.doc.record(app.item)
        assert rec.kind == "msg_store" and rec["topic"] == TOPIC
        await offered(pilot, app, "Pane", "tab")
        for _ in range(40):
            node = app.fields.cursor_node
            if node is not None and node.data is not None and node.data.name == "payload":
                break
            await keys(pilot, "down")
        await offered(pilot, app, "Edit", "e")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("ctrl+u")
        await type_text(pilot, "19.5 C")
        await keys(pilot, "enter")
        assert "1 unsaved edit" in mode(app)
        await offered(pilot, app, "Save", "ctrl+s")
        assert "saved" in status(app)
    with DbFile(v6_copy) as db:
        stored = [c.record for c in db.stream() if c.kind == "msg_store" and c.record["topic"] == TOPIC]
    assert [r["payload"] for r in stored] == [b"19.5 C"]


async def test_delete_a_client_from_the_key_bar(v6_copy: Path, tmp_path: Path) -> None:
    expected = tmp_path / "expected.db"
    with DbFile(v6_copy) as db:
        drop_clients(db, ["a-sub-v5"], expected)
    async with running(v6_copy, size=(80, 24)) as pilot:
        app = pilot.app
        await offered(pilot, app, "Filter", "f")
        await type_text(pilot, "type:client")
        await keys(pilot, "enter")
        for _ in range(10):
            if app.doc.record(app.item)["client_id"] == "a-sub-v5":
                break
            await keys(pilot, "down")
        await offered(pilot, app, "Delete", "d")
        assert "delete session 'a-sub-v5'" in status(app)
        await offered(pilot, app, "Save", "ctrl+s")
    assert v6_copy.read_bytes() == expected.read_bytes()


async def test_browse_a_damaged_file(tmp_path: Path) -> None:
    data = bytearray(V6.read_bytes())
    with DbFile(V6) as db:
        off = db.index.offsets[21]
    data[off + 4:off + 8] = b"\xff\xff\xff\x7f"
    path = tmp_path / "damaged.db"
    path.write_bytes(bytes(data))
    async with running(path, size=(80, 24)) as pilot:
        app = pilot.app
        assert "damaged from offset" in str(app.query_one("#summary").render())
        await keys(pilot, "end")  # the last row: the damage
        assert "damage" in rows_text(app)[app.chunks.cursor - app.chunks.top]
        assert "damage (raw bytes)" in mode(app)
        assert str(app.fields.root.label).startswith("⚠ damage at offset")
        await offered(pilot, app, "Pane", "tab", "tab")
        assert app.hex.has_focus and app.hex.source.base == off
        await keys(pilot, "pagedown", "pagedown")
        assert app.hex.cursor > 0
        await offered(pilot, app, "Goto", "g")
        await type_text(pilot, "0xb000")
        await keys(pilot, "enter")
        assert app.hex.cursor == 0xB000 - off
        await keys(pilot, "home")  # the list: intact chunks before the damage browse as ever
        app.chunks.focus()
        await keys(pilot, "home", "down")
        assert app.doc.record(app.item).kind == "msg_store"
        # at 80 columns the key bar has no room for Check: the help screen (?, on the bar) lists it
        await offered(pilot, app, "Help", "question_mark")
        assert "c             check the file" in str(app.screen.query_one("#help-text", Static).render())
        await keys(pilot, "escape", "c")
        assert isinstance(app.screen, CheckScreen)
        for _ in range(2000):
            if not app.screen.running:
                break
            await pilot.pause(0.01)
        assert app.screen.findings[0].severity == "error"


async def test_filter_help_near_misses_and_topic_prefixes() -> None:
    async with running(V6) as pilot:
        app = pilot.app
        app.apply_filter("type:retian")
        assert "did you mean retain?" in status(app)
        app.apply_filter("tpoic:corp/#")
        assert "did you mean topic:?" in status(app)
        app.apply_filter("type:retained")  # the CLI's --kind spelling
        await settle(pilot)
        assert {app.doc.record(int(i)).kind for i in app.chunks.rows} == {"retain"} and len(app.chunks.rows) == 10
        app.apply_filter("corp/retained/b")  # a prefix inside a level: big and binary
        await settle(pilot)
        with DbFile(V6) as db:
            stores = {c.record["store_id"] for c in db.stream()
                      if c.kind == "msg_store" and c.record["topic"].startswith("corp/retained/b")}
            want = [c.index for c in db.stream() if c.kind in ("msg_store", "retain", "client_msg")
                    and c.record["store_id"] in stores]
        assert len(stores) == 2 and list(app.chunks.rows) == want
        app.apply_filter("corp/nothing-starts-so")
        await settle(pilot)
        assert list(app.chunks.rows) == []


async def test_layout_toggle_widens_the_list() -> None:
    async with running(V6, size=(200, 60)) as pilot:
        app = pilot.app
        normal = app.chunks.size.width
        assert normal >= 80  # no fixed maximum: the list grows with the terminal
        await offered(pilot, app, "Layout", "w")
        wide = app.chunks.size.width
        assert wide > normal and app.hex.size.width > 0
        await keys(pilot, "w")
        assert app.chunks.size.width >= 199 and not app.query_one("#right").display
        await keys(pilot, "i")  # editing bytes needs the hex view: back to three panes
        assert app.query_one("#right").display and app.hex.editing
        await keys(pilot, "escape")


async def test_mode_line_and_header_lines(v6_copy: Path) -> None:
    async with running(v6_copy, read_only=True) as pilot:
        app = pilot.app
        await keys(pilot, "down")
        assert "CHUNK LIST" in mode(app) and "msg_store[1] #83" in mode(app) and "READ-ONLY" in mode(app)
        await keys(pilot, "d")
        assert "read-only" in status(app) and not app.doc.is_dirty()
        app.header_line("verdict", "broker 2.0.18 loads this file")
        await settle(pilot)
        header = str(app.query_one("#summary").render())
        assert header.splitlines()[-1] == "broker 2.0.18 loads this file"
        app.header_line("verdict", None)
        await settle(pilot)
        assert "broker" not in str(app.query_one("#summary").render())


async def test_saving_a_clean_edit_does_not_ask(v6_copy: Path) -> None:
    """The pre-save check only stops a save that brings new errors: file damage it had is not new."""
    with DbFile(v6_copy) as db:
        before = [f for f in check_file(db, at=AT) if f.severity == "error"]
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.do_edit(0, "shutdown", "0")
        await keys(pilot, "ctrl+s")
        assert "saved" in status(app) and not isinstance(app.screen, PromptScreen)
    with DbFile(v6_copy) as db:
        assert [f for f in check_file(db, at=AT) if f.severity == "error"] == before


async def test_export_follows_a_topic_prefix_filter(tmp_path: Path) -> None:
    import json

    out = tmp_path / "b.jsonl"
    async with running(V6) as pilot:
        app = pilot.app
        app.apply_filter("type:msg_store corp/retained/b")
        await settle(pilot)
        app.do_export(str(out))
        await settle(pilot)
    topics = sorted(json.loads(line)["topic"] for line in out.read_text().splitlines())
    assert topics == ["corp/retained/big", "corp/retained/binary"]


def test_every_binding_comes_from_the_table_and_reaches_an_action_of_its_target() -> None:
    """Each pane and modal binds what the table gives its target, and every bound action exists there."""
    from inspector.tui import actions as table
    from inspector.tui.app import InspectorApp
    from inspector.tui.features.diffing import DiffScreen
    from inspector.tui.features.sessions import SessionsScreen
    from inspector.tui.features.tree import TopicTreeScreen
    from inspector.tui.screens.confirm import ConfirmQuit, ConfirmSave
    from inspector.tui.widgets.chunklist import ChunkList
    from inspector.tui.widgets.fieldtree import FieldTree
    from inspector.tui.widgets.hexview import HexView

    owners = {None: InspectorApp, table.LIST: ChunkList, table.FIELDS: FieldTree, table.HEX: HexView,
              table.PROMPT: PromptScreen, table.CONFIRM_QUIT: ConfirmQuit, table.CONFIRM_SAVE: ConfirmSave,
              table.HELP_SCREEN: HelpScreen, table.CHECK: CheckScreen, table.DIFF_LIST: DiffScreen,
              table.SESSIONS: SessionsScreen, table.TREE: TopicTreeScreen}
    assert {a.target for a in TABLE} <= set(owners)
    for target, owner in owners.items():
        assert table.bindings(target) == owner.BINDINGS, target
        assert owner.BINDINGS, target
        for b in owner.BINDINGS:
            assert callable(getattr(owner, "action_" + b.action.split("(")[0], None)), (target, b.action)
