"""Inputs the fuzzing campaign (bench/fuzz.py) found, kept as regression files: each goes through the
campaign's whole target (open, index, every decode, stream, columnar, check, stats, save) with only
CodecError allowed."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
from pathlib import Path

import pytest

from support.paths import ROOT

CRASHERS = sorted((Path(__file__).parent / "crashers").glob("*.db"))


def _fuzz():
    spec = importlib.util.spec_from_file_location("mosqdb_fuzz", ROOT / "bench" / "fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("path", CRASHERS, ids=lambda p: p.name)
def test_crasher(path, tmp_path):
    from codec import CodecError

    work = tmp_path / "in.db"
    shutil.copy(path, work)
    with contextlib.suppress(CodecError):
        _fuzz().drive(str(work), str(tmp_path / "out.db"))


def test_columnar_time_t_of_4_bytes_at_the_end(tmp_path):
    """v4 CLIENT chunks with 8- and 4-byte disconnect_t in one batch, the 4-byte one last in the file:
    the batch decoder read 8 bytes there (IndexError); found by the short run, seed 18."""
    from codec import DbFile, columnar

    with DbFile(CRASHERS[0]) as db:
        rows = sum(len(b) if hasattr(b, "__len__") else 1 for b in columnar.iter_columns(db, 6))
    assert rows >= 1
