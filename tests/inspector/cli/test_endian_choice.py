"""The byte order: an explicit --endian is obeyed, and convert writes nothing our own readers refuse.

A v2 file whose little-endian ids are large (a multiple of 2**56: their bytes read big-endian are
small numbers) looks big-endian to the byte-order guess once it is converted to v6.
"""

from __future__ import annotations

from pathlib import Path

from codec.engine import encode_chunk
from codec.reader import DbFile
from codec.writer import file_header

from support.cli import run_in_process
from support.paths import SHARED

V3 = SHARED / "fixtures" / "real" / "1.4.15-a.db"
V6 = SHARED / "fixtures" / "real" / "2.0.20-a.db"


def v2_with_large_ids(path: Path) -> Path:
    """The 1.4.15 fixture's chunks as a v2 file, every store id and last_db_id shifted left by 56 bits."""
    with DbFile(V3) as db, open(path, "wb") as out:
        out.write(file_header(2))
        for i in range(len(db)):
            rec = db.chunk(i).record
            big = {k: rec.values[k] << 56 for k in ("store_id", "last_db_id") if k in rec.values}
            r = rec.with_values(**big)
            r.version = 2
            out.write(encode_chunk(r, 2))
    return path


def converted(tmp_path: Path) -> Path:
    out = tmp_path / "v6.db"
    r = run_in_process("convert", v2_with_large_ids(tmp_path / "v2.db"), "--to-version", "6", "-o", out, "--endian", "little")
    assert r.returncode == 0, r.stderr
    return out


def test_an_explicit_endian_little_is_obeyed(tmp_path: Path) -> None:
    """Before: `--endian little` on the converted file was refused with "use --endian big"."""
    v6 = converted(tmp_path)
    for cmd in (["check"], ["info", "--json"], ["rm-retained", "#", "--dry-run"], ["dump", "--type", "cfg"]):
        r = run_in_process(cmd[0], v6, *cmd[1:], "--endian", "little")
        assert r.returncode == 0, (cmd, r.stderr)
        assert "use --endian big" not in r.stderr
    dump = run_in_process("dump", v6, "--type", "cfg", "--json", "--endian", "little")
    assert f'"last_db_id": {49 << 56}' in dump.stdout


def test_without_endian_the_guess_still_refuses_and_names_both_choices(tmp_path: Path) -> None:
    v6 = converted(tmp_path)
    r = run_in_process("check", v6)
    assert r.returncode == 2
    assert "--endian big" in r.stderr and "--endian little" in r.stderr


def test_convert_refuses_to_write_what_the_guess_would_refuse(tmp_path: Path) -> None:
    """Before: exit 0, and check, info and rm-retained then refused the written file."""
    out = tmp_path / "out.db"
    r = run_in_process("convert", v2_with_large_ids(tmp_path / "v2.db"), "--to-version", "6", "-o", out)
    assert r.returncode == 1, r.stdout
    assert not out.exists()
    assert "nothing written" in r.stderr and "--endian little" in r.stderr


def test_convert_with_explicit_endian_says_how_to_read_the_result(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    r = run_in_process("convert", v2_with_large_ids(tmp_path / "v2.db"), "--to-version", "6", "-o", out, "--endian", "little")
    assert r.returncode == 0, r.stderr
    assert "--endian little" in r.stdout + r.stderr
    assert run_in_process("check", out, "--endian", "little").returncode == 0


def test_an_explicit_wrong_order_contradicted_by_times_is_still_refused() -> None:
    """The real 2.0.20 file's expiry times read as nonsense big-endian, as its ids do: refused."""
    r = run_in_process("info", V6, "--endian", "big")
    assert r.returncode == 2 and "--endian little" in r.stderr


def test_a_dry_run_says_what_the_real_run_would(tmp_path: Path) -> None:
    src = v2_with_large_ids(tmp_path / "v2.db")
    r = run_in_process("convert", src, "--to-version", "6", "--dry-run")
    assert r.returncode == 1 and "--endian little" in r.stderr
    r = run_in_process("convert", src, "--to-version", "6", "--dry-run", "--endian", "little")
    assert r.returncode == 0 and "--endian little" in r.stdout + r.stderr
