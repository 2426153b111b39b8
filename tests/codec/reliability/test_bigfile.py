"""Files past 4 GiB: a sparse 4.56 GB v6 file (17 payloads of 256 MB as holes) whose last chunks all lie
at offsets >= 2**32. info, random access to (and dump of) the last chunks, error offsets, export of one
kind and the TUI's goto to the last chunk run here in seconds; the full passes (check, byte-exact
rewrite: each reads 4.5 GB, the rewrite writes it) run with MOSQDB_BIGFILE_FULL=1."""

from __future__ import annotations

import json
import os

import pytest

from codec import DbFile
from codec.views.jsonview import chunk_to_json
from codec.views.textview import format_text
from inspector.cli import main

from support.bigfile import TAIL, sparse_file

FULL = os.environ.get("MOSQDB_BIGFILE_FULL") == "1"


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    yield from sparse_file(tmp_path_factory.mktemp("big"), free=12 << 30 if FULL else 1 << 30)


def test_index_and_info(big, capsys):
    with DbFile(big["path"]) as db:
        idx = db.index
        assert len(idx) == big["chunks"] and idx.error is None and idx.end == big["size"]
        assert idx.offsets[-1] >= 1 << 32 and idx.offsets.typecode == "q"
        offsets, _types, ends = idx.arrays()
        assert int(offsets[-1]) == idx.offsets[-1] and int(ends[-1]) == big["size"]
        assert idx.find(idx.offsets[-1] + 3) == len(idx) - 1
    assert main(["info", "--json", big["path"]]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["size"] == big["size"] and data["total_chunks"] == big["chunks"] and data["damaged"] is None


def test_last_chunks(big, capsys):
    with DbFile(big["path"]) as db:
        n = len(db)
        last = [db.chunk(i) for i in range(n - 4, n)]
        assert [c.kind for c in last] == ["sub", "sub", "sub", "client_msg"]
        assert all(c.offset >= 1 << 32 for c in last)
        rows = [chunk_to_json(c) for c in last]
        assert rows[-1]["offset"] == last[-1].offset and rows[-1]["client_id"] == "far-client"
        assert db.index.find(last[-1].offset + 9) == n - 1  # DbFile.chunk_at is gone: the lookup it made
        stream = list(db.stream(types=[5, 6], start=big["tail_start"], first_index=big["tail_first"]))
        assert {c.kind for c in stream} == {"sub", "client"} and all(c.offset >= 1 << 32 for c in stream)
        assert stream[0].index == len(db) - TAIL - 2 and stream[-1].index == len(db) - 2
        text = "\n".join(format_text(c) for c in last)
        assert f"Offset: {last[-1].offset}" in text


def test_error_offsets_past_4gib(big, tmp_path):
    """Damage in a chunk past 4 GiB is reported at its real offset (no 32-bit wrap)."""
    cut = str(tmp_path / "cut.db")
    with open(big["path"], "rb") as src, open(cut, "wb") as dst:
        dst.truncate(big["size"] - 3)  # the last chunk (client_msg) cut short; the rest stays a hole
        src.seek(big["tail_start"])
        dst.seek(big["tail_start"])
        dst.write(src.read(big["size"] - 3 - big["tail_start"]))
    with DbFile(big["path"]) as db:
        heads = [(0, db.header)] + [(db.index.offsets[i], os.pread(db.fd, 64, db.index.offsets[i])) for i in range(big["tail_first"])]
    with open(cut, "r+b") as dst:
        for off, head in heads:
            dst.seek(off)
            dst.write(head)
    with DbFile(cut) as db:
        idx = db.index
        assert idx.error is not None and idx.error.offset >= 1 << 32
        assert f"offset {idx.error.offset}" in str(idx.error)


def test_export_one_kind(big, tmp_path, capsys):
    import pyarrow.parquet as pq

    out = str(tmp_path / "client.parquet")
    assert main(["export", "--to", "parquet", "--kind", "client", "-o", out, big["path"]]) == 0
    table = pq.read_table(out)
    assert table.num_rows == 1
    offset_col = next(c for c in table.column_names if "offset" in c)
    assert table.column(offset_col)[0].as_py() >= 1 << 32


async def _goto_last(path: str) -> tuple[int, int, str]:
    from inspector.tui.app import InspectorApp
    from inspector.tui.model.document import Document

    app = InspectorApp(Document(path, read_only=True), check_at=1_795_305_600, detail_delay=0.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        idx = app.doc.index()
        target = idx.offsets[len(idx) - 1]
        await pilot.press("g")
        await pilot.pause()
        await pilot.press(*list(f"0x{target:x}"), "enter")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        hex_line = "".join(seg.text for seg in app.hex.render_line(0))
        gutter = len(f"{target:x}") + 2
        await pilot.click("HexView", offset=(gutter + 3 * 5 + 2, 0))  # the gap after byte 5 of the first row
        await pilot.pause()
        hex_line += f" cursor={app.hex.cursor}"
        return app.chunks.cursor, len(idx), str(app.query_one("#status").render()), hex_line, target


def test_tui_goto_last_chunk(big):
    import asyncio

    cursor, n, status, hex_line, target = asyncio.run(_goto_last(big["path"]))
    assert cursor == n - 1, status
    assert f"chunk {n - 1}" in status
    assert hex_line.startswith(f"{target:x}  "), hex_line  # the whole offset, aligned (9 hex digits)
    assert hex_line.endswith(" cursor=5"), hex_line  # a click lands on the byte under it


@pytest.mark.skipif(not FULL, reason="reads (and for rewrite writes) 4.5 GB: set MOSQDB_BIGFILE_FULL=1")
def test_check_and_byte_exact_rewrite(big, tmp_path, capsys):
    assert main(["check", big["path"]]) == 0
    out = str(tmp_path / "rewritten.db")
    assert main(["rewrite", big["path"], "-o", out]) == 0
    with open(big["path"], "rb") as a, open(out, "rb") as b:
        while True:
            x, y = a.read(1 << 24), b.read(1 << 24)
            assert x == y
            if not x:
                break
