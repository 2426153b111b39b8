"""A Mosquitto 2.1 sqlite store read directly: its rows as the engine's column batches, and check's store rules."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from codec.ops.check import check_file
from codec.store.read import StoreFile
from codec.views.query import Selection
from codec.views.select import pick

from support.cli import run_in_process
from support.paths import INCOMING, manifest
from support.stores import counts, run_sql

STORE = INCOMING / "2.1.2-a.sqlite3"
pytestmark = pytest.mark.skipif(not STORE.exists(), reason="no 2.1.2 sqlite fixture")
AT = "2026-11-23T00:00:00Z"


def test_rows_are_the_column_batches_and_the_records(store: Path) -> None:
    with StoreFile(store) as s:
        n = counts(store)
        assert {t.label: len(s.rowids(t)) for t in s.first} == {
            "msg_store": n["base_msgs"], "client": n["clients"], "client_msg": n["client_msgs"],
            "sub": n["subscriptions"], "retain": n["retains"]}
        # a batch and the records made from it agree value by value
        for t in s.first:
            recs = list(s.rows(t))
            for c in s.batches(t, size=7):
                for r in range(len(c)):
                    rec = recs[int(c.index[r]) - s.first[t]].record
                    for name, col in c.ints.items():
                        assert int(col[r]) == rec[name]
        con = sqlite3.connect(store)
        try:
            want = {(r[0], bytes(r[1] or b"")) for r in con.execute("SELECT topic, payload FROM base_msgs")}
        finally:
            con.close()
        assert {(r.record["topic"], r.record["payload"]) for r in s.rows(2)} == want


def test_pick_selects_rows_as_for_a_db(store: Path) -> None:
    with StoreFile(store) as s:
        import numpy as np

        got = pick(s, Selection(topics=["corp/retained/#"]), bad=np.zeros(0, np.int64), source=s.columns())
        kinds = Counter(s.type_of(int(i)).label for i in got.rows)
        assert kinds == {"msg_store": 9, "retain": 9}
        got = pick(s, Selection(clients={"a-sub-q1"}), bad=np.zeros(0, np.int64), source=s.columns())
        assert Counter(s.type_of(int(i)).label for i in got.rows) == {"client": 1, "client_msg": 8, "sub": 2}


def test_dump_and_export_name_table_and_rowid(store: Path, tmp_path: Path) -> None:
    r = run_in_process("dump", store, "--json", "--client", "a-sub-q1", "--at", AT)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0 and len(rows) == 11
    assert {x["table"] for x in rows} == {"clients", "client_msgs", "subscriptions"}
    assert all(x["offset"] is None and isinstance(x["rowid"], int) for x in rows)
    text = run_in_process("dump", store, "--type", "retain").stdout
    assert text.startswith("Mosquitto persist-sqlite store dump") and "\tTable: retains\n\tRowid: 1\n" in text
    out = tmp_path / "out"
    assert run_in_process("export", store, "--to", "parquet", "-o", f"{out}/").returncode == 0
    import pyarrow.parquet as pq

    m = manifest(store) if (Path(f"{store}.manifest.json")).exists() else manifest(STORE)
    assert pq.read_table(out / "client_msg.parquet").num_rows == m["table_row_counts"]["client_msgs"]
    messages = pq.read_table(out / "messages.parquet")
    assert sum(messages.column("queued").to_pylist()) == m["table_row_counts"]["client_msgs"]
    assert sum(messages.column("retained").to_pylist()) == m["table_row_counts"]["retains"]


def test_stats(store: Path) -> None:
    r = run_in_process("stats", store, "--by", "client", "--json")
    st = json.loads(r.stdout)
    assert st["format"] == "sqlite" and st["by_type"]["client_msg"]["count"] == 30
    assert st["biggest_payloads"][0]["payload_bytes"] == 102400 and "rowid" in st["biggest_payloads"][0]


def rules(store: Path) -> Counter:
    with StoreFile(store) as s:
        return Counter((f.severity, f.rule, f.chunk_type) for f in check_file(s, at=0))


def test_a_clean_store_checks_clean(store: Path, tmp_path: Path) -> None:
    """Clean with the settings of the broker that wrote it (queue_qos0_messages true); with Mosquitto's defaults
    the restore would drop the QoS 0 queue entries it holds, which check says."""
    assert rules(store) == Counter({("warning", "restore-queue", "client_msgs"): 1})
    conf = tmp_path / "mosquitto.conf"
    conf.write_text("queue_qos0_messages true\n")
    r = run_in_process("check", store, "--at", AT, "--conf", conf)
    assert r.returncode == 0 and "OK: 0 error(s), 0 warning(s)" in r.stderr, r.stdout + r.stderr


def test_the_store_rules(store: Path) -> None:
    run_sql(store,
            "DELETE FROM base_msgs WHERE store_id = (SELECT store_id FROM client_msgs WHERE client_id = 'a-sub-q1' "
            "LIMIT 1)",
            "DELETE FROM base_msgs WHERE store_id = (SELECT store_id FROM retains WHERE topic = 'corp/retained/q1')",
            "INSERT INTO subscriptions VALUES ('ghost', 'a/#', 1, 0)",
            "UPDATE base_msgs SET payloadlen = payloadlen + 1 WHERE topic = 'corp/retained/plain'",
            "UPDATE base_msgs SET properties = 'not json' WHERE topic = 'corp/retained/q2'",
            "INSERT INTO retains VALUES (123, (SELECT store_id FROM retains WHERE topic = 'corp/retained/big'))",
            "UPDATE version_info SET minor = 0",
            "DROP INDEX retains_storeid")
    got = rules(store)
    assert got[("error", "missing-message", "client_msgs")] >= 1 and got[("error", "missing-message", "retains")] == 1
    assert got[("warning", "no-session", "subscriptions")] == 1
    assert got[("error", "payloadlen", "base_msgs")] == 1 and got[("warning", "properties", "base_msgs")] == 1
    assert got[("warning", "number-topic", "retains")] == 1 and got[("warning", "retain-topic", "retains")] == 1
    assert got[("warning", "schema", None)] == 2  # version 1.0 (upgraded on start), a missing index
    r = run_in_process("check", store, "--json", "--at", AT)
    assert r.returncode == 1
    found = json.loads(r.stdout)["findings"]
    one = next(f for f in found if f["rule"] == "payloadlen")
    assert one["chunk_type"] == "base_msgs" and one["field"] == "payloadlen" and one["offset"] is None
    assert "copies" in one["message"]


def test_a_store_with_a_foreign_schema_version_fails_check(store: Path) -> None:
    run_sql(store, "UPDATE version_info SET major = 2")
    assert rules(store)[("error", "schema", None)] == 1


def test_store_records_name_the_row_each_record_comes_from(store: Path) -> None:
    """``store_records(rows=)``: per record of the .db image, the store row it was read from (the cfg: -1),
    so a chunk of the image can be shown as its row (the TUI's diff of a store)."""
    from codec.store.todb import store_records

    rows: list[int] = []
    with StoreFile(store) as s:
        recs = list(store_records(s, rows=rows))
        assert len(rows) == len(recs) and rows[0] == -1 and recs[0].kind == "cfg"
        assert sorted(rows[1:]) == sorted(set(rows[1:]))  # each row once
        for rec, number in zip(recs[1:], rows[1:], strict=True):
            assert s.chunk(number).record.values == rec.values
        assert list(store_records(s)) == recs  # the records themselves do not change


@pytest.mark.parametrize("how", ["pages", "sql"])
def test_a_table_with_more_rows_than_sqlite_counts_is_damage_not_a_crash(store: Path, how: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged b-tree can yield more rows to a scan than ``count(*)`` says (a fuzzed store did: 6,003 for 6,000).
    No batch runs past the rows counted (their numbers would be another table's), and the read ends in one
    CodecError naming the table: ``check`` printed a numpy traceback."""
    from codec.errors import CodecError
    from codec.layouts import ChunkType
    from codec.store import pages

    if how == "sql":
        monkeypatch.setattr(pages, "_btree", None)
    with StoreFile(store) as st:
        t = ChunkType.MSG_STORE
        assert st.count[t] > 2
        st.count[t] -= 2  # as if sqlite counted fewer rows than its scan finds
        got = 0
        with pytest.raises(CodecError, match=r"base_msgs: \d+ rows counted, more read: the table is damaged"):
            for c in st.batches(int(t), size=2):
                got += len(c)
                assert got <= st.count[t]
        assert got == st.count[t]
