"""A Mosquitto 2.1 sqlite store given to a writing command is never replaced by (or copied as) a .db file.

The editing commands (rm-retained, drop-client, prune-sessions, renew) write a sqlite store, in place or as a
copy (codec.store.edit); every other writing command refuses it (exit 2, one line, the store byte-for-byte
unchanged, no .bak, no output), except `convert -o` (whose job is the format change).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from inspector.cli import main

from support.paths import INCOMING

STORE = INCOMING / "2.1.2-a.sqlite3"
SQLITE_MAGIC = b"SQLite format 3\0"

EDITING = [
    ["rm-retained", "{f}", "corp/#"],
    ["drop-client", "{f}", "a-sub-q1"],
    ["prune-sessions", "{f}", "--no-subscriptions"],
    ["renew", "{f}", "--sessions", "never"],
]
OTHERS = [
    ["convert", "{f}", "--to-version", "6"],
    ["repair", "{f}"],
]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    if not STORE.exists():
        pytest.skip("no 2.1.2 sqlite fixture")
    dst = tmp_path / "mosquitto.sqlite3"
    shutil.copyfile(STORE, dst)
    return dst


@pytest.mark.parametrize("argv", EDITING, ids=lambda a: a[0])
def test_editing_in_place_keeps_a_store(store: Path, argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main([a.format(f=store) for a in argv] + ["--in-place"]) == 0, capsys.readouterr().err
    assert store.read_bytes()[:16] == SQLITE_MAGIC
    assert Path(f"{store}.bak").read_bytes() == STORE.read_bytes()


@pytest.mark.parametrize("argv", EDITING, ids=lambda a: a[0])
def test_editing_as_a_copy_writes_a_store(store: Path, argv: list[str], capsys: pytest.CaptureFixture) -> None:
    out = store.parent / "out.sqlite3"
    before = _sha(store)
    assert main([a.format(f=store) for a in argv] + ["-o", str(out)]) == 0, capsys.readouterr().err
    assert out.read_bytes()[:16] == SQLITE_MAGIC and _sha(store) == before


@pytest.mark.parametrize("argv", OTHERS, ids=lambda a: a[0])
def test_other_writers_refuse_in_place(store: Path, argv: list[str], capsys: pytest.CaptureFixture) -> None:
    before = _sha(store)
    rc = main([a.format(f=store) for a in argv] + ["--in-place"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and str(store) in err[0] and "sqlite store" in err[0]
    assert _sha(store) == before
    assert sorted(p.name for p in store.parent.iterdir()) == ["mosquitto.sqlite3"]


def test_repair_does_not_write_a_db_copy_of_a_store(store: Path, capsys: pytest.CaptureFixture) -> None:
    """A store is salvaged into a store (codec.store.salvage), never into a mosquitto.db; never in place."""
    out = store.parent / "out.sqlite3"
    before = _sha(store)
    assert main(["repair", str(store), "-o", str(out)]) == 0
    assert out.read_bytes()[:16] == b"SQLite format 3\0" and _sha(store) == before
    assert main(["repair", str(store), "--in-place"]) == 2
    assert "--in-place refused" in capsys.readouterr().err and _sha(store) == before


def test_rewrite_onto_the_store_itself_is_refused(store: Path, capsys: pytest.CaptureFixture) -> None:
    before = _sha(store)
    assert main(["rewrite", str(store), "-o", str(store)]) == 2
    assert _sha(store) == before


def test_convert_to_a_new_db_and_dry_runs_still_work(store: Path, capsys: pytest.CaptureFixture) -> None:
    out = store.parent / "out.db"
    assert main(["convert", str(store), "--to-version", "6", "-o", str(out)]) == 0
    assert out.read_bytes()[:15] == b"\x00\xb5\x00mosquitto db"
    assert main(["rm-retained", str(store), "corp/#", "--dry-run"]) == 0


def test_reading_a_store_creates_no_file_beside_it(store: Path, capsys: pytest.CaptureFixture) -> None:
    before = _sha(store)
    for argv in (["info", str(store)], ["check", str(store)], ["dump", str(store), "--json"],
                 ["stats", str(store)], ["rm-retained", str(store), "#", "--dry-run"]):
        main(argv)
    capsys.readouterr()
    assert sorted(p.name for p in store.parent.iterdir()) == ["mosquitto.sqlite3"]
    assert _sha(store) == before


def test_a_store_with_a_wal_is_read_with_it(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A committed change still in the -wal (a live or killed broker) is seen; the store and log are untouched."""
    import sqlite3

    live = tmp_path / "live"
    live.mkdir()
    db = live / "mosquitto.sqlite3"
    shutil.copyfile(store, db)
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    n = con.execute("SELECT count(*) FROM retains").fetchone()[0]
    con.execute("DELETE FROM retains")
    con.commit()
    shutil.copyfile(db, live / "copy.sqlite3")
    shutil.copyfile(f"{db}-wal", live / "copy.sqlite3-wal")
    con.close()  # checkpoints into db; the copies keep the un-checkpointed state
    copy = live / "copy.sqlite3"
    wal_before = _sha(live / "copy.sqlite3-wal")
    assert n > 0
    assert main(["info", str(copy), "--json"]) == 0
    import json

    info = json.loads(capsys.readouterr().out)
    assert info["chunks"]["retain"] == 0 and info["wal_size"] == (live / "copy.sqlite3-wal").stat().st_size
    assert _sha(live / "copy.sqlite3-wal") == wal_before
    assert not (live / "copy.sqlite3-shm").exists()
