"""A running broker's persistence file is not written: the broker would write over it at its next save (a real
Mosquitto shows it), so an edit in place, or an output naming it, is refused until the broker is stopped."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from codec import DbFile
from codec.broker.running import BrokerRunningError, brokers_persisting
from inspector.tui.model.document import Document

from support.brokers import Broker, have_mosquitto
from support.cli import run
from support.paths import V6

pytestmark = [pytest.mark.broker, pytest.mark.skipif(not have_mosquitto(), reason="Debian mosquitto is not installed")]


def test_an_edit_of_a_running_brokers_file_is_refused_and_would_have_been_undone(tmp_path: Path) -> None:
    broker = Broker(V6, workdir=tmp_path / "broker").start()
    db = broker.db_path
    try:
        found = brokers_persisting(db)
        assert [b.pid for b in found] == [broker.proc.pid]  # type: ignore[union-attr]
        assert brokers_persisting(tmp_path / "elsewhere.db") == []
        before = db.read_bytes()
        listing = sorted(os.listdir(db.parent))
        for args in (["rm-retained", db, "#", "--in-place"], ["drop-client", db, "a-sub-q0", "--in-place"],
                     ["rewrite", V6, "-o", db], ["convert", V6, "--to-version", "5", "--force", "-o", db]):
            r = run(*args)
            assert r.returncode == 1, (args, r.stdout, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and f"Mosquitto pid {broker.proc.pid}" in lines[0], lines  # type: ignore[union-attr]
            assert "persists to this file" in lines[0] and "stop the broker first" in lines[0]
            assert db.read_bytes() == before and sorted(os.listdir(db.parent)) == listing  # no backup, no temp
        r = run("guard", db, "--broker", "2.0.11", "--no-trial")  # the guard is for before the broker starts
        assert r.returncode == 2 and "persists to it" in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert db.read_bytes() == before and sorted(os.listdir(db.parent)) == listing
        other = tmp_path / "edited.db"
        assert run("rm-retained", db, "#", "-o", other).returncode == 0  # a copy elsewhere: the broker's file stays
        assert retained(other) == 0 < retained(db)
        doc = Document(str(db))  # the inspector's save, the same refusal
        doc.delete([1], "delete chunk 1")
        with pytest.raises(BrokerRunningError, match="persists to this file"):
            doc.save()
        doc.close()
        assert db.read_bytes() == before and sorted(os.listdir(db.parent)) == listing
        shutil.copyfile(other, db)  # what an edit in place would have left, the broker still running
    finally:
        broker.stop()
    assert retained(db) > 0  # the broker's save at its exit undid it: the retained messages are back
    assert brokers_persisting(db) == []
    r = run("rm-retained", db, "#", "--in-place")  # stopped: the edit stands
    assert r.returncode == 0, r.stderr
    assert retained(db) == 0


def retained(path: Path) -> int:
    with DbFile(path) as db:
        return sum(1 for c in db.stream() if c.kind == "retain")


def test_a_relative_persistence_location_is_the_brokers_working_directory(tmp_path: Path) -> None:
    work = tmp_path / "run"
    work.mkdir()
    broker = Broker(V6, workdir=work)
    broker.config = lambda: (Broker.config(broker).replace(f"persistence_location {work}/\n",  # type: ignore[method-assign]
                                                            "persistence_location ./\n"))
    broker.start()
    try:
        assert [b.pid for b in brokers_persisting(work / "mosquitto.db")] == [broker.proc.pid]  # type: ignore[union-attr]
        assert brokers_persisting(tmp_path / "mosquitto.db") == []
    finally:
        broker.stop()
