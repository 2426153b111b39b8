"""Every field's byte span in the real files holds exactly the encoding of its value."""

from __future__ import annotations

from pathlib import Path

import pytest

from codec import DbFile
from codec.layouts import FIXED_SIZES
from codec.properties import encode_properties

from support.paths import REAL_FILES, UNIT


def expected_bytes(rec, span, layout_field, endian: str = "little") -> bytes:  # type: ignore[no-untyped-def]
    k = span.kind
    v = rec.values.get(span.name)
    if k in ("len16", "len32"):
        target = rec.values.get(layout_field.target)
        raw = target if isinstance(target, bytes) else (target or "").encode("utf-8", "surrogateescape")
        return len(raw).to_bytes(FIXED_SIZES[k], "big")
    if k == "u8":
        return bytes([v])
    if k == "nibbles":
        hi, lo = layout_field.names
        return bytes([(rec[hi] << 4) | rec[lo]])
    if k in ("u16", "u32"):
        return v.to_bytes(FIXED_SIZES[k], "big")
    if k in ("u64h", "i64h"):
        return v.to_bytes(8, endian, signed=k == "i64h")
    if k == "time_t":
        return v.to_bytes(span.size, endian, signed=True)
    if k == "str":
        return (v or "").encode("utf-8", "surrogateescape")
    if k == "bytes":
        return v
    if k == "props":
        return encode_properties(v)
    if k == "pad":
        return rec.padding or bytes(span.size)
    raise AssertionError(k)


@pytest.mark.parametrize("path", REAL_FILES + [UNIT / "persist_write/v4-full.test-db"], ids=lambda p: p.name)
def test_field_spans_hold_their_values(path: Path) -> None:
    data = path.read_bytes()
    with DbFile(path) as db:
        for i in range(len(db)):
            c = db.chunk(i, spans=True)
            layout = c.record.layout()
            fields = {f.name: f for f in layout.fields}
            for f in layout.fields:
                for n in f.names:
                    fields[n] = f
            covered = 0
            for span in c.spans:
                got = data[c.body_offset + span.offset: c.body_offset + span.offset + span.size]
                assert got == expected_bytes(c.record, span, fields[span.name]), (c.path, span)
                if span.kind != "nibbles" or span.name == fields[span.name].names[0]:
                    covered += span.size
            assert covered == c.size - c.header_size, c.path  # spans tile the whole body
