"""TUI: `g` to the last chunk, `a` (add a copy after it), ctrl+s. The writer raised IndexError and the app
died with the edits lost (exit status 0); now the file is saved with the copy appended."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from codec import DbFile

from support.paths import REAL

SOURCE = REAL / "2.0.20-a.db"
pytestmark = pytest.mark.skipif(not SOURCE.exists(), reason="fixtures missing")


async def _append_after_last(path: str) -> str:
    from inspector.tui.app import InspectorApp
    from inspector.tui.model.document import Document

    app = InspectorApp(Document(path), check_at=1_795_305_600, detail_delay=0.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        n = len(app.doc.index())
        await pilot.press("g")
        await pilot.pause()
        await pilot.press(*list(str(n - 1)), "enter")
        await pilot.pause()
        await pilot.press("a")
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        return str(app.query_one("#status").render())


def test_append_after_the_last_chunk_and_save(tmp_path):
    path = tmp_path / "v6.db"
    shutil.copy(SOURCE, path)
    with DbFile(path) as db:
        n = len(db)
        last = db.raw(n - 1)
    status = asyncio.run(_append_after_last(str(path)))
    assert "saved" in status, status
    with DbFile(path) as db:
        assert len(db) == n + 1
        assert db.raw(n) == last and db.raw(n - 1) == last
    assert path.read_bytes() == SOURCE.read_bytes() + last
