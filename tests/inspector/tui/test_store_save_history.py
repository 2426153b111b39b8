"""ctrl+s on a Mosquitto 2.1 sqlite store keeps the undo history and the filter, as it does for a .db:
undoing an edit after the save puts back the value read before it, and a further save writes that value.

What the store holds is read with plain sqlite3 (support.stores), not through the code under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.paths import INCOMING, SQLITE_STORES
from support.stores import alone_copy, row_of, rows_in_order, store_id_of
from support.tui import edit_value, keys, make_app, settle, status

STORE = INCOMING / "2.1.2-a.sqlite3"
pytestmark = pytest.mark.skipif(not SQLITE_STORES, reason="no 2.1 sqlite fixture")
EDITED = "corp/retained/plain"  # a retained topic whose message's payload is edited
DROPPED = "corp/retained/q1"  # a retained topic deleted


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return alone_copy(STORE, tmp_path)


async def test_undo_after_a_store_save_and_a_second_save_writes_the_values_read_before(store: Path) -> None:
    before = rows_in_order(store)
    msg = row_of(store, "base_msgs", store_id=store_id_of(store, EDITED))
    sub = row_of(store, "subscriptions", client_id="a-sub-q0", topic="corp/plain/q0")
    app = make_app(store)
    async with app.run_test(size=(140, 36)) as pilot:
        await settle(pilot)
        await edit_value(pilot, msg, "payload", "edited in the inspector")
        await edit_value(pilot, sub, "qos", "1")
        app.apply_filter("type:msg_store")
        await settle(pilot)
        shown = list(app.chunks.rows)
        assert msg in shown and sub not in shown
        await keys(pilot, "ctrl+s")
        said = status(app)
        assert (f"saved {store} in one transaction: 1 base_msgs row(s) updated, 1 subscriptions row(s) updated"
                in said and said.endswith("(u: undo)")), said
        saved = rows_in_order(store)
        assert saved[msg][2]["payload"] == b"edited in the inspector" and saved[sub][2]["subscription_options"] == 1
        # the filter and the history stay; the saved store is not dirty
        assert app.filter_text == "type:msg_store" and list(app.chunks.rows) == shown
        assert not app.doc.is_dirty() and len(app.doc.undo_stack) == 2
        assert b"edited in the inspector" in app.doc.view(msg).data
        # undo the qos edit, then the payload edit: the values as read before the first save
        await keys(pilot, "u")
        assert app.doc.is_dirty() and app.doc.record(sub)["qos"] == before[sub][2]["subscription_options"] & 3
        await keys(pilot, "u")
        assert b"edited in the inspector" not in app.doc.view(msg).data
        assert app.doc.view(msg).record["payload"] == before[msg][2]["payload"]
        # redo and undo again: the same rows
        await keys(pilot, "U")
        assert b"edited in the inspector" in app.doc.view(msg).data
        await keys(pilot, "u")
        await keys(pilot, "ctrl+s")
        said = status(app)
        assert "1 base_msgs row(s) updated, 1 subscriptions row(s) updated" in said, said
        assert not app.doc.is_dirty() and app.filter_text == "type:msg_store"
    assert rows_in_order(store) == before  # the second save wrote the values read before the first
    assert rows_in_order(Path(f"{store}.bak.1")) == saved


async def test_a_row_deleted_by_a_save_keeps_the_edits_made_after_the_deletion(store: Path) -> None:
    before = rows_in_order(store)
    ret = row_of(store, "retains", topic=DROPPED)
    app = make_app(store)
    async with app.run_test(size=(140, 36)) as pilot:
        await settle(pilot)
        app.jump(ret)
        await settle(pilot)
        app.chunks.focus()
        await keys(pilot, "d")
        msg = row_of(store, "base_msgs", store_id=store_id_of(store, EDITED))
        await edit_value(pilot, msg, "payload", "edited in the inspector")
        await keys(pilot, "ctrl+s")
        said = status(app)
        assert "1 retains row(s) deleted" in said and "; the 1 edit(s) up to the last row deletion cannot be undone" in said, said
        assert len(app.doc.undo_stack) == 1  # the payload edit; the deletion cannot be undone in the store
        await keys(pilot, "u")
        assert app.doc.view(msg).record["payload"] == before[msg][2]["payload"]
        await keys(pilot, "u")  # nothing more to undo
        await keys(pilot, "ctrl+s")
    after = rows_in_order(store)
    gone = ("retains", before[ret][1])
    assert after == [r for r in before if (r[0], r[1]) != gone]
