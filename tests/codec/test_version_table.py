"""The version table is where a db version is described: reader, index, engine and writer follow it.

The proof of "a new version is one table row plus its layouts": a copy of the codec whose
``codec/layouts.py`` gains a version 7 row (framed as 6) and the v6 layouts for 7, and nothing else,
reads a v7 file as it reads the same file as v6, and converts to and from it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codec.engine import Record, encode_chunk
from codec.layouts import VERSIONS, WRITABLE_VERSIONS, header_size, native_framing, version_row
from codec.ops.convert import WRITABLE

from support.paths import ROOT, V6

SCRIPT = r"""
import json, sys
from codec.reader import DbFile
from codec.views.jsonview import chunk_to_json
from codec.ops.convert import convert

out = {}
for path in sys.argv[1:3]:
    with DbFile(path) as db:
        rows = [chunk_to_json(c) for c in db.stream()]
        idx = db.index
        out[path] = {"version": db.version, "rows": rows, "offsets": list(idx.offsets), "end": idx.end,
                     "error": None if idx.error is None else str(idx.error)}
with DbFile(sys.argv[1]) as db:
    report = convert(db, sys.argv[3], 7)
with DbFile(sys.argv[3]) as db:
    out["converted"] = [chunk_to_json(c) for c in db.stream()]
print(json.dumps(out))
"""


def test_rows_describe_the_framing() -> None:
    assert list(VERSIONS) == [2, 3, 4, 5, 6]
    for v, row in VERSIONS.items():
        assert header_size(v) == row.header_size == (6 if v <= 4 else 8)
        assert native_framing(v) is (v >= 5)
        assert row.header.size == row.header_size
        head = encode_chunk(Record(4, {"store_id": 1}, v))[: row.header_size]
        assert row.header.unpack(head) == (4, 8)
    assert WRITABLE == WRITABLE_VERSIONS == (3, 4, 5, 6)
    assert version_row(0) is VERSIONS[2] and version_row(9) is VERSIONS[6]  # no version: a defined framing


def with_version_7(src: Path, dst: Path, header: str | None = None) -> None:
    """A copy of the codec package whose layout table knows a version 7 (laid out as 6; its chunk headers
    packed as ``header`` says, when given)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    path = dst / "layouts.py"
    text = path.read_text()
    row = re.search(r"    DbVersion\(6, [^\n]*\n", text)
    assert row, "no row for version 6"
    seven = row.group(0).replace("DbVersion(6, ", "DbVersion(7, ")
    if header is not None:
        seven = seven.replace('">II"', repr(header).replace("'", '"'))
        assert header in seven
    text = text.replace(row.group(0), row.group(0) + seven, 1)
    text, n = re.subn(r"Layout\((T\.\w+), \(([^)]*\b6),?\)", lambda m: f"Layout({m.group(1)}, ({m.group(2)}, 7)", text)
    assert n >= 6, n
    path.write_text(text)


def test_a_version_is_one_row_plus_its_layouts(tmp_path: Path) -> None:
    copy = tmp_path / "checkout"
    copy.mkdir()
    with_version_7(ROOT / "codec", copy / "codec")
    v7 = tmp_path / "v7.db"
    data = bytearray(V6.read_bytes())
    data[19:23] = (7).to_bytes(4, "big")
    v7.write_bytes(bytes(data))
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(V6), str(v7), str(tmp_path / "converted.db")],
                       cwd=copy, capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(copy)})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    six, seven = out[str(V6)], out[str(v7)]
    assert seven["version"] == 7 and seven["error"] is None
    assert seven["rows"] == six["rows"] and len(six["rows"]) > 50
    assert (seven["offsets"], seven["end"]) == (six["offsets"], six["end"])
    assert out["converted"] == six["rows"]


OWN_HEADER = r"""
import json, sys
from codec.broker.model import _emulate_file
from codec.ops.check import check_file
from codec.ops.convert import convert
from codec.ops.repair import repair
from codec.reader import DbFile
from codec.views.jsonview import chunk_to_json

AT = 1_700_000_000.0
v6, v7, repaired = sys.argv[1:4]
with DbFile(v6) as db:
    convert(db, v7, 7, now=AT)
out = {}
for path, version in ((v6, 6), (v7, 7)):
    with DbFile(path) as db:
        rows = [{k: v for k, v in chunk_to_json(c).items() if k != "offset"} for c in db.stream()]
        header = db.header_size
        findings = sorted((f.severity, f.rule) for f in check_file(db, at=AT))
    loaded = _emulate_file(path, version, (2, 0, 22), AT, "little")
    counts = sorted(loaded.counts.items())
    tables = {k: len(t.rows) for k, t in loaded.tables.items()}
    out[version] = {"rows": rows, "header": header, "findings": findings, "loaded": [counts, tables, loaded.read_to]}
    rep = repair(path, None, at=AT)
    out[version]["repair"] = [rep.kept, len(rep.dropped), rep.fixes]
print(json.dumps(out))
"""


def test_a_version_with_its_own_chunk_header(tmp_path: Path) -> None:
    """A version 7 whose chunk headers are packed as v2-v4's (u16 type) while its chunks are v6's: written by
    convert, then read, checked, salvaged and replayed as the broker reads it, each following the row."""
    copy = tmp_path / "checkout"
    copy.mkdir()
    with_version_7(ROOT / "codec", copy / "codec", header=">HI")
    r = subprocess.run([sys.executable, "-c", OWN_HEADER, str(V6), str(tmp_path / "v7.db"), str(tmp_path / "r.db")],
                       cwd=copy, capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(copy)})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    six, seven = out["6"], out["7"]
    assert (six["header"], seven["header"]) == (8, 6)
    assert seven["rows"] == six["rows"] and len(six["rows"]) > 50
    assert seven["findings"] == six["findings"]
    assert seven["loaded"] == six["loaded"] and sum(six["loaded"][1].values()) > 50
    assert seven["repair"] == six["repair"] and six["repair"][1] == 0


@pytest.mark.parametrize("version", [0, 1, 7, 0xFFFFFFFF])
def test_versions_outside_the_table_are_refused(tmp_path: Path, version: int) -> None:
    from codec.errors import UnsupportedVersionError
    from codec.reader import DbFile
    from codec.writer import file_header

    data = bytearray(V6.read_bytes())
    data[19:23] = version.to_bytes(4, "big")
    path = tmp_path / "x.db"
    path.write_bytes(bytes(data))
    with pytest.raises(UnsupportedVersionError, match="is not one of 2-6"):
        DbFile(path)
    with pytest.raises(UnsupportedVersionError, match="versions 2-6 exist"):
        file_header(version)
