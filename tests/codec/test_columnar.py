"""The vectorised decoder gives exactly the values of the record decoder, and damage falls back to it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codec import ChunkType, CodecError, DbFile
from codec.columnar import iter_columns

from support.paths import REAL_FILES, UNIT

FILES = REAL_FILES + [UNIT / "persist_write/v4-full.test-db", UNIT / "persist_read/v3-client-message.test-db"]


def as_bytes(v: object) -> bytes:
    if v is None:
        return b""
    return v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_columns_equal_records(path: Path) -> None:
    seen = 0
    with DbFile(path) as db:
        for t in ChunkType:
            for cols in iter_columns(db, t, batch=7):
                assert len(cols) <= 7
                for row, ci in enumerate(cols.index):
                    rec = db.chunk(int(ci)).record
                    assert rec.type == t
                    for name, arr in cols.ints.items():
                        assert rec.values[name] == int(arr[row]), (ci, name)
                    for name in cols.spans:
                        raw = cols.value(name, row)
                        if name == "properties":
                            from codec.properties import encode_properties

                            assert raw == encode_properties(rec.values[name])
                        else:
                            assert raw == as_bytes(rec.values[name]), (ci, name)
                    seen += 1
                if "payload" in cols.spans:
                    data, offsets = cols.blob("payload")
                    assert offsets[-1] == len(data)
                    for row in range(len(cols)):
                        assert data[offsets[row]:offsets[row + 1]].tobytes() == cols.value("payload", row)
        assert seen == len(db)


def test_damaged_batch_raises_the_precise_error(tmp_path: Path) -> None:
    src = (UNIT / "persist_write/v4-full.test-db").read_bytes()
    with DbFile(UNIT / "persist_write/v4-full.test-db") as db:
        store = next(i for i in range(len(db)) if db.index.types[i] == ChunkType.MSG_STORE)
        off = db.index.offsets[store]
    bad = bytearray(src)
    bad[off + 6 + 8: off + 6 + 10] = b"\xff\xf0"  # source id length far past the chunk
    p = tmp_path / "bad.db"
    p.write_bytes(bytes(bad))
    with DbFile(p) as db, pytest.raises(CodecError):
        db.index  # noqa: B018
        if db.index.error:
            raise db.index.error
        for _ in iter_columns(db, ChunkType.MSG_STORE):
            pass


def test_blob_offsets_are_arrow_style() -> None:
    with DbFile(REAL_FILES[-1]) as db:
        (cols,) = list(iter_columns(db, ChunkType.MSG_STORE))
        data, offsets = cols.blob("topic")
        assert offsets.dtype == np.int64 and len(offsets) == len(cols) + 1
        topics = [data[offsets[i]:offsets[i + 1]].tobytes().decode() for i in range(len(cols))]
        assert "corp/retained/big" in topics


@pytest.mark.parametrize("block", [64, 1 << 22])
@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_gather_u64_reads_every_store_id_in_place(path: Path, block: int) -> None:
    """Store ids read at their fixed place (first body field) equal the decoded ones, across read blocks."""
    from codec.columnar import gather_u64
    from codec.layouts import header_size

    with DbFile(path) as db:
        stores = [c for c in db.stream() if c.kind == "msg_store"]
        pos = np.array([c.offset + header_size(db.version) for c in stores], dtype=np.int64)
        got = gather_u64(db.fd, pos, db.endian, block=block)
    assert got.tolist() == [c.record["store_id"] for c in stores]
