"""Where a field lies, asked of the layout (Layout.fixed_fields / offset_of / after_last_variable), agrees
with the interpreter's byte spans on every chunk of every file; ColumnReader gathers the decoded values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codec import ChunkType, CodecError, DbFile
from codec.columnar import ColumnReader
from codec.layouts import ALL_LAYOUTS

from support.paths import REAL_FILES, UNIT

FILES = REAL_FILES + [UNIT / "persist_write/v4-full.test-db", UNIT / "persist_read/v3-client-message.test-db"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_layout_offsets_match_spans(path: Path) -> None:
    checked = 0
    with DbFile(path) as db:
        for chunk in db.stream(spans=True):
            layout = chunk.record.layout()
            if layout is None:
                continue
            spans = {s.name: s for s in chunk.spans or ()}
            for f, pos in layout.fixed_fields:
                if f.kind == "pad":
                    continue  # padding names repeat
                for name in f.values or (f.name,):
                    assert pos == spans[name].offset == layout.offset_of(name), (chunk.path, name)
                    checked += 1
            first_variable = next((s.offset for s in chunk.spans or () if s.kind in ("str", "bytes", "props",
                                                                                    "time_t")), None)
            assert layout.fixed_prefix_size == (first_variable if first_variable is not None else chunk.size
                                                - chunk.header_size), chunk.path
            last, after = layout.after_last_variable
            end = spans[last].offset + spans[last].size + after if last is not None else after
            if not any(f.kind == "time_t" for f in layout.fields):
                assert end == chunk.size - chunk.header_size, chunk.path
    assert checked


def test_offset_of_is_none_past_a_string() -> None:
    for layout in ALL_LAYOUTS:
        placed = {n for f, _pos in layout.fixed_fields for n in (f.name, *f.values)}
        for f in layout.fields:
            for name in f.values:
                if name not in placed:
                    assert layout.offset_of(name) is None, (layout.type, name)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_column_reader_gathers_decoded_values(path: Path) -> None:
    with DbFile(path) as db:
        reader = ColumnReader(db)
        for t, names in ((ChunkType.MSG_STORE, ("store_id", "topic")), (ChunkType.SUB, ("client_id", "topic")),
                         (ChunkType.RETAIN, ("store_id",))):
            which = np.flatnonzero(reader.types == int(t))
            if not len(which):
                continue
            cols = reader.gather(which, int(t), names)
            assert cols.kind == t.label and list(cols.index) == list(which)
            for row, i in enumerate(which.tolist()):
                rec = db.chunk(i).record
                for name in names:
                    if name in cols.spans:
                        assert cols.text(name, row) == rec[name]
                    else:
                        assert int(cols.ints[name][row]) == rec[name]
            texts = [n for n in names if n in cols.spans]
            for name in texts:
                assert cols.texts(name) == [db.chunk(i).record[name] for i in which.tolist()]
        reader.release()


def test_column_reader_refuses_values_behind_a_tail() -> None:
    path = next(p for p in REAL_FILES if p.name.startswith("2."))
    with DbFile(path) as db:
        reader = ColumnReader(db)
        which = np.flatnonzero(reader.types == int(ChunkType.MSG_STORE))[:1]
        with pytest.raises(CodecError, match="cannot gather properties"):
            reader.gather(which, int(ChunkType.MSG_STORE), ("properties",))
