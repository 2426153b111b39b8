"""Damaged input only ever raises the codec's own errors, after yielding everything before the damage."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codec import CodecError, DbFile, TruncatedError
from codec.writer import file_header

from support.paths import REAL, UNIT

SMALL = [
    UNIT / "persist_read/v6-client-message-props.test-db",
    UNIT / "persist_write/v4-full.test-db",
    UNIT / "persist_read/v3-client-message.test-db",
]


def decode_everything(path: Path) -> tuple[list, CodecError | None]:
    got: list = []
    try:
        with DbFile(path) as db:
            for c in db.stream():
                got.append(c.record)
            db.index  # noqa: B018 - the header scan must cope too
            for i in range(len(db)):
                db.chunk(i, spans=True)
    except CodecError as exc:
        return got, exc
    return got, None


@pytest.mark.parametrize("source", SMALL, ids=lambda p: p.name)
def test_truncation_at_every_offset(source: Path, tmp_path: Path) -> None:
    data = source.read_bytes()
    full, err = decode_everything(source)
    assert err is None
    target = tmp_path / "cut.db"
    for n in range(len(data)):
        target.write_bytes(data[:n])
        got, err = decode_everything(target)
        # whatever decoded is exactly a prefix of the intact file's chunks
        assert [r.values for r in got] == [r.values for r in full[: len(got)]]
        if err is not None:
            assert str(target) in str(err)


def test_truncation_of_a_real_file_by_stride(tmp_path: Path) -> None:
    data = (REAL / "1.5.6-a.db").read_bytes()
    full, _ = decode_everything(REAL / "1.5.6-a.db")
    target = tmp_path / "cut.db"
    for n in range(23, len(data), 97):
        target.write_bytes(data[:n])
        got, err = decode_everything(target)
        assert [r.values for r in got] == [r.values for r in full[: len(got)]]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(version=st.sampled_from([2, 3, 4, 5, 6]), body=st.binary(max_size=300))
def test_random_bytes_after_a_valid_header(version: int, body: bytes, tmp_path: Path) -> None:
    p = tmp_path / "random.db"
    p.write_bytes(file_header(version) + body)
    decode_everything(p)  # raises nothing but CodecError


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_byte_flips_in_a_real_file(data: st.DataObject, tmp_path: Path) -> None:
    raw = bytearray((UNIT / "persist_write/v4-full.test-db").read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(23, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    p = tmp_path / "flipped.db"
    p.write_bytes(bytes(raw))
    decode_everything(p)


@pytest.mark.parametrize("version,chunk", [
    (6, struct.pack(">II", 2, 0xFFFFFFF0) + bytes(40)),
    (5, struct.pack(">II", 0x77, 0xFFFFFFF0) + bytes(40)),
    (3, struct.pack(">HI", 2, 40) + bytes(8) + b"\x00\x00" + bytes(4) + b"\x00\x01t\x00\x00" + b"\xff\xff\xff\xf0"),
    (3, struct.pack(">HI", 6, 0) + b"\xff\xff" + bytes(10)),
])
def test_huge_lengths_fail_fast_without_allocating(version: int, chunk: bytes, tmp_path: Path) -> None:
    p = tmp_path / "huge.db"
    p.write_bytes(file_header(version) + chunk)
    tracemalloc.start()
    try:
        with DbFile(p) as db:
            list(db.stream())
            idx = db.index
            assert idx.error is None or isinstance(idx.error, TruncatedError)
    except TruncatedError as exc:
        assert exc.offset is not None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 8 << 20


def test_all_nul_file_is_not_a_database(tmp_path: Path) -> None:
    p = tmp_path / "nul.db"
    p.write_bytes(bytes(4096))
    with pytest.raises(CodecError, match="magic"):
        DbFile(p)


def test_damage_error_names_chunk_field_and_offset(tmp_path: Path) -> None:
    data = (REAL / "2.0.20-a.db").read_bytes()
    p = tmp_path / "cut.db"
    p.write_bytes(data[:1800])  # inside the v5props store (chunk 20)
    with DbFile(p) as db:
        chunks = []
        with pytest.raises(TruncatedError) as info:
            for c in db.stream():
                chunks.append(c)
    assert len(chunks) == 20
    msg = str(info.value)
    assert "msg_store[20].topic" in msg and "offset 1796" in msg and "chunk at offset 1736" in msg and str(p) in msg
