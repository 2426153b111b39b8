"""A store's big tables read from their b-tree pages (codec.store.pages, the C reader codec._btree) are
exactly what sqlite reads, batch for batch: on the 2.1.2 broker's store, on one holding every awkward
value the plugin's loose columns allow, with payloads on overflow pages, and with a damaged page (the
page reader then leaves the rows to sqlite, which reads them or says what is wrong as before); and
``check`` and ``stats`` say the same with and without it."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from codec.layouts import ChunkType
from codec.store.pages import TABLES
from codec.store.read import StoreFile
from codec.store.schema import ORDER

pytest.importorskip("codec._btree")


def _digest(s: StoreFile, t: int, **kw: Any) -> list[tuple]:
    return [(c.index.tobytes(), c.offset.tobytes(), c.data.tobytes(), {k: v.tobytes() for k, v in c.ints.items()},
             {k: (a.tobytes(), b.tobytes()) for k, (a, b) in c.spans.items()}) for c in s.batches(t, **kw)]


def _outcome(s: StoreFile, t: int, **kw: Any) -> Any:
    try:
        return _digest(s, t, **kw)
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return type(exc).__name__, str(exc)


def _counted(s: StoreFile) -> list[bool]:
    """Per batch asked of the columnar path: whether the page reader answered it."""
    used: list[bool] = []
    real = s._read_pages

    def counted(*a: Any, **k: Any) -> Any:
        got = real(*a, **k)
        used.append(got is not None)
        return got

    s._read_pages = counted  # type: ignore[method-assign]
    return used


@pytest.fixture
def many(store: Path) -> Path:
    """The fixture store with its stores, queue entries and retains copied until they span many leaf pages
    under several levels of interior pages, some rows deleted (rowids with gaps)."""
    con = sqlite3.connect(store)
    for _ in range(7):
        con.execute("INSERT INTO base_msgs SELECT store_id + (SELECT max(store_id) FROM base_msgs), expiry_time, topic, "
                    "payload, source_id, source_username, payloadlen, source_mid, source_port, qos, retain, properties "
                    "FROM base_msgs")
        con.execute("INSERT INTO client_msgs SELECT client_id, cmsg_id, store_id, dup, direction, mid, qos, retain, state, "
                    "subscription_identifier FROM client_msgs")
    con.execute("INSERT INTO retains SELECT topic || '/' || rowid, store_id FROM retains")
    con.execute("DELETE FROM base_msgs WHERE rowid % 97 = 0")
    con.commit()
    con.close()
    return store


def _extras() -> dict[ChunkType, tuple]:
    from codec.store.check import _EXTRA

    return _EXTRA


@pytest.mark.parametrize("how", ["all", "small-pages", "sizes-only", "check-extras", "every-third", "a-run", "runs"])
def test_page_batches_are_the_rows_sqlite_reads(many: Path, how: str) -> None:
    with StoreFile(many) as fast, StoreFile(many) as slow:
        slow._pager = False  # sqlite (the columnar connection) reads every batch
        used = _counted(fast)
        for t in ORDER:
            rows = fast.rows_of(t)
            kw: dict[str, Any] = {"all": {}, "small-pages": {"size": 37}, "sizes-only": {"sizes_only": ("payload",)},
                                  "check-extras": {"sizes_only": ("payload",), "extra": _extras().get(t, ()), "size": 50},
                                  "every-third": {"rows": rows[::3]}, "a-run": {"rows": rows[1:-1]},
                                  "runs": {"rows": rows, "size": 41}}[how]
            assert _digest(fast, t, **kw) == _digest(slow, t, **kw), (t, how)
        if how not in ("every-third", "a-run"):  # scattered rows, and a run from where no read ended, are left to sqlite
            assert used and any(used)
        assert fast.counts()[ChunkType.MSG_STORE] > 500


@pytest.fixture
def odd(many: Path) -> Path:
    """Every awkward value in some row (numbers as text, texts as numbers, NULLs, reals, bytes that are not
    UTF-8, a payload on overflow pages)."""
    con = sqlite3.connect(many)
    ids = [r[0] for r in con.execute("SELECT rowid FROM base_msgs ORDER BY rowid")]
    for sql, args in (
        ("UPDATE base_msgs SET topic = 123 WHERE rowid = ?", (ids[3],)),
        ("UPDATE base_msgs SET topic = 1e3, payload = NULL, source_id = NULL WHERE rowid = ?", (ids[100],)),
        ("UPDATE base_msgs SET topic = X'FF41', source_username = X'C328' WHERE rowid = ?", (ids[200],)),
        ("UPDATE base_msgs SET properties = 'not json', qos = 300, expiry_time = 'abc' WHERE rowid = ?", (ids[300],)),
        ("UPDATE base_msgs SET properties = 17, payload = 5.5, payloadlen = 2.5 WHERE rowid = ?", (ids[400],)),
        ("UPDATE base_msgs SET payload = zeroblob(30000), payloadlen = 30000 WHERE rowid = ?", (ids[500],)),
        ("UPDATE base_msgs SET store_id = 'x' WHERE rowid = ?", (ids[600],)),
        ("UPDATE client_msgs SET store_id = NULL, client_id = 77 WHERE rowid = (SELECT min(rowid) FROM client_msgs)", ()),
        ("UPDATE retains SET store_id = NULL WHERE rowid = (SELECT min(rowid) FROM retains)", ()),
        ("UPDATE retains SET topic = 5 WHERE rowid = (SELECT max(rowid) FROM retains)", ()),
    ):
        con.execute(sql, args)
    con.commit()
    con.close()
    return many


@pytest.mark.parametrize("how", ["all", "small-pages", "check-extras", "runs"])
def test_awkward_values_read_as_sqlite_reads_them(odd: Path, how: str) -> None:
    with StoreFile(odd) as fast, StoreFile(odd) as slow:
        slow._pager = False
        used = _counted(fast)
        for t in TABLES:
            kw: dict[str, Any] = {"all": {}, "small-pages": {"size": 29},
                                  "check-extras": {"sizes_only": ("payload",), "extra": _extras().get(t, ()), "size": 64},
                                  "runs": {"rows": fast.rows_of(t), "size": 53}}[how]
            assert _outcome(fast, t, **kw) == _outcome(slow, t, **kw), (t, how)
        assert True in used and False in used  # the plain batches by pages, the awkward ones by sqlite


def _leaf_of(path: Path, table: str) -> int:
    """A leaf page of ``table`` in the middle of it (its page number)."""
    import os

    from codec import _btree

    with StoreFile(path) as s:
        root = s.con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        size, pages = s.figures.page_size, s.figures.pages
    fd = os.open(path, os.O_RDONLY)
    try:
        leaves = _btree.leaves(fd, root, size, size, pages)[0]  # (no reserved bytes at the end of a page)
    finally:
        os.close(fd)
    found = [int.from_bytes(leaves[i:i + 8], "little") for i in range(0, len(leaves), 8)]
    assert len(found) > 3
    return found[len(found) // 2]


# (damage sqlite reads the same way whatever it read before: a cell pointer past the page's content makes it read
# stray memory, which this test could not compare)
@pytest.mark.parametrize("damage", ["cell-order", "record-header", "page-flag", "freeblock", "cell-count"])
def test_a_damaged_leaf_is_left_to_sqlite(many: Path, damage: str) -> None:
    leaf = _leaf_of(many, "base_msgs")
    with StoreFile(many) as s:
        size = s.figures.page_size
    with open(many, "r+b") as f:
        at = (leaf - 1) * size
        f.seek(at)
        page = bytearray(f.read(size))
        cell = int.from_bytes(page[8:10], "big")  # the first cell
        if damage == "cell-pointer":
            page[8:10] = (size - 2).to_bytes(2, "big")
        elif damage == "record-header":
            page[cell + 3] = 0x7F  # the first cell's record header size (after 2-byte payload size and 1-byte rowid)
        elif damage == "page-flag":
            page[0] = 0x0A
        elif damage == "freeblock":
            page[1:3] = (size - 2).to_bytes(2, "big")
        else:
            page[3:5] = (0x0FFF).to_bytes(2, "big")
        f.seek(at)
        f.write(page)
    for kw in ({}, {"size": 31}, {"rows": "all", "size": 45}):
        got = []
        for pages in (True, False):
            with StoreFile(many) as s:
                if not pages:
                    s._pager = False
                k = dict(kw, rows=s.rows_of(ChunkType.MSG_STORE)) if "rows" in kw else kw
                got.append(_outcome(s, ChunkType.MSG_STORE, **k))
        assert got[0] == got[1], kw


def _findings(path: Path, pages: bool) -> list[dict]:
    from codec.store.check import check_store

    with StoreFile(path) as s:
        if not pages:
            s._pager = False
        return [dataclasses.asdict(f) for f in check_store(s, at=1_700_000_000, limit=None)]


def test_check_says_the_same_with_the_page_reader(odd: Path) -> None:
    assert _findings(odd, True) == _findings(odd, False)
    assert any(f["rule"] == "payloadlen" for f in _findings(odd, True))


@pytest.mark.parametrize("which", ["many", "odd"])
def test_stats_say_the_same_with_the_page_reader(request: pytest.FixtureRequest, which: str) -> None:
    from codec.ops.stats import compute

    path = request.getfixturevalue(which)
    got = []
    for pages in (True, False):
        with StoreFile(path) as s:
            if not pages:
                s._pager = False
            got.append(compute(s).to_json())
    assert got[0] == got[1]


def test_without_the_c_reader_sqlite_reads_every_batch(many: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import codec.store.pages as pages

    with StoreFile(many) as s:
        want = _digest(s, ChunkType.MSG_STORE, size=40)
    monkeypatch.setattr(pages, "_btree", None)
    with StoreFile(many) as s:
        used = _counted(s)
        assert _digest(s, ChunkType.MSG_STORE, size=40) == want
        assert used and not any(used) and s._pager is False
