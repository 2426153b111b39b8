"""Field <-> byte linking, validated edits, hex overwrite, undo/redo, deletes and byte-exact saves."""

from __future__ import annotations

import json
import os
from pathlib import Path

from codec import DbFile
from inspector.tui.screens.prompt import PromptScreen

from support.paths import V6
from support.tui import keys, make_app, running, settle, status, type_text

TOPIC = "corp/retained/température/salle-1"


def find_topic(path: Path, topic: str) -> int:
    with DbFile(path) as db:
        return next(c.index for c in db.stream() if c.kind == "msg_store" and c.record["topic"] == topic)


def select_field(app, name: str) -> None:  # type: ignore[no-untyped-def]
    node = next(n for _s, _z, n in app.fields.nodes_by_span if n.data.name == name)
    app.fields.move_cursor(node)


async def test_field_selects_its_bytes_and_hex_cursor_selects_field() -> None:
    app = make_app(V6)
    i = find_topic(V6, TOPIC)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.jump(i)
        await settle(pilot)
        v = app.doc.view(i)
        topic_span = next(s for s in v.spans if s.name == "topic")
        select_field(app, "topic")
        await settle(pilot)
        start, size = app.hex.select
        assert (start, size) == (v.header_size + topic_span.offset, topic_span.size)
        assert v.data[start:start + size].decode() == TOPIC
        # moving the hex cursor onto the qos byte selects the qos field
        qos = next(s for s in v.spans if s.name == "qos")
        app.hex.focus()
        await settle(pilot)
        app.hex.cursor = v.header_size + qos.offset
        await settle(pilot)
        assert app.fields.cursor_node.data.name == "qos"
        assert app.hex.select == (v.header_size + qos.offset, 1)
        # padding bytes belong to no value field: the tree shows a padding node for them
        pad = [s for s in v.spans if s.kind == "pad"]
        if pad:
            app.hex.cursor = v.header_size + pad[0].offset
            await settle(pilot)
            assert str(app.fields.cursor_node.label).startswith("padding")


async def test_edit_payload_undo_redo_save_byte_exact(v6_copy: Path) -> None:
    i = find_topic(v6_copy, TOPIC)
    before = v6_copy.read_bytes()
    with DbFile(v6_copy) as db:
        orig = [db.raw(k) for k in range(len(db))]
        old_rec = db.chunk(i).record
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.jump(i)
        await settle(pilot)
        app.fields.focus()
        select_field(app, "payload")
        await keys(pilot, "e")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("ctrl+u")
        await type_text(pilot, "21.5 C")
        await keys(pilot, "enter")
        assert app.doc.record(i)["payload"] == b"21.5 C"
        assert app.doc.view(i).edited and app.doc.is_dirty()
        assert "edited msg_store" in status(app)
        await keys(pilot, "u")
        assert app.doc.record(i)["payload"] == old_rec["payload"] and not app.doc.is_dirty()
        await keys(pilot, "U")
        assert app.doc.record(i)["payload"] == b"21.5 C"
        await keys(pilot, "ctrl+s")
        assert "saved" in status(app) and not app.doc.is_dirty()
    assert v6_copy.read_bytes() != before
    with DbFile(v6_copy) as db:
        assert len(db) == len(orig)
        for k in range(len(db)):
            if k != i:
                assert db.raw(k) == orig[k], k
        new = db.chunk(i).record
    assert new.values == {**old_rec.values, "payload": b"21.5 C"}


async def test_refused_edits_leave_the_document_clean() -> None:
    app = make_app(V6)
    i = find_topic(V6, TOPIC)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.jump(i)
        await settle(pilot)
        app.do_edit(i, "qos", "3")
        assert "out of range 0..2" in status(app)
        app.do_edit(i, "topic", "corp/\\xff/bad")
        assert "not valid UTF-8" in status(app)
        app.do_edit(i, "topic", "corp/+/wild")
        assert "wildcards" in status(app)
        app.do_edit(i, "store_id", "-1")
        assert "out of range" in status(app)
        assert not app.doc.is_dirty() and not app.doc.overlay
        app.do_edit(i, "qos", "2")
        assert app.doc.record(i)["qos"] == 2


async def test_hex_overwrite_marks_bytes_and_refuses_bad_lengths() -> None:
    app = make_app(V6)
    i = find_topic(V6, TOPIC)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.jump(i)
        await settle(pilot)
        v = app.doc.view(i)
        hs = v.header_size
        old_qos = v.record["qos"]
        qos_pos = hs + next(s.offset for s in v.spans if s.name == "qos")
        app.hex.focus()
        app.hex.cursor = qos_pos
        await settle(pilot)
        await keys(pilot, "i")  # byte-edit mode: hex digits overwrite (outside it they are commands)
        assert app.hex.editing
        await keys(pilot, "0", "2")
        v2 = app.doc.view(i)
        assert v2.record["qos"] == 2 and v2.changed_bytes() == {qos_pos}
        assert app.hex.source.changed == {qos_pos}
        assert app.hex.cursor == qos_pos + 1
        # a topic length that no longer fits the chunk is refused
        tl = hs + next(s.offset for s in v.spans if s.name == "topic_len")
        app.hex.cursor = tl
        await settle(pilot)
        await keys(pilot, "f", "f")
        assert "refused" in status(app) and app.doc.record(i)["topic"] == TOPIC
        await keys(pilot, "u")
        assert app.doc.record(i)["qos"] == old_qos and not app.doc.view(i).edited


async def test_delete_session_with_subs_and_queue(v6_copy: Path) -> None:
    counts = json.loads(Path(f"{V6}.manifest.json").read_text())["clients_observed"]["a-sub-q1"]
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.apply_filter("type:client")
        await settle(pilot)
        while app.doc.record(app.item)["client_id"] != "a-sub-q1":
            await keys(pilot, "down")
        await keys(pilot, "d")
        deleted = sorted(app.doc.overlay.deleted)
        kinds = [app.doc.record(k).kind for k in deleted]
        assert kinds.count("client") == 1
        assert kinds.count("sub") == counts["subscriptions"]
        assert kinds.count("client_msg") == counts["queued_or_inflight_messages"]
        assert "delete session 'a-sub-q1'" in status(app)
        await keys(pilot, "ctrl+s")
    with DbFile(v6_copy) as db:
        recs = [c.record for c in db.stream()]
    assert len(recs) == 90 - len(deleted)
    assert not [r for r in recs if r.get("client_id") == "a-sub-q1"]


async def test_delete_retained_message_and_restore(v6_copy: Path) -> None:
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.apply_filter("type:retain")
        await settle(pilot)
        first = app.item
        await keys(pilot, "d")
        assert app.doc.overlay.deleted == {first} and app.doc.view(first).deleted
        await keys(pilot, "d")  # again: restore
        assert not app.doc.overlay.deleted
        await keys(pilot, "u")
        assert app.doc.overlay.deleted == {first}
        await keys(pilot, "ctrl+s")
    with DbFile(v6_copy) as db:
        assert db.index.counts()[4] == 9


async def test_save_refuses_a_file_changed_on_disk(v6_copy: Path) -> None:
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.do_edit(0, "shutdown", "0")
        with open(v6_copy, "ab") as f:  # someone else (a broker) writes the file meanwhile
            f.write(b"\0")
        changed = v6_copy.read_bytes()
        await keys(pilot, "ctrl+s")
        assert "not saved" in status(app) and "changed on disk" in status(app)
        assert app.doc.is_dirty()
    assert v6_copy.read_bytes() == changed


async def test_save_as_writes_a_new_file(v6_copy: Path, tmp_path: Path) -> None:
    app = make_app(v6_copy)
    out = tmp_path / "copy.db"
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.do_edit(0, "shutdown", "0")
        await keys(pilot, "S")
        await pilot.press("ctrl+u")
        await type_text(pilot, str(out))
        await keys(pilot, "enter")
        assert app.doc.path == str(out)
    assert v6_copy.read_bytes() == V6.read_bytes()
    data = out.read_bytes()
    assert len(data) == os.path.getsize(V6)
    with DbFile(out) as db:
        assert db.chunk(0).record["shutdown"] == 0


async def test_breaking_a_reference_is_allowed_with_a_warning() -> None:
    async with running(V6) as pilot:
        app = pilot.app
        app.apply_filter("type:retain")
        await settle(pilot)
        i = app.item
        app.do_edit(i, "store_id", "999999")
        assert app.doc.record(i)["store_id"] == 999999
        assert "warning: no msg_store has store id 999999" in status(app)
        await keys(pilot, "u")
        store = app.store_columns().find_store(63)
        app.do_edit(store, "store_id", "5000")
        assert "warning: 1 client_msg/retain chunk(s) still reference store id 63" in status(app)


async def test_v4_edit_keeps_other_chunks_byte_exact(tmp_path: Path) -> None:
    """1.5.6 (db v4) stores wrong chunk lengths; an edit recomputes only the edited chunk's."""
    import shutil

    from support.paths import V4

    path = tmp_path / "v4.db"
    shutil.copyfile(V4, path)
    with DbFile(path) as db:
        orig = [db.raw(k) for k in range(len(db))]
        i = next(c.index for c in db.stream() if c.kind == "sub")
        old = db.chunk(i).record
    async with running(path) as pilot:
        app = pilot.app
        app.do_edit(i, "qos", str((old["qos"] + 1) % 3))
        await keys(pilot, "ctrl+s")
        assert "saved" in status(app)
    with DbFile(path) as db:
        assert [db.raw(k) for k in range(len(db)) if k != i] == [r for k, r in enumerate(orig) if k != i]
        new = db.chunk(i).record
    assert new.values == {**old.values, "qos": (old["qos"] + 1) % 3}


async def test_key_mashing_never_crashes(damaged_copy: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A fixed random walk over every key the app binds, on a v3 file and a damaged one."""
    import random

    from support.paths import V3

    monkeypatch.chdir(tmp_path)  # `x` then `n`, `enter` exports to ./n: keep such files out of the checkout

    rng = random.Random(4)
    pool = ["down", "up", "pagedown", "pageup", "home", "end", "tab", "shift+tab", "left", "right", "r", "d",
            "u", "U", "e", "escape", "enter", "0", "1", "a", "f", "g", "slash", "question_mark", "n", "x"]
    for path in (V3, damaged_copy):
        async with running(path, size=(80, 24)) as pilot:
            app = pilot.app
            for _ in range(50):
                await pilot.press(rng.choice(pool))
            await settle(pilot)
            assert app.is_running
        assert app.return_code in (None, 0)


async def test_add_a_copy_edit_it_undo_redo_and_save(v6_copy: Path) -> None:
    with DbFile(v6_copy) as db:
        orig = [db.raw(k) for k in range(len(db))]
        sub = next(c.index for c in db.stream() if c.kind == "sub" and c.record["client_id"] == "a-sub-q1")
        old = db.chunk(sub).record
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.jump(sub)
        await keys(pilot, "a")
        new = app.item
        assert new <= -2 and app.chunks.total() == 91 and app.chunks.cursor == sub + 1
        assert str(app.fields.root.label).startswith("sub[new]")
        app.do_edit(new, "topic", "corp/added/#")
        assert app.doc.record(new)["topic"] == "corp/added/#"
        row = "".join(seg.text for seg in app.chunks.render_line(app.chunks.cursor - app.chunks.top))
        assert row.startswith("+") and "corp/added/#" in row
        await keys(pilot, "u", "u")  # the edit, then the insertion
        assert app.chunks.total() == 90 and not app.doc.new_records
        await keys(pilot, "U", "U")
        assert app.chunks.total() == 91 and app.doc.record(new)["topic"] == "corp/added/#"
        await keys(pilot, "ctrl+s")
        assert "saved" in status(app)
    with DbFile(v6_copy) as db:
        raws = [db.raw(k) for k in range(len(db))]
        added = db.chunk(sub + 1).record
    assert len(raws) == 91 and raws[:sub + 1] == orig[:sub + 1] and raws[sub + 2:] == orig[sub + 1:]
    assert added.values == {**old.values, "topic": "corp/added/#"}


async def test_add_a_new_blank_chunk_fill_it_and_save(v6_copy: Path) -> None:
    """`A` adds a blank chunk of a chosen kind (values from the layout table); filled in, it saves as a valid chunk."""
    from codec.ops.check import check_file

    with DbFile(v6_copy) as db:
        retained = {c.record["store_id"] for c in db.stream() if c.kind == "retain"}
        store = next(c for c in db.stream() if c.kind == "msg_store" and c.record["store_id"] not in retained)
        sid, at = store.record["store_id"], store.index
        before = [f.rule for f in check_file(db, at=0) if f.severity == "error"]
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.jump(at)
        await keys(pilot, "A")
        assert isinstance(app.screen, PromptScreen)
        await type_text(pilot, "cfg")
        await keys(pilot, "enter")
        assert "a file has one cfg chunk" in status(app) and not app.doc.new_records
        assert isinstance(app.screen, PromptScreen)  # refused: the prompt stays for another kind
        await keys(pilot, "escape", "A")
        await type_text(pilot, "retain")
        await keys(pilot, "enter")
        new = app.item
        assert new <= -2 and app.chunks.cursor == at + 1 and app.doc.record(new).values == {"store_id": 0}
        assert str(app.fields.root.label).startswith("retain[new]")
        app.do_edit(new, "store_id", str(sid))
        await keys(pilot, "ctrl+s")
        assert "saved" in status(app)
    with DbFile(v6_copy) as db:
        added = db.chunk(at + 1)
        assert added.kind == "retain" and added.record.values == {"store_id": sid}
        assert [f.rule for f in check_file(db, at=0) if f.severity == "error"] == before


async def test_filters_and_search_see_unsaved_edits(v6_copy: Path) -> None:
    """Before saving, a filter or search finds chunks as edited, and inserted chunks too."""
    i = find_topic(v6_copy, TOPIC)
    async with running(v6_copy) as pilot:
        app = pilot.app
        app.jump(i)
        await settle(pilot)
        app.do_edit(i, "topic", "corp/edited/one")
        await keys(pilot, "a")  # a copy of the edited chunk, then a new blank retain after it
        copy = app.item
        app.do_edit(copy, "topic", "corp/edited/two")
        app.jump(i)
        await keys(pilot, "A")
        await type_text(pilot, "retain")
        await keys(pilot, "enter")
        blank = app.item
        assert app.doc.is_dirty() and not app.doc.overlay.deleted

        app.apply_filter("topic:corp/edited/#")  # text filter: the file is streamed
        await settle(pilot)
        rows = [int(r) for r in app.chunks.rows]
        sid = app.doc.record(i)["store_id"]
        assert rows[:2] == [i, copy] and rows[2:]  # and what references the edited store (its retain)
        assert all(app.doc.record(r).kind in ("retain", "client_msg") and app.doc.record(r)["store_id"] == sid
                   for r in rows[2:])
        app.apply_filter(f"topic:{TOPIC}")
        await settle(pilot)
        assert i not in [int(r) for r in app.chunks.rows]
        app.apply_filter("type:retain")  # no text: answered from the store-id columns
        await settle(pilot)
        rows = [int(r) for r in app.chunks.rows]
        assert blank in rows and rows.index(blank) == sum(1 for r in rows if 0 <= r <= i)
        app.clear_filter()
        await settle(pilot)

        app.jump(0)
        await settle(pilot)
        app.do_search("corp/edited/two")
        await settle(pilot)
        assert app.item == copy, status(app)
        app.jump(0)
        await settle(pilot)
        app.do_search(TOPIC)
        await settle(pilot)
        assert app.item != i


def test_filter_view_is_the_oracle_on_the_saved_file(v6_copy: Path, tmp_path: Path) -> None:
    """The rows a filter shows with unsaved edits and insertions are exactly those the per-record
    oracle keeps in the file as saved (every inserted chunk in its place): a store inserted under
    a new topic selects the references after it (in the file and inserted), not those before it."""
    from codec.views.query import Selection
    from inspector.tui.features.filters import filter_view, parse_filter
    from inspector.tui.model.document import Document

    from support.reference_selection import reference_filter

    doc = Document(str(v6_copy))
    for _ in doc.db.scan_steps():
        pass
    with DbFile(v6_copy) as db:
        chunks = list(db.stream())
    stores = [c for c in chunks if c.kind == "msg_store"]
    refs = [c for c in chunks if c.kind in ("client_msg", "retain")]
    ref = refs[len(refs) // 2]
    doc.set_field(stores[0].index, "topic", "ins/edited")  # an edit: its references follow it
    early = doc.insert_copy(stores[1].index)  # a store moved under a new topic, id of a later reference
    doc.set_field(early, "topic", "ins/early")
    doc.set_field(early, "store_id", str(ref.record["store_id"]))
    before = doc.insert_new(0, "retain")  # a reference inserted before that store: not selected
    doc.set_field(before, "store_id", str(ref.record["store_id"]))
    after_ref = doc.insert_copy(ref.index)  # a copy of the reference after it: selected
    specs = ["topic:ins/#", "topic:ins/early type:client_msg,retain", "type:retain", "topic:#", "client:nobody",
             f"store:{ref.record['store_id']}"]
    shown = {s: filter_view(doc, parse_filter(s)).tolist() for s in specs}
    order = doc.row_array(doc.count()).tolist()  # saved chunk k is this row
    assert after_ref in shown["topic:ins/#"] and ref.index in shown["topic:ins/#"] and early in shown["topic:ins/#"]
    assert before not in shown["topic:ins/#"] and before in shown["type:retain"]
    out = tmp_path / "saved.db"
    doc.save(str(out))
    doc.close()
    with DbFile(out) as db:
        saved = list(db.stream())
    assert len(saved) == len(order)
    for s in specs:
        spec = parse_filter(s)
        want = [order[c.index] for c in reference_filter(Selection(spec.kinds, list(spec.topics or []),
                                                                   set(spec.clients or ()), spec.store_ids), saved)]
        assert shown[s] == want, s
