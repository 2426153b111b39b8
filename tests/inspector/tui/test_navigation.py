"""Navigation, goto, search, filter and references on the real 2.0.20 file."""

from __future__ import annotations

import json

import pytest

from codec import DbFile
from inspector.tui.screens.prompt import PromptScreen

from support.paths import V3, V6
from support.reference_selection import topic_matches
from support.tui import keys, make_app, running, settle, status, type_text


def manifest(path):  # type: ignore[no-untyped-def]
    return json.loads(open(f"{path}.manifest.json").read())


async def test_summary_rows_and_paging() -> None:
    async with running(V6) as pilot:
        app = pilot.app
        counts = manifest(V6)["chunk_counts"]
        summary = str(app.query_one("#summary").render())
        assert "db v6" in summary and "shutdown=1 (clean)" in summary
        assert f"{sum(counts.values())} chunks" in summary
        assert f"msg {counts['DB_CHUNK_MSG_STORE']}" in summary and f"cmsg {counts['DB_CHUNK_CLIENT_MSG']}" in summary
        assert app.item == 0 and app.doc.record(0).kind == "cfg"
        await keys(pilot, "down")
        assert app.item == 1
        assert str(app.fields.root.label).startswith("msg_store[1] at 47")
        await keys(pilot, "pagedown")
        page = app.chunks.size.height - 1
        assert app.item == 1 + page
        await keys(pilot, "end")
        assert app.item == 89 and app.doc.record(89).kind == "retain"  # 2.0 writes retains last
        await keys(pilot, "home")
        assert app.item == 0


async def test_goto_index_offset_store() -> None:
    async with running(V6) as pilot:
        app = pilot.app
        await keys(pilot, "g")
        await type_text(pilot, "#63")
        await keys(pilot, "enter")
        rec = app.doc.record(app.item)
        assert rec["store_id"] == 63 and rec["topic"] == "corp/retained/big" and len(rec["payload"]) == 102400
        big = app.item
        with DbFile(V6) as db:
            off = db.index.offsets[big] + 100  # inside the big payload
        await keys(pilot, "home", "g")
        await type_text(pilot, f"0x{off:x}")
        await keys(pilot, "enter")
        assert app.item == big
        await keys(pilot, "g")
        await type_text(pilot, "42")
        await keys(pilot, "enter")
        assert app.item == 42
        await keys(pilot, "g")
        await type_text(pilot, "900")
        await keys(pilot, "enter")
        assert app.item == 42 and "out of range 0..89" in status(app)
        assert isinstance(app.screen, PromptScreen)  # refused: the prompt stays open to correct it


async def test_search_and_next() -> None:
    async with running(V6) as pilot:
        app = pilot.app
        await keys(pilot, "slash")
        await type_text(pilot, "corp/plain/q2")
        await keys(pilot, "enter")
        first = app.item
        assert app.doc.record(first)["topic"] == "corp/plain/q2"
        await keys(pilot, "n")
        assert app.item > first and app.doc.record(app.item)["topic"] == "corp/plain/q2"
        # a client id is found too (UTF-8)
        await keys(pilot, "home", "slash")
        await pilot.press("ctrl+u")
        await type_text(pilot, "a-ünï-客户端")
        await keys(pilot, "enter")
        assert app.doc.record(app.item)["client_id"] == "a-ünï-客户端"


async def test_filter_topic_type_and_store() -> None:
    app = make_app(V6)
    retained = [r["topic"] for r in manifest(V6)["workload"]["retained"]]
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await keys(pilot, "f")
        await type_text(pilot, "type:retain")
        await keys(pilot, "enter")
        rows = [int(r) for r in app.chunks.rows]
        assert len(rows) == manifest(V6)["chunk_counts"]["DB_CHUNK_RETAIN"]
        assert all(app.doc.record(i).kind == "retain" for i in rows)
        assert app.item == rows[0]

        await keys(pilot, "escape")
        assert app.chunks.rows is None and app.chunks.total() == 90
        await keys(pilot, "f")
        await type_text(pilot, "topic:corp/retained/#")
        await keys(pilot, "enter")
        rows = [int(r) for r in app.chunks.rows]
        stores = [app.doc.record(i) for i in rows if app.doc.record(i).kind == "msg_store"]
        refs = [app.doc.record(i) for i in rows if app.doc.record(i).kind != "msg_store"]
        expected = sorted(t for t in retained if topic_matches("corp/retained/#", t))
        assert sorted(r["topic"] for r in stores) == expected
        assert {r["store_id"] for r in refs} == {r["store_id"] for r in stores}
        assert {r.kind for r in refs} <= {"retain", "client_msg"}
        assert "filter 'topic:corp/retained/#'" in status(app)

        await keys(pilot, "escape", "f")
        await type_text(pilot, "store:63")
        await keys(pilot, "enter")
        kinds = sorted(app.doc.record(int(i)).kind for i in app.chunks.rows)
        assert kinds == ["msg_store", "retain"]

        await keys(pilot, "escape", "f")
        await type_text(pilot, "topic:a/#/b")
        await keys(pilot, "enter")
        assert "not a valid MQTT topic filter" in status(app)


async def test_client_filter_counts_match_manifest() -> None:
    app = make_app(V6)
    observed = manifest(V6)["clients_observed"]["a-sub-q1"]
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.apply_filter("client:a-sub-q1")
        await settle(pilot)
        recs = [app.doc.record(int(i)) for i in app.chunks.rows]
        assert sum(r.kind == "sub" for r in recs) == observed["subscriptions"]
        assert sum(r.kind == "client_msg" for r in recs) == observed["queued_or_inflight_messages"]
        assert sum(r.kind == "client" for r in recs) == 1


async def test_follow_reference_and_back() -> None:
    async with running(V6) as pilot:
        app = pilot.app
        app.apply_filter("type:retain")
        await settle(pilot)
        retain = app.item
        sid = app.doc.record(retain)["store_id"]
        await keys(pilot, "r")
        rec = app.doc.record(app.item)
        assert rec.kind == "msg_store" and rec["store_id"] == sid
        await keys(pilot, "r")  # back: everything that references this store
        recs = [app.doc.record(int(i)) for i in app.chunks.rows]
        assert retain in [int(i) for i in app.chunks.rows]
        assert all(r["store_id"] == sid for r in recs)


async def test_v3_file_fields() -> None:
    """A 1.4.15 file (db v3): v3 fields, no properties, disconnect_t present in clients."""
    async with running(V3) as pilot:
        app = pilot.app
        assert "db v3" in str(app.query_one("#summary").render())
        app.apply_filter("type:client")
        await settle(pilot)
        assert len(app.chunks.rows) == 6
        rec = app.doc.record(app.item)
        assert rec.kind == "client" and "disconnect_t" in rec.values and "session_expiry_time" not in rec.values
        labels = [str(n.label) for n in app.fields.root.children]
        assert any(label.startswith("disconnect_t time_t = ") for label in labels)


@pytest.mark.parametrize("pack", [True, False])
def test_store_columns_match_decoded_values(pack: bool) -> None:
    """The store ids read at their place in the body (no decoding) agree with the codec on every chunk,
    v3 to v6; goto finds every msg_store and the referrers are counted as the decoder sees them, with
    ids packed beside their chunk numbers and (ids too wide for that) kept apart."""
    from collections import Counter

    from inspector.tui.features.filters import StoreColumns, store_ids
    from inspector.tui.model.document import Document

    from support.paths import V4, V5

    for path in (V3, V4, V5, V6):
        doc = Document(str(path))
        for _ in doc.db.scan_steps():
            pass
        cols = StoreColumns(doc, pack=pack)
        assert (cols.rows is None) == pack
        gathered = {}
        for t in (2, 3, 4):
            for rows, ids in store_ids(doc, t):
                gathered.update(zip(rows.tolist(), ids.tolist(), strict=True))
        refs: Counter[int] = Counter()
        with DbFile(path) as db:
            for c in db.stream():
                sid = c.record.get("store_id")
                assert gathered.get(c.index) == sid, (path.name, c.index)
                if c.kind == "msg_store":
                    assert cols.find_store(sid) == c.index
                elif sid is not None:
                    refs[sid] += 1
        assert refs and all(cols.references(sid) == n for sid, n in refs.items())
        assert cols.find_store(10**12) is None and cols.find_store(-1) is None and cols.find_store(2**64) is None
        doc.close()


async def test_mouse_selects_rows_and_bytes() -> None:
    from inspector.tui.widgets.chunklist import ChunkList
    from inspector.tui.widgets.hexview import HexView

    async with running(V6) as pilot:
        app = pilot.app
        await pilot.click(ChunkList, offset=(5, 3))
        await settle(pilot)
        assert app.item == 3
        n = app.hex.per_row
        await pilot.click(HexView, offset=(10 + 3 * 2, 1))  # second row, third byte
        await settle(pilot)
        assert app.hex.cursor == n + 2
        await pilot.click(HexView, offset=(11 + 3 * n + 5, 0))  # the ASCII column, sixth byte
        await settle(pilot)
        assert app.hex.cursor == 5
        # the cursor's byte selects its field: bytes 4..7 of a v6 chunk are the header length
        assert app.fields.cursor_node.data.start == 4
