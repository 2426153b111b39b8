"""The write operations on either format (codec.edits): one entry point, the same decisions on a store and
on the .db of its records, the result and the backup where the options say."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from codec.edits import DbEdits, Edits, StoreEdits, edits_for
from codec.ops.session_filter import SessionCriteria
from codec.ops.trim import TrimRules
from codec.reader import DbFile
from codec.sources import as_db, open_any

from support.paths import SQLITE_STORES

SAME = ("retained_removed", "retained_topics", "clients_removed", "subs_removed", "client_msgs_removed",
        "stores_removed", "removed_by_rule", "clients", "in_flight_kept")


@pytest.fixture
def twin(tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the 2.1.2 plugin's store and a .db of its v6 records (the same state)."""
    store = tmp_path / "mosquitto.sqlite3"
    shutil.copyfile(SQLITE_STORES[0], store)
    db = tmp_path / "mosquitto.db"
    with as_db(open_any(store)) as image:
        shutil.copyfile(image.path, db)
    return store, db


def opened(path: Path) -> Edits:
    return edits_for(str(path), lambda: DbFile(path))


def decisions(report: object) -> dict:
    return {k: v for k, v in report.to_json().items() if k in SAME}  # type: ignore[attr-defined]


def test_the_format_chooses_the_operations_and_whether_they_stream(twin: tuple[Path, Path]) -> None:
    store, db = twin
    with opened(store) as s, opened(db) as d:
        assert isinstance(s, StoreEdits) and isinstance(d, DbEdits)
        assert isinstance(s, Edits) and isinstance(d, Edits)
        assert (s.streams, d.streams) == (False, True)  # a store is a database file, never a byte stream
        assert (s.format_name, d.format_name) == ("Mosquitto 2.1 sqlite store", "mosquitto.db")
        assert (s.version, d.version) == (6, 6) and not s.empty and not d.empty


def test_each_operation_decides_the_same_on_both_formats(twin: tuple[Path, Path]) -> None:
    store, db = twin
    rules = TrimRules(keep_newest=1)
    rules.check()
    crit = SessionCriteria(no_subscriptions=True)
    crit.check()
    runs = [lambda e: e.rm_retained(["corp/retained/#"], None), lambda e: e.drop_clients(["a-sub-q1"], None, None),
            lambda e: e.prune_sessions(crit, None), lambda e: e.trim_queue(rules, None)]
    for run in runs:
        with opened(store) as s, opened(db) as d:
            a, b = run(s), run(d)
            assert decisions(a) == decisions(b) and a.changed and b.changed
            assert s.written is None and d.written is None  # dry runs
    assert not os.path.exists(f"{store}.bak") and not os.path.exists(f"{db}.bak")


def test_in_place_keeps_a_backup_only_of_a_change(twin: tuple[Path, Path]) -> None:
    store, db = twin
    for path in (store, db):
        before = path.read_bytes()
        with opened(path) as e:
            rem = e.rm_retained(["no/such/topic"], None, in_place=True)
            assert not rem.changed and e.backup is None and not os.path.exists(f"{path}.bak")
        with opened(path) as e:
            rem = e.rm_retained(["corp/retained/#"], None, in_place=True)
            assert rem.changed and e.written == str(path) and e.backup == f"{path}.bak"
            assert Path(e.backup).read_bytes() == before


def test_an_edited_copy_leaves_the_file_alone(twin: tuple[Path, Path], tmp_path: Path) -> None:
    store, db = twin
    for path, out in ((store, tmp_path / "out.sqlite3"), (db, tmp_path / "out.db")):
        before = path.read_bytes()
        with opened(path) as e:
            rem = e.drop_clients(["a-sub-q1"], None, str(out))
        assert rem.written == e.written == str(out) and rem.size_after == out.stat().st_size
        assert path.read_bytes() == before and e.backup is None
        with open_any(out) as edited, open_any(path) as original:
            assert len(edited) < len(original)
