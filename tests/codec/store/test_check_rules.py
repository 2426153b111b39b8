"""check's store rules narrowed by the scan: the same findings as the rules' SQL on the whole tables."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

import codec.store.check as store_check
from codec.store.read import StoreFile

from support.paths import INCOMING

pytestmark = pytest.mark.skipif(not (INCOMING / "2.1.2-a.sqlite3").exists(), reason="no 2.1.2 sqlite fixture")

BIG = "(SELECT store_id FROM retains WHERE topic = 'corp/retained/big')"
# every store id stays an integer: the rules are narrowed by the scan (the store ids' comparison is numbers')
REFERENCES = (
    "DELETE FROM base_msgs WHERE store_id = (SELECT store_id FROM client_msgs WHERE client_id = 'a-sub-q1' LIMIT 1)",
    "DELETE FROM base_msgs WHERE store_id = (SELECT store_id FROM retains WHERE topic = 'corp/retained/q1')",
    f"INSERT INTO retains VALUES ('corp/retained/bip', {BIG})",  # same length, one byte differs
    f"INSERT INTO retains VALUES ('corp/retained/bi', {BIG})",
    f"INSERT INTO retains VALUES ('corp/retained/big-and-longer-than-eight-bytes', {BIG})",
    f"INSERT INTO retains VALUES ('', {BIG})",
    f"INSERT INTO retains VALUES ('c', {BIG})",
    "UPDATE base_msgs SET topic = 'corp/retained/plaiN' WHERE topic = 'corp/retained/plain'",
    "INSERT INTO client_msgs (client_id, cmsg_id, store_id, dup, direction, mid, qos, retain, state, "
    "subscription_identifier) VALUES ('a-sub-q1', 9, 424242, 0, 1, 5, 1, 0, 1, 0)",
    "UPDATE base_msgs SET payloadlen = payloadlen + 1 WHERE rowid = 3",
    "UPDATE base_msgs SET payloadlen = '7' WHERE rowid = (SELECT max(rowid) FROM base_msgs)",
    "UPDATE base_msgs SET properties = 'not json' WHERE topic = 'corp/retained/q2'",
)
# a store id or topic that is not an integer or text (NULL, text, a number): the join rules run on the whole tables
ODD = (*REFERENCES, "INSERT INTO retains VALUES ('x/y', NULL)", "INSERT INTO client_msgs (client_id, store_id) "
       "VALUES ('a-sub-q1', 'seven')", "INSERT INTO retains VALUES (123, (SELECT store_id FROM base_msgs WHERE rowid = 2))",
       "INSERT INTO base_msgs (store_id, topic, payload, payloadlen) VALUES (5555, 99, NULL, NULL)")


def _damaged(tmp_path: Path, sql: tuple[str, ...]) -> Path:
    import shutil

    path = tmp_path / "mosquitto.sqlite3"
    shutil.copyfile(INCOMING / "2.1.2-a.sqlite3", path)
    con = sqlite3.connect(path)
    for stmt in sql:
        con.execute(stmt)
    con.commit()
    con.close()
    return path


def _findings(path: Path, *, narrowed: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    with monkeypatch.context() as m:
        if not narrowed:
            m.setattr(store_check, "_candidates", lambda seen: {})
        with StoreFile(path) as s:
            found = store_check.check_store(s, at=1_700_000_000)
    return [(f.severity, f.rule, f.message, f.chunk_type, f.chunk_index, f.field) for f in found]


@pytest.mark.parametrize("sql", [REFERENCES, ODD], ids=["integer-ids", "odd-values"])
def test_narrowed_rules_find_what_the_whole_tables_give(tmp_path: Path, sql: tuple[str, ...],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = _damaged(tmp_path, sql)
    seen: dict[str, np.ndarray] = {}
    real = store_check._candidates

    def spy(s: dict) -> dict[str, np.ndarray]:
        seen.update(real(s))
        return seen

    monkeypatch.setattr(store_check, "_candidates", spy)
    narrowed = _findings(path, narrowed=True, monkeypatch=monkeypatch)
    whole = _findings(path, narrowed=False, monkeypatch=monkeypatch)
    assert narrowed == whole
    rules = {f[1] for f in whole}
    assert {"missing-message", "retain-topic", "payloadlen", "properties"} <= rules
    if sql is REFERENCES:  # the scan narrowed the join rules too
        assert len([f for f in whole if f[1] == "retain-topic"]) == 6
        assert {"missing-message retains", "missing-message client_msgs", "retain-topic"} <= set(seen)
        assert len(seen["retain-topic"]) == 6
    else:
        assert "number-topic" in rules and len([f for f in whole if f[1] == "retain-topic"]) == 7
        assert "retain-topic" not in seen and "missing-message retains" not in seen and "payloadlen" in seen


def test_bytes_differ_compares_every_byte() -> None:
    rng = np.random.default_rng(7)
    sizes = rng.integers(0, 40, 3000)
    a = rng.integers(0, 3, int(sizes.sum()) + 5, dtype=np.uint8)  # small alphabet: many equal values
    astart = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    b = a.copy()
    flip = rng.random(len(b)) < 0.002
    b[flip] ^= 1
    bstart = astart.copy()
    want = np.array([a[s:s + n].tobytes() != b[s:s + n].tobytes() for s, n in zip(astart, sizes, strict=True)])
    got = store_check._bytes_differ(a, astart, b, bstart, sizes, rows=257)
    assert want.any() and not want.all()
    assert (got == want).all()


@pytest.mark.parametrize("damage", ["none", "index-page", "table-page"])
def test_quick_check_in_its_thread_says_what_it_says_in_turn(store: Path, damage: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """sqlite's quick_check runs beside the row scan on a connection of its own: the same findings, in the same
    place, as when the rules run it on the reader's connection (a damaged page included)."""
    if damage != "none":
        con = sqlite3.connect(store)
        name = "sqlite_autoindex_retains_1" if damage == "index-page" else "subscriptions"
        root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        size = con.execute("PRAGMA page_size").fetchone()[0]
        con.close()
        with open(store, "r+b") as f:  # the page's first cell pointer past its content: quick_check says so
            f.seek((root - 1) * size + 8)  # (a leaf: its cell pointers follow its 8-byte header)
            f.write(b"\x00\x05")

    def findings() -> list[tuple]:
        with StoreFile(store) as s:
            return [(f.severity, f.rule, f.message, f.chunk_type, f.chunk_index, f.field)
                    for f in store_check.check_store(s, at=1_700_000_000, limit=None)]

    threaded = findings()
    started = []
    real = store_check._QuickCheck.__init__

    def inline(self: store_check._QuickCheck, s: StoreFile) -> None:
        real(self, s)
        started.append(self.thread is not None)
        if self.thread is not None:
            self.thread.join()
            self.thread = None  # the rules run it on the reader's connection

    monkeypatch.setattr(store_check._QuickCheck, "__init__", inline)
    assert findings() == threaded
    assert started == [True]
    assert any(f[1] == "sqlite" for f in threaded) == (damage != "none")


def test_wills_the_broker_crashes_on_or_reads_past(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A will of a client without a session with a payloadlen and no payload is an error (2.1.2 crashes copying it:
    test_storemodel); a will whose payload is shorter than its payloadlen a warning; only the first is repaired."""
    path = _damaged(tmp_path, ("INSERT INTO wills VALUES ('gone-4', NULL, 'will/gone-4', 5, 0, 0, NULL)",
                               "INSERT INTO wills VALUES ('gone-1', CAST('bye' AS BLOB), 'will/gone-1', 9, 1, 1, NULL)",
                               "INSERT INTO wills VALUES ('a-idle', NULL, 'will/idle', 5, 0, 0, NULL)"))
    got = [(f[0], f[1], f[4]) for f in _findings(path, narrowed=True, monkeypatch=monkeypatch) if f[3] == "wills"]
    assert got == [("error", "will-crash", 1), ("warning", "will", 2), ("warning", "payloadlen", 2)]
