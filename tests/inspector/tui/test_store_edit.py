"""Editing a Mosquitto 2.1 sqlite store in the inspector: rows deleted (a session with its subscriptions,
queue and the messages no one else references), values edited, saved in place in one transaction with a
backup — and what Mosquitto 2.1.2 with its persist-sqlite plugin then serves from the store.

What the store holds is read with plain sqlite3 (support.stores), not through the code under test. The
fixture's times are absolute: the stores are first renewed (``--sessions never --messages never``) so that
nothing expires whatever day the tests run.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from textual.pilot import Pilot

from inspector.tui.model.storedoc import NO_BYTES, NO_ROWS

from support.brokers import SqliteBroker, collect_retained, sqlite_plugin
from support.cli import run
from support.paths import INCOMING, SQLITE_STORES
from support.stores import alone_copy, counts, names, row_of, rows_in_order, sha256, store_id_of, store_state
from support.tui import edit_value, keys, running, settle, status

STORE = INCOMING / "2.1.2-a.sqlite3"
pytestmark = pytest.mark.skipif(not SQLITE_STORES, reason="no 2.1 sqlite fixture")
DROPPED = "corp/retained/q1"  # a retained topic deleted in the inspector
EDITED = "corp/retained/plain"  # a retained topic whose message's payload is edited


@pytest.fixture(scope="module")
def renewed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 2.1.2 store renewed so nothing in it expires (made once; each test copies it)."""
    d = tmp_path_factory.mktemp("renewed")
    dst = d / "mosquitto.sqlite3"
    shutil.copyfile(STORE, dst)
    run("renew", dst, "--sessions", "never", "--messages", "never", "--in-place", ok=True)
    return dst


@pytest.fixture
def store(tmp_path: Path, renewed_store: Path) -> Path:
    """A copy alone in its directory (so the backup, and anything else created beside it, is seen)."""
    return alone_copy(renewed_store, tmp_path)


rows = rows_in_order


async def delete_row(pilot: Pilot, item: int) -> None:
    pilot.app.jump(item)
    await settle(pilot)
    pilot.app.chunks.focus()
    await keys(pilot, "d")
    await settle(pilot)


def without(state: list[tuple[str, int, dict]], *gone: tuple[str, int]) -> list[tuple[str, int, dict]]:
    return [r for r in state if (r[0], r[1]) not in gone]


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
async def test_edit_delete_save_and_what_the_broker_serves(store: Path) -> None:
    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    before_rows, before = rows(store), store_state(store)
    edited_sid = store_id_of(store, EDITED)
    msg = row_of(store, "base_msgs", store_id=edited_sid)
    ret = row_of(store, "retains", topic=DROPPED)
    sub = row_of(store, "subscriptions", client_id="a-sub-q0", topic="corp/plain/q0")
    async with running(store, size=(140, 36)) as pilot:
        app = pilot.app
        assert "READ-ONLY" not in status(app)
        await edit_value(pilot, msg, "payload", "edited in the inspector")
        assert app.doc.view(msg).edited and b"edited in the inspector" in app.doc.view(msg).data
        await edit_value(pilot, sub, "qos", "1")
        await delete_row(pilot, ret)
        assert app.doc.view(ret).deleted and "3 unsaved edit(s)" in str(app.query_one("#mode").render())
        await keys(pilot, "ctrl+s")
        said = status(app)
        assert said == (f"saved {store} in one transaction: 1 base_msgs row(s) updated, 1 subscriptions row(s) updated,"
                        f" 1 retains row(s) deleted; the store as it was: {store}.bak (the 3 edit(s) up to the last row"
                        " deletion cannot be undone: rows are not added to a store here, the backup holds them)"), said
        assert not app.doc.is_dirty() and app.doc.count() == len(before_rows) - 1
        await keys(pilot, "q")
    # the backup is the store as it was; nothing else was created beside it (no -wal, -shm, -journal left)
    assert names(store) == ["mosquitto.sqlite3", "mosquitto.sqlite3.bak"]
    assert rows(store.with_name("mosquitto.sqlite3.bak")) == before_rows
    after = rows(store)
    t, rowid, row = before_rows[msg]
    assert after[msg] == (t, rowid, {**row, "payload": b"edited in the inspector", "payloadlen": 23})
    t, rowid, row = before_rows[sub]
    assert after[sub] == (t, rowid, {**row, "subscription_options": 1})
    assert without(after, ("base_msgs", before_rows[msg][1]), ("subscriptions", before_rows[sub][1])) == \
        without(before_rows, ("base_msgs", before_rows[msg][1]), ("subscriptions", before_rows[sub][1]),
                ("retains", before_rows[ret][1]))
    # Mosquitto 2.1.2 on the saved store: the deleted retained topic is gone, the edited one carries the edit
    with SqliteBroker(store) as b:
        served = {t: m.payload for t, m in collect_retained(b.port).items()}
    expected = {t: p for t, p in before["retained"].items() if t != DROPPED}
    expected[EDITED] = b"edited in the inspector"
    assert served == expected


async def test_deleting_a_session_saves_what_drop_client_writes(store: Path, tmp_path: Path) -> None:
    """`d` on a session's row takes its subscriptions, queue and the messages no one else references: saved,
    the store holds exactly what `mosqdb drop-client` writes."""
    cli_out = tmp_path / "cli.sqlite3"
    rep = json.loads(run("drop-client", store, "a-sub-q2", "-o", cli_out, "--json", ok=True).stdout)
    assert rep["client_msgs_removed"] == 6 and rep["subs_removed"] == 3
    item = row_of(store, "clients", client_id="a-sub-q2")
    async with running(store, size=(140, 36)) as pilot:
        app = pilot.app
        await delete_row(pilot, item)
        assert "delete session 'a-sub-q2' with 3 sub(s), 6 queued message(s)" in status(app), status(app)
        await keys(pilot, "ctrl+s")
        assert "1 clients row(s) deleted" in status(app), status(app)
    strip = [(t, r) for t, _rowid, r in rows(store)]
    assert strip == [(t, r) for t, _rowid, r in rows(cli_out)]
    assert counts(store)["clients"] == counts(STORE)["clients"] - 1


@pytest.mark.parametrize(("table", "where", "name", "text", "why"), [
    ("clients", {"client_id": "a-sub-q1"}, "last_mid", "7", "the broker derives it"),
    ("subscriptions", {"client_id": "a-sub-q0", "topic": "corp/plain/q0"}, "options", "1",
     "qos and options in one byte"),
    ("base_msgs", {"topic": "corp/plain/q0"}, "topic", "corp/\\xff", "not valid UTF-8"),
])
async def test_values_the_store_cannot_hold_are_refused(store: Path, table: str, where: dict, name: str, text: str,
                                                        why: str) -> None:
    before = sha256(store)
    item = row_of(store, table, **where)
    async with running(store, size=(140, 36)) as pilot:
        app = pilot.app
        await edit_value(pilot, item, name, text)
        assert status(app).startswith("refused: ") and why in status(app), status(app)
        assert not app.doc.overlay and not app.doc.is_dirty()
        await keys(pilot, "q")
    assert sha256(store) == before and names(store) == ["mosquitto.sqlite3"]


async def test_bytes_and_new_rows_are_refused_and_save_as_never_writes(store: Path) -> None:
    before = sha256(store)
    async with running(store, size=(140, 36)) as pilot:
        app = pilot.app
        await keys(pilot, "down", "i")
        assert status(app) == f"refused: {NO_BYTES}"
        await keys(pilot, "a")
        assert status(app) == f"refused: {NO_ROWS}"
        await keys(pilot, "A")
        assert status(app) == f"refused: {NO_ROWS}"
        await keys(pilot, "d", "S")
        assert status(app).startswith("not saved: a sqlite store is saved in place only")
        assert app.doc.is_dirty()
        await keys(pilot, "u", "q")
    assert sha256(store) == before and names(store) == ["mosquitto.sqlite3"]


async def test_a_row_changed_since_it_was_read_refuses_the_whole_save(store: Path) -> None:
    before_rows = rows(store)
    ret = row_of(store, "retains", topic=DROPPED)
    sub = row_of(store, "subscriptions", client_id="a-sub-q0", topic="corp/plain/q0")
    async with running(store, size=(140, 36)) as pilot:
        app = pilot.app
        await delete_row(pilot, ret)
        await edit_value(pilot, sub, "qos", "2")
        app.doc.view(sub)  # (the row as read when shown)
        con = sqlite3.connect(store)  # another program changes the subscription meanwhile
        con.execute("UPDATE subscriptions SET subscription_identifier = 9 WHERE client_id = 'a-sub-q0' "
                    "AND topic = 'corp/plain/q0'")
        con.commit()
        con.close()
        await keys(pilot, "ctrl+s")
        assert status(app).startswith("not saved: ") and "changed since it was read" in status(app), status(app)
        assert app.doc.is_dirty()
    after = rows(store)
    _t, rowid, row = before_rows[sub]
    assert after == [r if r[:2] != ("subscriptions", rowid) else (r[0], r[1], {**row, "subscription_identifier": 9})
                     for r in before_rows]  # the retain is still there: nothing of the save was written
    assert names(store) == ["mosquitto.sqlite3"]  # and no backup is left


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
async def test_save_is_refused_while_a_broker_has_the_store_open(store: Path) -> None:
    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    ret = row_of(store, "retains", topic=DROPPED)
    async with running(store, size=(140, 36)) as pilot:
        app = pilot.app
        await delete_row(pilot, ret)
        broker = SqliteBroker(workdir=store.parent)  # the broker's own store: this very file
        broker.start()
        try:
            before = rows(store)
            await keys(pilot, "ctrl+s")
            said = status(app)
            assert said.startswith("not saved: ") and f"pid {broker.proc.pid}" in said, said
            assert app.doc.is_dirty() and rows(store) == before
        finally:
            broker.stop()
        await keys(pilot, "q")
    assert "mosquitto.sqlite3.bak" not in names(store)


async def test_read_only_store_refuses_edits_and_writes_nothing(store: Path) -> None:
    before = sha256(store)
    async with running(store, read_only=True, size=(140, 36)) as pilot:
        app = pilot.app
        assert "READ-ONLY sqlite store" in str(app.query_one("#mode").render())
        await keys(pilot, "down", "d")
        assert "read-only" in status(app) and not app.doc.overlay
        await keys(pilot, "ctrl+s", "q")
    assert sha256(store) == before and names(store) == ["mosquitto.sqlite3"]
