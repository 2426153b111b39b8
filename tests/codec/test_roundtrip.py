"""Byte-exact rewrite of real and upstream files; decode(encode(x)) == x for every layout."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec import DbFile
from codec.engine import Record, decode_chunk, encode_chunk
from codec.layouts import ALL_LAYOUTS, FIXED_SIZES, Layout, header_size
from codec.properties import BY_ID, Property
from codec.writer import rewrite

from support.cli import run
from support.paths import REAL_FILES, UNIT, unit_expected

ACCEPTED_UNIT = sorted(
    UNIT / k for k, v in unit_expected().items() if v["accepted_by_mosquitto_reader"]
)


@pytest.mark.parametrize("path", REAL_FILES + ACCEPTED_UNIT, ids=lambda p: p.name)
def test_rewrite_is_byte_identical(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    with DbFile(path) as db:
        result = rewrite(db, out)
    assert out.read_bytes() == path.read_bytes()
    assert result.size == path.stat().st_size


@pytest.mark.parametrize("path", REAL_FILES[:1] + REAL_FILES[-1:], ids=lambda p: p.name)
def test_rewrite_command(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    proc = run("rewrite", str(path), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == path.read_bytes()


# ---------------------------------------------------------------- hypothesis: every layout

_INT_MAX = {"u8": 0xFF, "u16": 0xFFFF, "u32": 0xFFFF_FFFF, "u64h": (1 << 64) - 1}
_text = st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape"))


def _prop_value(kind: str) -> st.SearchStrategy:
    return {
        "byte": st.integers(0, 0xFF),
        "u16": st.integers(0, 0xFFFF),
        "u32": st.integers(0, 0xFFFF_FFFF),
        "vbi": st.integers(0, 268_435_455),
        "str": _text,
        "bin": st.binary(max_size=30),
        "pair": st.tuples(_text, _text),
    }[kind]


_property = st.sampled_from(sorted(BY_ID)).flatmap(
    lambda pid: _prop_value(BY_ID[pid].kind).map(lambda v, pid=pid: Property(pid, BY_ID[pid].name, v))
)


@st.composite
def records(draw: st.DrawFn, layout: Layout, version: int) -> Record:
    values: dict = {}
    time_t_size = 8
    for f in layout.fields:
        k = f.kind
        if k in _INT_MAX:
            values[f.name] = f.must if f.must is not None else draw(st.integers(0, _INT_MAX[k]))
        elif k == "i64h":
            values[f.name] = draw(st.integers(-(1 << 63), (1 << 63) - 1))
        elif k == "time_t":
            time_t_size = draw(st.sampled_from([4, 8]))
            bits = time_t_size * 8 - 1
            values[f.name] = draw(st.integers(-(1 << bits), (1 << bits) - 1))
        elif k == "nibbles":
            for n in f.names:
                values[n] = draw(st.integers(0, 15))
        elif k == "str":
            v = draw(_text)
            values[f.name] = (v or None) if f.nullable else v
        elif k == "bytes":
            values[f.name] = draw(st.binary(max_size=64))
        elif k == "props":
            values[f.name] = draw(st.none() | st.lists(_property, max_size=5))
        else:
            assert k in ("pad", "len16", "len32"), k
    return Record(int(layout.type), values, version, abi=layout.abi, time_t_size=time_t_size)


CASES = [(layout, v) for layout in ALL_LAYOUTS for v in layout.versions]


@pytest.mark.parametrize("layout,version", CASES,
                         ids=[f"v{v}-{lay.type.label}-{lay.abi}" for lay, v in CASES])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_decode_encode_roundtrip(layout: Layout, version: int, data: st.DataObject) -> None:
    rec = data.draw(records(layout, version))
    raw = encode_chunk(rec)
    hsize = header_size(version)
    length = int.from_bytes(raw[hsize - 4:hsize], "big")
    assert length == len(raw) - hsize
    back, end, _ = decode_chunk(version, rec.type, raw, hsize, len(raw), length)
    assert end == len(raw)
    assert back.values == rec.values
    assert back.abi == layout.abi
    assert encode_chunk(back) == raw


def test_every_layout_field_kind_is_known() -> None:
    for layout in ALL_LAYOUTS:
        for f in layout.fields:
            assert f.kind in FIXED_SIZES or f.kind in ("pad", "str", "bytes", "time_t", "props"), f
            if f.kind in ("len16", "len32"):
                assert any(g.name == f.target for g in layout.fields), f


@pytest.mark.parametrize("path", REAL_FILES + ACCEPTED_UNIT, ids=lambda p: p.name)
def test_generated_decoders_agree_with_the_interpreter(path: Path) -> None:
    """The fast path (no spans) and the reference interpreter (spans) give identical records."""
    with DbFile(path) as db:
        for i in range(len(db)):
            fast, ref = db.chunk(i), db.chunk(i, spans=True)
            assert fast.record == ref.record and fast.size == ref.size, fast.path


@pytest.mark.parametrize("layout,version", CASES[::3], ids=[f"v{v}-{lay.type.label}-{lay.abi}" for lay, v in CASES[::3]])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_generated_decoders_agree_on_random_records(layout: Layout, version: int, data: st.DataObject) -> None:
    rec = data.draw(records(layout, version))
    raw = encode_chunk(rec)
    hsize = header_size(version)
    length = len(raw) - hsize
    fast = decode_chunk(version, rec.type, raw, hsize, len(raw), length)[0]
    ref = decode_chunk(version, rec.type, raw, hsize, len(raw), length, want_spans=True)[0]
    assert fast == ref


@pytest.mark.parametrize("layout,version", CASES[1::3], ids=[f"v{v}-{lay.type.label}-{lay.abi}" for lay, v in CASES[1::3]])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_big_endian_host_files_round_trip(layout: Layout, version: int, data: st.DataObject) -> None:
    """Files from big-endian brokers: 64-bit fields in BE, everything else unchanged."""
    rec = data.draw(records(layout, version))
    raw = encode_chunk(rec, endian="big")
    hsize = header_size(version)
    length = len(raw) - hsize
    for spans in (False, True):
        back = decode_chunk(version, rec.type, raw, hsize, len(raw), length, endian="big", want_spans=spans)[0]
        assert back.values == rec.values
    if any(f.kind in ("u64h", "i64h", "time_t") for f in layout.fields) and raw != encode_chunk(rec):
        little = decode_chunk(version, rec.type, raw, hsize, len(raw), length)[0]
        assert little.values != rec.values


@pytest.mark.parametrize("layout,version", CASES, ids=[f"v{v}-{lay.type.label}-{lay.abi}" for lay, v in CASES])
def test_a_blank_chunk_encodes_and_decodes_back(layout: Layout, version: int) -> None:
    """``Layout.blank()`` (a new chunk in the TUI) gives values every table encodes, and they decode back."""
    values = layout.blank()
    assert set(values) == set(layout.value_names)
    raw = encode_chunk(Record(int(layout.type), values, version, abi=layout.abi))
    hsize = header_size(version)
    back, end, _ = decode_chunk(version, int(layout.type), raw, hsize, len(raw), len(raw) - hsize)
    assert end == len(raw)
    assert back.values == values
