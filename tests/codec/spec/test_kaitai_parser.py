"""The generated Kaitai Struct spec, compiled by the real compiler to Python, reads every fixture as
`mosqdb dump --json` does: the same chunks (type, offset, length) and values, and stops where mosqdb
stops on a damaged file."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from codec.reader import DbFile
from codec.spec import render_kaitai

from support.benchfile import big_db
from support.cli import MOSQDB, env, run_in_process
from support.kaitai import read
from support.paths import INCOMING_FILES, REAL, ROOT, UNIT_FILES

FIXTURES = sorted(REAL.glob("*.db")) + INCOMING_FILES + UNIT_FILES
BIG_CHUNKS = 10_000
EXTRA = ("expires_at", "expired")  # what dump adds beside the file's values (the expiry as of now)


@pytest.fixture(scope="module")
def parser(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from support.kaitai import compiled_parser

    return compiled_parser(render_kaitai(), tmp_path_factory.mktemp("kaitai"))


def dump_rows(lines: list[str]) -> list[dict[str, Any]]:
    rows = []
    for line in lines:
        row = json.loads(line)
        for k in EXTRA:
            row.pop(k, None)
        row.pop("index")
        rows.append(row)
    return rows


def mosqdb_view(path: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """(dump --json rows, where mosqdb stops reading, whether it stopped on damage)."""
    r = run_in_process("dump", "--json", path)
    rows = dump_rows(r.stdout.splitlines())
    if r.returncode != 0:  # the error line names the chunk it stopped at (none: the header)
        where = re.search(r"\(chunk at offset (\d+)\)", r.stderr)
        return rows, int(where.group(1)) if where else 0, True
    with DbFile(path) as db:
        return rows, (0 if db.empty else db.index.end), False


def same(kaitai: dict[str, Any], mosqdb: dict[str, Any]) -> None:
    """Every value the dump shows is the one the Kaitai parser read; those it lacks are None in the dump."""
    for key, value in mosqdb.items():
        if key in kaitai:
            assert kaitai[key] == value, f"{mosqdb['type']} at {mosqdb['offset']}: {key}"
        else:
            assert value is None, f"{mosqdb['type']} at {mosqdb['offset']}: {key} not read by the spec"
    assert set(kaitai) - set(mosqdb) <= {"mid"}  # the legacy mid: read and dropped, dump does not show it


def compare(parser: Any, path: Path) -> None:
    rows, stop, damaged = mosqdb_view(path)
    got = read(parser, path.read_bytes())
    assert len(got["chunks"]) == len(rows), path.name
    for k, m in zip(got["chunks"], rows):
        same(k, m)
    assert got["stop"] == stop, f"{path.name}: Kaitai stops at {got['stop']}, mosqdb at {stop}"
    assert (got["error"] is not None) == damaged, f"{path.name}: {got['error']!r}"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture(parser: Any, path: Path) -> None:
    compare(parser, path)


def test_damaged_real_files_stop_where_mosqdb_stops(parser: Any, tmp_path: Path) -> None:
    """Every real file cut inside each of a dozen chunks (a header cut short, a body cut short)."""
    for src in sorted(REAL.glob("*.db")) + INCOMING_FILES:
        data = src.read_bytes()
        with DbFile(src) as db:
            offsets = list(db.index.offsets)
        for i in sorted({len(offsets) * k // 12 for k in range(1, 12)}):
            for cut in (offsets[i] + 3, offsets[i] + 11):
                path = tmp_path / f"{src.stem}-{cut}.db"
                path.write_bytes(data[:cut])
                compare(parser, path)
                path.unlink()


def test_damaged_unit_files_fail_in_both(parser: Any) -> None:
    """The damaged Mosquitto test files are refused by both at the same place (the fixtures above compare them)."""
    bad = [p for p in UNIT_FILES if "corrupt" in p.name or "truncated" in p.name or "bad-dbid" in p.name
           or "unsupported" in p.name]
    assert len(bad) >= 5
    for path in bad:
        got = read(parser, path.read_bytes())
        assert got["error"] is not None, path.name


def test_big_file_first_chunks(parser: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    path = big_db(tmp_path_factory)
    with DbFile(path) as db:
        for _n in db.scan_steps(BIG_CHUNKS):
            if len(db.partial_index()) > BIG_CHUNKS:
                break
        idx = db.partial_index()
        assert idx is not None and len(idx) > BIG_CHUNKS, "the big file has fewer than 10,000 chunks"
        end = idx.offsets[BIG_CHUNKS]
    with open(path, "rb") as f:
        head = f.read(end)
    proc = subprocess.Popen([*MOSQDB, "dump", "--json", str(path)], cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(BIG_CHUNKS)]
    finally:
        proc.kill()
        proc.wait()
    rows = dump_rows(lines)
    got = read(parser, head)
    assert got["error"] is None and len(got["chunks"]) == BIG_CHUNKS
    assert got["stop"] == end
    for k, m in zip(got["chunks"], rows):
        same(k, m)
