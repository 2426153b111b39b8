"""Damaged files, read-only files, empty files, quitting with unsaved edits, the check panel."""

from __future__ import annotations

from pathlib import Path

from codec import DbFile
from inspector.tui.screens.check import CheckScreen
from inspector.tui.screens.confirm import ConfirmQuit
from inspector.tui.widgets.chunklist import DAMAGE_ROW

from support.clock import CHECK_AT
from support.paths import V6
from support.tui import keys, running, settle, status


async def test_damaged_file_shows_chunks_up_to_damage_then_raw_bytes(damaged_copy: Path) -> None:
    size = damaged_copy.stat().st_size
    with DbFile(damaged_copy) as db:
        idx = db.index
        err, end, n = idx.error, idx.end, len(idx)
    assert err is not None and n == 50
    async with running(damaged_copy) as pilot:
        app = pilot.app
        assert app.chunks.total() == 51  # 50 intact chunks + the damage row
        assert f"damaged from offset {end} (chunk 50); {size - end} bytes unread" in str(app.query_one("#summary").render())
        await keys(pilot, "end")
        assert app.item == DAMAGE_ROW
        label = str(app.fields.root.label)
        assert label.startswith(f"⚠ damage at offset {end}")
        lines = [str(c.label) for c in app.fields.root.children]
        assert lines[0] == str(err).replace(f"{damaged_copy}: ", "") and "[50]" in lines[0]
        src = app.hex.source
        assert (src.base, src.size) == (end, size - end)
        assert src.read(0, size - end) == damaged_copy.read_bytes()[end:]
        await keys(pilot, "up")
        assert app.item == 49 and app.doc.view(49).error is None
        # saving a damaged file is refused with the codec's message, nothing written
        app.do_edit(0, "shutdown", "0")
        await keys(pilot, "ctrl+s")
        assert "cannot save a damaged file" in status(app)


async def test_read_only_refuses_edits(v6_copy: Path) -> None:
    async with running(v6_copy, read_only=True) as pilot:
        app = pilot.app
        assert "READ-ONLY" in str(app.query_one("#summary").render())
        assert "read-only" in status(app)
        await keys(pilot, "down", "d")
        assert not app.doc.overlay and "read-only" in status(app)
        app.hex.focus()
        await keys(pilot, "f", "f")
        assert not app.doc.overlay
        await keys(pilot, "ctrl+s")
    assert v6_copy.read_bytes() == V6.read_bytes()


async def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    async with running(empty, size=(80, 24)) as pilot:
        app = pilot.app
        assert "empty file" in str(app.query_one("#summary").render())
        assert app.chunks.total() == 0
        await keys(pilot, "down", "g", "escape", "q")
    assert app.return_code == 0


async def test_quit_with_unsaved_edits_asks(v6_copy: Path) -> None:
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.do_edit(0, "shutdown", "0")
        await keys(pilot, "q")
        assert isinstance(app.screen, ConfirmQuit)
        await keys(pilot, "escape")
        assert not isinstance(app.screen, ConfirmQuit) and app.is_running
        await keys(pilot, "q", "d")  # discard
        assert not app.is_running
    assert v6_copy.read_bytes() == V6.read_bytes()

    async with running(v6_copy) as pilot:
        app = pilot.app
        app.do_edit(0, "shutdown", "0")
        await keys(pilot, "q", "s")  # save, then quit
        assert not app.is_running
    with DbFile(v6_copy) as db:
        assert db.chunk(0).record["shutdown"] == 0


async def test_quit_without_edits_does_not_ask() -> None:
    async with running(V6, size=(80, 24)) as pilot:
        app = pilot.app
        await keys(pilot, "q")
        assert not app.is_running


async def test_check_panel_jumps_to_finding(v6_copy: Path) -> None:
    # make a dangling reference: delete a stored message that a retain points at, save, reopen
    async with running(v6_copy, check_at=CHECK_AT) as pilot:
        app = pilot.app
        app.apply_filter("store:63")
        await settle(pilot)
        store = next(int(i) for i in app.chunks.rows if app.doc.record(int(i)).kind == "msg_store")
        retain = next(int(i) for i in app.chunks.rows if app.doc.record(int(i)).kind == "retain")
        app.jump(store)
        await keys(pilot, "d")
        assert "still referenced by 1" in status(app)
        await keys(pilot, "ctrl+s")  # the save lists the new error (a dangling reference) and asks
        await keys(pilot, "s", "escape")  # save anyway
        await keys(pilot, "c")
        assert isinstance(app.screen, CheckScreen)
        findings = app.screen.findings
        dangling = [k for k, f in enumerate(findings) if f.chunk_type == "retain" and f.severity == "error"]
        assert dangling, [f.rule for f in findings]
        f = findings[dangling[0]]
        assert f.chunk_index == retain - 1  # one chunk before it was deleted
        option_list = app.screen.query_one("#check-list")
        option_list.highlighted = dangling[0]
        await keys(pilot, "enter")
        assert not isinstance(app.screen, CheckScreen)
        assert app.item == retain - 1 and app.doc.record(app.item)["store_id"] == 63


async def test_export_selection_and_palette_actions(tmp_path: Path) -> None:
    import json

    from inspector.tui.app import ACTIONS

    out = tmp_path / "retained.jsonl"
    async with running(V6) as pilot:
        app = pilot.app
        titles = {c.title for c in app.get_system_commands(app.screen)}
        # every action is in the palette, its title followed by its key: "Delete chunk  (d)"
        assert all(any(t.startswith(title + "  (") for t in titles) for title, _a, _h in ACTIONS)
        assert "Delete chunk  (d)" in titles and "Save  (ctrl+s)" in titles
        app.apply_filter("type:retain")
        await settle(pilot)
        app.do_export(str(out))
        await settle(pilot)
        assert "exported to" in status(app) and "retain 10" in status(app)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 10 and {r["type"] for r in rows} == {"retain"}
    with DbFile(V6) as db:
        want = sorted(c.record["store_id"] for c in db.stream() if c.kind == "retain")
    assert sorted(r["store_id"] for r in rows) == want


async def test_unknown_chunk_type_is_shown_raw(tmp_path: Path) -> None:
    import struct

    path = tmp_path / "unknown.db"
    path.write_bytes(V6.read_bytes() + struct.pack(">II", 99, 4) + b"\xde\xad\xbe\xef")
    async with running(path) as pilot:
        app = pilot.app
        assert app.chunks.total() == 91
        await keys(pilot, "end")
        v = app.doc.view(90)
        assert v.record.kind == "unknown" and v.record["raw"] == b"\xde\xad\xbe\xef"
        assert str(app.fields.root.label).startswith("unknown[90]")
        assert app.hex.source.span_at(8)[3] == "unknown"
        assert app.hex.source.read(8, 4) == b"\xde\xad\xbe\xef"
        row = app.chunks.cursor - app.chunks.top
        assert "?99" in "".join(seg.text for seg in app.chunks.render_line(row))


def test_rows_are_usable_while_the_index_is_built(tmp_path: Path) -> None:
    """Between two scan steps the list already counts, decodes and shows the chunks found so far."""
    import struct

    from inspector.tui.model.document import Document
    from inspector.tui.widgets.chunklist import ChunkList

    path = tmp_path / "many.db"
    extra = 300_000
    path.write_bytes(V6.read_bytes() + (struct.pack(">II", 4, 8) + struct.pack("<Q", 63)) * extra)
    doc = Document(str(path))
    steps = doc.db.scan_steps(50_000)
    first = next(steps)
    assert 50_000 <= first < 90 + extra and not doc.complete()
    chunks = ChunkList(doc)
    assert chunks.total() == doc.count() == first - 1  # the newest chunk may still be settling
    assert doc.view(0).record.kind == "cfg" and doc.view(chunks.total() - 1).record.kind == "retain"
    for _ in steps:
        pass
    assert doc.complete() and doc.count() == 90 + extra and chunks.total() == 90 + extra
    assert doc.view(90 + extra - 1).record["store_id"] == 63
    doc.close()
