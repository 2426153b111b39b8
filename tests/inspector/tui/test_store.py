"""The inspector on a Mosquitto 2.1 sqlite store: rows where a .db has chunks (table,
rowid and primary key shown), the hex view showing a row's text and blob columns (payload, properties),
the same finding keys — and reading writes nothing: no file is ever created beside the store (no -wal, no
-shm). Editing a store: test_store_edit.py.

What each row should show is read with plain sqlite3 (support.stores), not through the code under test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codec.ops.check import check_file
from codec.store.read import StoreFile
from inspector.tui.model.storedoc import StoreDocument
from inspector.tui.screens.check import CheckScreen

from support.paths import INCOMING, SQLITE_STORES
from support.stores import ORDER, alone_copy, connect, counts, rows_in_order, sha256
from support.tui import keys, make_app, running, settle, status, type_text, until

STORE = INCOMING / "2.1.2-a.sqlite3"
pytestmark = pytest.mark.skipif(not SQLITE_STORES, reason="no 2.1 sqlite fixture")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return alone_copy(STORE, tmp_path)


expected_rows = rows_in_order


def key_text(table: str, rowid: int, r: dict) -> str:
    """What the list shows first for a row: its primary key (a queue entry, which has none: its rowid)."""
    if table == "base_msgs":
        return f"#{r['store_id']}"
    if table == "clients":
        return r["client_id"]
    if table == "retains":
        return r["topic"]
    if table == "subscriptions":
        return f"{r['client_id']} {r['topic']}"
    return f"rowid {rowid}: "


def row_line(app, row: int) -> str:  # type: ignore[no-untyped-def]
    return "".join(seg.text for seg in app.chunks._row_segments(row, 120))


async def test_rows_are_listed_with_table_and_primary_key(store: Path) -> None:
    rows = expected_rows(store)
    n = counts(store)
    app = make_app(store)
    assert isinstance(app.doc, StoreDocument)
    async with app.run_test(size=(140, 36)) as pilot:
        await settle(pilot)
        head = str(app.query_one("#summary").render()).splitlines()
        assert "Mosquitto 2.1 sqlite store, schema 1.1.0" in head[0] and "READ-ONLY" not in head[0]
        assert head[1].startswith(f"{len(rows)} rows: ") and all(f"{t} {n[t]}" in head[1] for t in ORDER)
        assert app.chunks.total() == len(rows)
        for k, (table, rowid, r) in enumerate(rows):
            line = row_line(app, k)
            assert line.split()[1] == table, (k, line)
            key = key_text(table, rowid, r)
            assert key in line, (k, line, key)
        app.jump(len(rows) - 1)  # the last retain: the tree names its table, rowid and key
        await settle(pilot)
        table, rowid, r = rows[-1]
        assert str(app.fields.root.label).startswith(f"retains rowid {rowid} (row {len(rows) - 1})")
        assert str(app.fields.rows[1].label) == f"primary key topic = {r['topic']!r}"
        mode = str(app.query_one("#mode").render())
        assert f"retains[rowid {rowid}]" in mode and "READ-ONLY" not in mode


async def test_hex_view_shows_the_payload_and_properties_as_stored(store: Path) -> None:
    con = connect(store)
    rowid, sid, payload, props = con.execute(
        "SELECT rowid, store_id, payload, CAST(properties AS BLOB) FROM base_msgs WHERE properties IS NOT NULL "
        "ORDER BY length(properties) DESC LIMIT 1").fetchone()
    con.close()
    async with running(store, size=(140, 40)) as pilot:
        app = pilot.app
        app.do_goto(f"#{sid}")
        await settle(pilot)
        assert app.doc.view(app.item).row.rowid == rowid
        nodes = {n.data.name: n for _s, _z, n in app.fields.nodes_by_span}
        for name, stored in (("payload", bytes(payload)), ("properties", bytes(props))):
            app.fields.focus()
            app.fields.move_cursor(nodes[name])
            await settle(pilot)
            start, size = app.hex.select
            assert app.hex.source.read(start, size) == stored, name
        # and from the hex side: a byte of the properties selects that column
        app.hex.focus()
        start, size = app.hex.source.spans[-1][:2]
        app.hex.cursor = start + size - 1
        await settle(pilot)
        assert app.fields.cursor_node.data.name == "properties"
        # the values the broker restores from it, properties decoded
        labels = [str(n.label) for n in app.fields.rows]
        assert any(x.startswith("properties: ") and x != "properties: none" for x in labels)


@pytest.mark.parametrize("read_only", [True, False])
async def test_reading_writes_and_creates_nothing(store: Path, read_only: bool) -> None:
    before = sha256(store)
    async with running(store, read_only=read_only, size=(140, 36)) as pilot:
        app = pilot.app
        for key in ("d", "a", "A", "e", "i", "ctrl+s", "S") if read_only else ():  # every edit key refused
            await keys(pilot, "down", key)
            await keys(pilot, "escape")
            assert not app.doc.overlay and not app.doc.new_records, key
        # every read path, then quit
        await keys(pilot, "f", *"type:retain", "enter")
        await keys(pilot, "escape", "slash")
        await type_text(pilot, "corp/v5")
        await keys(pilot, "enter", "c")
        await until(pilot, lambda: isinstance(app.screen, CheckScreen) and not app.screen.running, "the check")
        await keys(pilot, "escape", "q")
    assert sha256(store) == before
    assert os.listdir(store.parent) == [store.name]  # no -wal, no -shm, no .db, no backup


@pytest.mark.parametrize("where", ["thread", "process"])
async def test_find_follow_and_check_work_on_rows(store: Path, where: str) -> None:
    rows = expected_rows(store)
    retains = [k for k, (t, _i, _r) in enumerate(rows) if t == "retains"]
    app = make_app(store)
    app.check_process_from = 0 if where == "process" else None
    async with app.run_test(size=(140, 36)) as pilot:
        await settle(pilot)
        await keys(pilot, "f", *"type:retain", "enter")
        await settle(pilot)
        assert list(app.chunks.rows) == retains
        # follow a retain to its stored message: the base_msgs row with that store_id
        app.jump(retains[0])
        await keys(pilot, "r")
        sid = rows[retains[0]][2]["store_id"]
        target = next(k for k, (t, _i, r) in enumerate(rows) if t == "base_msgs" and r["store_id"] == sid)
        assert app.item == target
        await keys(pilot, "escape")
        # search: the first row whose topic holds the text
        app.jump(0)
        await keys(pilot, "slash")
        await type_text(pilot, "v5props")
        await keys(pilot, "enter")
        first = next(k for k, (t, _i, r) in enumerate(rows) if k > 0 and "v5props" in str(r.get("topic")))
        assert app.item == first
        # goto by offset has no meaning on rows: said, nothing moves
        await keys(pilot, "g")
        await type_text(pilot, "0x40")
        await keys(pilot, "enter")
        assert app.item == first and "rows, not byte offsets" in status(app)
        await keys(pilot, "escape")  # the refused goto's prompt stayed open to correct it
        await keys(pilot, "c")
        panel = app.screen
        await until(pilot, lambda: not panel.running, "the check")
        with StoreFile(store) as s:
            want = [(f.rule, f.chunk_index, f.message) for f in check_file(s, at=app.check_at)]
        assert [(f.rule, f.chunk_index, f.message) for f in panel.findings] == want
    assert os.listdir(store.parent) == [store.name]


async def test_a_store_is_compared_with_a_db_and_has_a_broker_verdict(store: Path) -> None:
    """--diff on a store marks its rows (the store is compared through its records): the shared subscription
    only it holds is +; the broker verdict is the store model's (codec.broker.storemodel), as check --broker's."""
    rows = expected_rows(store)
    shared = next(k for k, (t, _i, r) in enumerate(rows) if t == "subscriptions" and r["topic"].startswith("$share"))
    app = make_app(store)
    app.diff_other = str(INCOMING / "2.1.2-a.db")
    async with app.run_test(size=(160, 36)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: app.diff is not None, "the comparison")
        assert shared in app.diff.added.tolist() and row_line(app, shared)[1] == "+"
        clients = [k for k, (t, _i, _r) in enumerate(rows) if t == "clients"]
        assert set(clients) <= set(app.diff.changed.tolist())  # listener_port, session_expiry_time
        app.set_broker("2.1.2")
        await until(pilot, lambda: app.verdict is not None, "the verdict")
        from codec.broker.storemodel import predict_store

        want = predict_store(str(store), (2, 1, 2), at=app.check_at)
        assert app.broker == "2.1.2" and app.verdict.verdict == want.verdict == "loads"
        assert (app.verdict.kept, app.verdict.queued, app.verdict.retained_count) == \
            (want.kept, want.queued, want.retained_count)
    assert os.listdir(store.parent) == [store.name]
