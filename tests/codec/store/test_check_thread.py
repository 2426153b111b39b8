"""A store's check never returns while its ``quick_check`` thread still runs: that thread's connection holds
the file open, so a check that stops at an error would leave it open in a process that goes on (the TUI, a
library, the fuzz campaign)."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

import codec.store.check as store_check
from codec.errors import CodecError
from codec.store.connect import uri_path
from codec.store.read import StoreFile

from support.paths import INCOMING

ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def test_a_check_stopped_by_an_error_stops_its_quick_check_thread(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store.sqlite3"
    shutil.copy(INCOMING / "2.1.2-a.sqlite3", store)
    running = threading.Event()

    def slow_run(self: store_check._QuickCheck) -> None:  # a quick_check that lasts until interrupted
        con = sqlite3.connect(f"file:{uri_path(self.path)}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        self._con = con
        running.set()
        try:
            con.execute(ENDLESS).fetchall()
        except sqlite3.Error:
            pass
        finally:
            con.close()

    def fail(self: object) -> None:
        assert running.wait(10)
        raise CodecError("a row the scan refuses", path=str(store))

    monkeypatch.setattr(store_check._QuickCheck, "_run", slow_run)
    monkeypatch.setattr(store_check._StoreCheck, "run", fail)
    with StoreFile(store) as s:
        assert s.figures.wal_size is None and "immutable=1" in (s._uri or ""), "no thread for this store"
        with pytest.raises(CodecError):
            store_check.check_store(s)
    assert not [t for t in threading.enumerate() if t.name == "quick_check"]
