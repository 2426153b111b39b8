"""The topic tree (t) and the sessions view (s): their numbers are stats', their edits are the CLI's.

Deleting a node saves the bytes `rm-retained 'NODE/#'` writes; dropping a session the bytes of
`drop-client`, trimming its queue the bytes of `trim-queue --client ID --keep-newest N`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable, Tree

from codec.sources import open_any
from inspector.tui.features.sessions import SessionsScreen
from inspector.tui.features.tree import TopicTreeScreen
from inspector.tui.model.sessions import session_rows
from inspector.tui.screens.prompt import PromptScreen

from support.benchfile import big_db
from support.clock import AT
from support.paths import REAL_FILES, ROOT, SQLITE_STORES, V6
from support.tui import keys, running, settle, status, type_text


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r


async def tree_line(pilot, topic: str):  # type: ignore[no-untyped-def]
    """The tree widget's node of ``topic`` (opened on the way), with the cursor on it."""
    app = pilot.app
    widget = app.screen.query_one(Tree)
    node = widget.root
    for level in topic.split("/"):
        node.expand()
        app.screen.fill(node)
        node = next(c for c in node.children if c.data.name == level)
    await settle(pilot)  # the lines are laid out
    widget.move_cursor(node)
    await settle(pilot)
    assert widget.cursor_node is node
    return node


async def test_tree_enter_filters_to_the_node_and_d_deletes_as_rm_retained(v6_copy: Path, tmp_path: Path) -> None:
    want = tmp_path / "cli.db"
    cli("rm-retained", str(v6_copy), "corp/retained/#", "-o", str(want))
    async with running(v6_copy, size=(130, 40)) as pilot:
        app = pilot.app
        await keys(pilot, "t")
        assert isinstance(app.screen, TopicTreeScreen)
        widget = app.screen.query_one(Tree)
        first = [c.data.name for c in widget.root.children]
        assert first == ["corp"]
        await tree_line(pilot, "corp")
        await keys(pilot, "space")  # opens it, biggest first
        corp = widget.cursor_node
        assert [c.data.name for c in corp.children][:2] == ["retained", "plain"]
        await keys(pilot, "o")  # by name
        assert [c.data.name for c in widget.root.children] == ["corp"]
        await tree_line(pilot, "corp/v5")
        await keys(pilot, "enter")
        assert not isinstance(app.screen, TopicTreeScreen)
        assert app.filter_text == "topic:corp/v5/#"
        stored = {app.doc.record(int(r))["topic"] for r in app.chunks.rows if app.doc.record(int(r)).kind == "msg_store"}
        assert stored == {"corp/v5/a", "corp/v5/retained"}
        await keys(pilot, "escape", "t")
        await tree_line(pilot, "corp/retained")
        await keys(pilot, "d")
        assert "delete the 9 retained message(s) under corp/retained/#" in status(app)
        assert len(app.doc.undo_stack) == 1
        await keys(pilot, "u")
        assert not app.doc.overlay.deleted
        await keys(pilot, "U", "ctrl+s")
        assert status(app).startswith("saved"), status(app)
    assert v6_copy.read_bytes() == want.read_bytes()


async def test_tree_numbers_are_the_files_as_tree_and_stats_count_them() -> None:
    async with running(V6, size=(130, 40)) as pilot:
        await keys(pilot, "t")
        node = (await tree_line(pilot, "corp/retained")).data
    data = json.loads(cli("tree", str(V6), "--prefix", "corp/retained", "--json", "--depth", "0").stdout)["tree"]
    assert (node.total.stores, node.total.retained, node.total.queued, node.total.bytes) == (
        data["stores"], data["retained"], data["queued"], data["bytes"])


def select_client(app, name: str) -> None:  # type: ignore[no-untyped-def]
    screen = app.screen
    k = next(k for k, r in enumerate(screen.shown) if r.name == name)
    screen.query_one(DataTable).move_cursor(row=k)


async def test_sessions_view_sorted_by_queue_drop_is_drop_client(v6_copy: Path, tmp_path: Path) -> None:
    want = tmp_path / "cli.db"
    cli("drop-client", str(v6_copy), "a-sub-q1", "-o", str(want))
    async with running(v6_copy, size=(140, 40)) as pilot:
        app = pilot.app
        await keys(pilot, "s")
        assert isinstance(app.screen, SessionsScreen)
        shown = app.screen.shown
        assert [r.queued_bytes for r in shown] == sorted((r.queued_bytes for r in shown), reverse=True)
        await keys(pilot, "o")  # by queued count
        assert [r.queued for r in app.screen.shown] == sorted((r.queued for r in app.screen.shown), reverse=True)
        select_client(app, "a-sub-q1")
        await keys(pilot, "enter")
        assert app.filter_text == "client:a-sub-q1"
        await keys(pilot, "escape", "s")
        select_client(app, "a-sub-q1")
        await keys(pilot, "d")
        assert "delete session 'a-sub-q1'" in status(app)
        await keys(pilot, "u")
        assert not app.doc.overlay.deleted
        await keys(pilot, "U", "ctrl+s")
        assert status(app).startswith("saved"), status(app)
    assert v6_copy.read_bytes() == want.read_bytes()


@pytest.mark.parametrize("keep", [0, 2])
async def test_sessions_view_trim_is_trim_queue(v6_copy: Path, tmp_path: Path, keep: int) -> None:
    want = tmp_path / "cli.db"
    cli("trim-queue", str(v6_copy), "--client", "a-sub-q1", "--keep-newest", str(keep), "-o", str(want))
    async with running(v6_copy, size=(140, 40)) as pilot:
        app = pilot.app
        await keys(pilot, "s")
        select_client(app, "a-sub-q1")
        await keys(pilot, "t")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("ctrl+u")
        await type_text(pilot, "-1")
        await keys(pilot, "enter")
        assert isinstance(app.screen, PromptScreen)  # refused, still open
        await pilot.press("ctrl+u")
        await type_text(pilot, str(keep))
        await keys(pilot, "enter")
        assert "trim the queue of 'a-sub-q1'" in status(app), status(app)
        assert len(app.doc.undo_stack) == 1
        await keys(pilot, "ctrl+s")
        assert status(app).startswith("saved"), status(app)
    assert v6_copy.read_bytes() == want.read_bytes()


@pytest.mark.parametrize("path", REAL_FILES + SQLITE_STORES, ids=lambda p: p.name)
def test_sessions_rows_equal_stats_by_client(path: Path) -> None:
    sessions_equal_stats(path)


def test_sessions_rows_of_the_big_file_equal_stats_by_client(tmp_path_factory: pytest.TempPathFactory) -> None:
    sessions_equal_stats(big_db(tmp_path_factory))


def sessions_equal_stats(path: Path) -> None:
    """The sessions view's rows (and generated-id groups) are `stats --by client`'s."""
    stats = json.loads(cli("stats", str(path), "--by", "client", "--top", "1000000", "--json",
                           "--at", str(int(AT))).stdout)["clients"]
    with open_any(str(path)) as db:
        if hasattr(db, "scan_steps"):
            for _ in db.scan_steps():
                pass
        rows, groups = session_rows(db, AT)
    got = {}
    for r in rows:
        key = r.name if not r.is_group else ("group", r.name)
        got[key] = (r.subscriptions, r.queued, r.queued_bytes, r.in_flight, r.incoming)
    want = {}
    for r in stats["clients"]:
        key = r["client_id"] if "client_id" in r else ("group", r["group"])
        want[key] = (r["subscriptions"], r["queued"], r["queued_bytes"], r["in_flight"], r["incoming"])
    assert got == want
    assert sum(len(g) for g in groups.values()) == stats["generated_ids"]


async def test_store_sessions_view_drops_a_session(tmp_path: Path) -> None:
    store = tmp_path / "mosquitto.sqlite3"
    shutil.copyfile(SQLITE_STORES[0], store)
    async with running(store, size=(140, 40)) as pilot:
        app = pilot.app
        await keys(pilot, "s")
        select_client(app, "a-sub-q1")
        await keys(pilot, "d")
        assert "delete session 'a-sub-q1'" in status(app)
        await keys(pilot, "ctrl+s")
        assert "saved" in status(app)
    with open_any(str(store)) as db:
        assert not [r for r in db.records() if r.get("client_id") == "a-sub-q1"]


async def test_sessions_view_lists_the_biggest_rows_and_counts_the_rest(v6_copy: Path) -> None:
    from inspector.tui.model.sessions import SessionRow

    rows = [SessionRow(f"c{i:04d}", 1, 1, i, 10 * i, 0, 0) for i in range(SessionsScreen.LIMIT + 50)]
    async with running(v6_copy, size=(140, 40)) as pilot:
        app = pilot.app
        app.push_screen(SessionsScreen(rows, AT), app.session_chosen)
        await settle(pilot)
        screen = app.screen
        assert len(screen.shown) == SessionsScreen.LIMIT + 1
        assert screen.shown[0].name == f"c{SessionsScreen.LIMIT + 49:04d}"  # the biggest queue first
        assert screen.shown[-1] is None  # "… 50 more rows"
        screen.query_one(DataTable).move_cursor(row=SessionsScreen.LIMIT)
        await keys(pilot, "d", "enter")
        assert isinstance(app.screen, SessionsScreen) and not app.doc.is_dirty()


async def test_a_level_with_many_children_opens_a_page_at_a_time(tmp_path: Path) -> None:
    """A node shows PAGE children, then "… N more"; Enter on that line shows the next page in its place (never a
    filter), ``d`` on it deletes nothing, and every child is reachable, biggest first."""
    from inspector.tui.features.tree import PAGE, More

    from support.crafted import cfg, db, msg_store_v5, retain

    n = 2 * PAGE + 7
    chunks = [cfg(6, n)]
    for i in range(1, n + 1):  # payload sizes grow with i: biggest first is n, n-1, ...
        chunks += [msg_store_v5(i, topic=b"fleet/dev%04d" % i, payload=b"x" * i), retain(6, i)]
    path = tmp_path / "many.db"
    path.write_bytes(db(6, *chunks))
    async with running(path, size=(130, 40)) as pilot:
        app = pilot.app
        await keys(pilot, "t")
        widget = app.screen.query_one(Tree)
        fleet = await tree_line(pilot, "fleet")
        await keys(pilot, "space")  # opens it: a page of children
        kids = fleet.children
        assert len(kids) == PAGE + 1 and isinstance(kids[-1].data, More) and kids[-1].data.left == n - PAGE
        assert [k.data.name for k in kids[:3]] == [f"dev{n:04d}", f"dev{n - 1:04d}", f"dev{n - 2:04d}"]
        widget.move_cursor(kids[-1])
        await settle(pilot)
        assert widget.cursor_node is kids[-1]
        await keys(pilot, "d")
        assert isinstance(app.screen, TopicTreeScreen) and not app.doc.is_dirty()
        await keys(pilot, "enter")
        assert isinstance(app.screen, TopicTreeScreen) and not app.filter_text
        kids = fleet.children
        assert len(kids) == 2 * PAGE + 1 and isinstance(kids[-1].data, More) and kids[-1].data.left == n - 2 * PAGE
        widget.move_cursor(kids[-1])
        await settle(pilot)
        await keys(pilot, "enter")
        names = [k.data.name for k in fleet.children]
        assert len(names) == n and not any(isinstance(k.data, More) for k in fleet.children)
        assert names == [f"dev{i:04d}" for i in range(n, 0, -1)]
