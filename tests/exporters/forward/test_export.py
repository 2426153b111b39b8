"""Export of real fixtures to stream files: every message once, values as stored, selections."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from codec import ChunkType, Record
from exporters.forward.content import ForwardError, MessageTooLarge, batches, make_id, message_map, salt_of
from exporters.forward.frames import HANDSHAKE, iter_packets
from inspector.commands import UsageError
from inspector.commands.shared.forward_export import run_forward_export

from support.cli import run
from support.forward import db_stores, export_args, make_db, stream_messages
from support.paths import REAL, REAL_FILES, UNIT_FILES, manifest


def _export(tmp_path, files, **kw) -> bytes:
    out = tmp_path / "out.fwd"
    assert run_forward_export(export_args(files, "msgpack", output=str(out), **kw)) == 0
    return out.read_bytes()


def test_store_mode_round_trip(real_file, tmp_path) -> None:
    data = _export(tmp_path, [real_file], batch=7)
    packets = list(iter_packets([data]))
    assert packets[0].type == 0 and all(p.type == 1 and not p.ack for p in packets[1:])
    msgs = [m for p in packets for m in p.messages()]
    stores = db_stores(real_file)
    counts = manifest(real_file)["chunk_counts"]
    assert len(msgs) == len(stores) == counts["DB_CHUNK_MSG_STORE"]
    assert len(packets) - 1 == -(-len(msgs) // 7)
    assert sorted(m.store_id for m in msgs) == sorted(stores)  # every stored message exactly once
    for m in msgs:
        rec = stores[m.store_id]
        assert (m.topic, m.payload, m.qos, m.retain, m.dup) == (rec["topic"], rec["payload"], rec["qos"],
                                                               rec["retain"] != 0, False)
        assert m.from_ == (rec["source_id"] or "")
    retained = {r["topic"]: r for r in manifest(real_file)["workload"]["retained"]}
    flagged = {m.topic for m in msgs if m.retain}
    assert set(retained) <= flagged


def test_retained_only_matches_the_manifest(real_file, tmp_path) -> None:
    msgs = stream_messages(_export(tmp_path, [real_file], kind=["retained"]))
    retained = {r["topic"]: r for r in manifest(real_file)["workload"]["retained"]}
    assert sorted(m.topic for m in msgs) == sorted(retained)
    for m in msgs:
        r = retained[m.topic]
        assert m.retain and m.qos == r["qos"] and len(m.payload) == r["payload_len"]
        assert hashlib.sha256(m.payload).hexdigest() == r["payload_sha256"]


def _out_counts(real_file, client: str | None = None, incoming: bool = False) -> Counter:
    want = Counter()
    for cid, by in manifest(real_file)["client_messages_by_qos_direction_state"].items():
        if client is not None and cid != client:
            continue
        for key, n in by.items():
            qos, direction, _ = key.split("/")
            if direction == "dir1" or incoming:
                want[int(qos[3:])] += n
    return want


def test_delivery_mode_one_message_per_outgoing_queue_entry(real_file, tmp_path) -> None:
    msgs = stream_messages(_export(tmp_path, [real_file], mode="delivery"))
    assert Counter(m.qos for m in msgs) == _out_counts(real_file)
    stores = db_stores(real_file)
    for m in msgs:
        rec = stores[m.store_id]
        assert (m.topic, m.payload) == (rec["topic"], rec["payload"])
    with_in = stream_messages(_export(tmp_path, [real_file], mode="delivery", incoming=True))
    assert Counter(m.qos for m in with_in) == _out_counts(real_file, incoming=True)
    assert len(with_in) == len(msgs) + 1  # the raw client's QoS 2 PUBLISH awaiting PUBREL
    (extra,) = set(with_in) - set(msgs)
    assert extra.topic == "corp/incoming/q2" and extra.qos == 2


def test_delivery_mode_per_client_and_retain_flag(tmp_path) -> None:
    f = REAL / "2.0.20-a.db"
    q1 = stream_messages(_export(tmp_path, [f], mode="delivery", client=["a-sub-q1"]))
    assert Counter(m.qos for m in q1) == _out_counts(f, "a-sub-q1") == Counter({1: 8})
    v5 = stream_messages(_export(tmp_path, [f], mode="delivery", client=["a-sub-v5"]))
    # corp/v5/retained was queued to a-sub-v5 with the retain flag kept (retain-as-published)
    assert {m.topic: m.retain for m in v5}["corp/v5/retained"] is True
    assert sum(m.retain for m in v5) == 1
    # a topic filter selects deliveries through their stored message
    plain = stream_messages(_export(tmp_path, [f], mode="delivery", topic=["corp/plain/q1"]))
    assert len(plain) == 10 and {m.topic for m in plain} == {"corp/plain/q1"}  # a-sub-q1 and a-ünï-客户端, 5 each
    assert len({m.id for m in plain}) == 5  # fan-out copies share the store's id
    mine = stream_messages(_export(tmp_path, [f], mode="delivery", topic=["corp/plain/q1"], client=["a-sub-q1"]))
    assert sorted(m.id for m in mine) == sorted({m.id for m in plain})


def test_store_mode_selections(tmp_path) -> None:
    f = REAL / "2.0.20-a.db"
    stores = db_stores(f)
    msgs = stream_messages(_export(tmp_path, [f], topic=["corp/plain/+"]))
    want = sorted(s for s, r in stores.items() if r["topic"].startswith("corp/plain/"))
    assert sorted(m.store_id for m in msgs) == want and len(want) == 10  # 5xq1, 4xq2, 1xq0
    queued = stream_messages(_export(tmp_path, [f], client=["a-sub-q2"]))
    assert len(queued) == 6 and {m.topic for m in queued} >= {"corp/x/deep/y", "corp/ünïcødé/ß"}
    both = stream_messages(_export(tmp_path, [f], client=["a-sub-q2"], topic=["corp/plain/#"]))
    assert {m.topic for m in both} == {"corp/plain/q2"} and len(both) == 4


def test_several_files_one_stream(tmp_path) -> None:
    data = _export(tmp_path, REAL_FILES, batch=1000)
    msgs = stream_messages(data)
    assert len(msgs) == sum(manifest(f)["chunk_counts"]["DB_CHUNK_MSG_STORE"] for f in REAL_FILES)
    assert data.count(HANDSHAKE) >= 1 and data[:3] == HANDSHAKE


def test_cli_export_matches_the_library(tmp_path) -> None:
    f = REAL / "1.6.10-a.db"
    lib = _export(tmp_path, [f], mode="delivery", batch=4)
    out = tmp_path / "cli.fwd"
    r = run("export", str(f), "--to", "msgpack", "-o", str(out), "--mode", "delivery", "--batch", "4", text=False)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == lib
    assert b"exported 29 messages in 8 forward packets" in r.stderr
    r = run("export", str(f), "--to", "msgpack", "-o", str(out), "--kind", "client", text=False)
    assert r.returncode == 2 and b"--kind retained" in r.stderr
    r = run("export", str(f), "--to", "msgpack", text=False)
    assert r.returncode == 2 and b"needs -o" in r.stderr
    r = run("export", str(f), "--to", "forward://nohost", text=False)
    assert r.returncode == 2 and b"forward://HOST:PORT" in r.stderr


def _bad_topic_db(tmp_path):
    recs = [Record(ChunkType.CFG, {"shutdown": 1, "dbid_size": 8, "last_db_id": 3}, 6)]
    for sid, topic in ((1, "ok/1"), (2, "bad/\udcff"), (3, "ok/3")):
        recs.append(Record(ChunkType.MSG_STORE, {"store_id": sid, "source_id": "c", "topic": topic, "qos": 1,
                                                 "retain": 0, "payload": b"p"}, 6))
    return make_db(tmp_path / "bad.db", recs, mtime=1_700_000_000)


def test_invalid_utf8_topic_is_skipped_and_reported(tmp_path) -> None:
    db = _bad_topic_db(tmp_path)
    out = tmp_path / "o.fwd"
    r = run("export", str(db), "--to", "msgpack", "-o", str(out), text=False)
    assert r.returncode == 0
    assert [m.topic for m in stream_messages(out.read_bytes())] == ["ok/1", "ok/3"]
    assert b"skipped msg_store[2] at offset" in r.stderr and b"(store 2): topic is not valid UTF-8" in r.stderr
    assert b"exported 2 messages in 1 forward packets" in r.stderr and b"1 skipped" in r.stderr
    r = run("export", str(db), "--to", "msgpack", "-o", str(tmp_path / "s.fwd"), "--strict", text=False)
    assert r.returncode == 1 and b"topic is not valid UTF-8 (--strict)" in r.stderr
    assert not (tmp_path / "s.fwd").exists()  # nothing half-written


def test_a_stores_skipped_message_is_named_by_the_store(tmp_path) -> None:
    """A 2.1 store is read through a temporary .db of its records: a message skipped there is named by the store the
    user gave and its store id, not by the temporary file's chunk number and offset."""
    import shutil
    import sqlite3

    from support.paths import SQLITE_STORES

    if not SQLITE_STORES:
        pytest.skip("no sqlite store fixture")
    store = tmp_path / "mosquitto.sqlite3"
    shutil.copyfile(SQLITE_STORES[0], store)
    with sqlite3.connect(store) as c:
        sid = c.execute("SELECT store_id FROM base_msgs ORDER BY rowid LIMIT 1").fetchone()[0]
        c.execute("UPDATE base_msgs SET qos = 7 WHERE store_id = ?", (sid,))
    c.close()
    r = run("export", store, "--to", "msgpack", "-o", tmp_path / "o.fwd")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stderr.splitlines() if "skipped" in ln and "qos 7" in ln)
    assert f"{store}: skipped a stored message (store {sid}): qos 7 is not 0-2" in line, line
    assert "offset" not in line and "mosqdb-sqlite-" not in r.stderr


def _maps(sizes: list[int]) -> list[dict]:
    return [message_map(make_id(1_700_000_000_000, i + 1), 0, False, False, "", f"t/{i}", b"x" * n,
                        1_700_000_000_000) for i, n in enumerate(sizes)]


def test_batches_respect_count_and_byte_limits() -> None:
    maps = _maps([10, 500, 10, 10, 900, 10, 10])
    limit = 1200
    out = list(batches(maps, 3, limit=limit))
    assert [b.count for b in out] == [3, 2, 1, 1]  # the group over the limit is split exactly
    assert all(len(b.content) <= limit for b in out)
    out = list(batches(maps, 1000, limit=limit))
    assert all(len(b.content) <= limit for b in out) and [b.count for b in out] == [4, 2, 1]
    got = [m.to_map() for b in out for m in stream_messages(HANDSHAKE + _frame(b.content))]
    assert got == maps


def _frame(content: bytes) -> bytes:
    from exporters.forward.frames import encode_forward

    return encode_forward(content)


def test_too_large_message_is_skipped_or_fails_strict() -> None:
    maps = _maps([10, 5000, 10])
    reports: list[str] = []
    out = list(batches(maps, 10, limit=1000, report=reports.append))
    assert [b.count for b in out] == [2]
    assert len(reports) == 1 and "store 2" in reports[0] and "too large" in reports[0]
    with pytest.raises(MessageTooLarge, match="store 2"):
        list(batches(maps, 10, limit=1000, strict=True))
    with pytest.raises(ForwardError):
        list(batches(maps, 0))


@pytest.mark.parametrize("mode", ["store", "delivery"])
def test_columnar_and_codec_readers_agree(mode: str, tmp_path) -> None:
    from codec import DbFile
    from exporters.forward.source import MessageSource, Options

    files = [*REAL_FILES, _bad_topic_db(tmp_path)]
    for f in files:
        with DbFile(f) as db:
            fast = list(MessageSource(db, Options(mode=mode, incoming=True)))
            slow = list(MessageSource(db, Options(mode=mode, incoming=True), columnar=False))
        assert fast == slow and (fast or mode == "delivery")


def test_a_real_replacement_character_is_exported(tmp_path) -> None:
    recs = [Record(ChunkType.CFG, {"shutdown": 1, "dbid_size": 8, "last_db_id": 2}, 6),
            Record(ChunkType.MSG_STORE, {"store_id": 1, "source_id": "c\ufffd", "topic": "a/\ufffd", "qos": 0,
                                         "retain": 1, "payload": b""}, 6)]
    db = make_db(tmp_path / "fffd.db", recs)
    (m,) = stream_messages(_export(tmp_path, [db]))
    assert (m.topic, m.from_, m.retain) == ("a/\ufffd", "c\ufffd", True)


@pytest.mark.parametrize("path", UNIT_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_unit_fixtures_export_or_fail_in_one_line(path, tmp_path, capsys) -> None:
    from codec import DbFile
    from codec.errors import CodecError
    from inspector.cli import main

    out = tmp_path / "u.fwd"
    rc = main(["export", str(path), "--to", "msgpack", "-o", str(out), "--mode", "delivery", "--incoming"])
    err = capsys.readouterr().err.strip().splitlines()
    if rc == 0:
        stores = 0
        with DbFile(path) as db:
            if not db.empty:
                stores = db.index.counts().get(int(ChunkType.CLIENT_MSG), 0)
        assert len(stream_messages(out.read_bytes())) <= stores
        assert out.read_bytes()[:3] == HANDSHAKE
    else:
        assert rc in (1, 2) and len(err) == 1 and err[0].startswith(f"mosqdb export: {path}: offset ")
        assert not out.exists()
        with pytest.raises(CodecError), DbFile(path) as db:
            list(db.stream())


def test_damaged_db_exports_nothing_and_names_the_chunk(tmp_path) -> None:
    src = (REAL / "2.0.20-a.db").read_bytes()
    bad = tmp_path / "cut.db"
    bad.write_bytes(src[:60000])
    out = tmp_path / "cut.fwd"
    r = run("export", str(bad), "--to", "msgpack", "-o", str(out), text=False)
    assert r.returncode == 1 and not out.exists()
    line = r.stderr.decode().strip()
    assert line.startswith(f"mosqdb export: {bad}: offset 1999 (0x7cf): msg_store[21].payload")
    assert line.endswith("payload needs 102400 bytes but only 58001 remain") and "\n" not in line


def test_progress_position_covers_every_input() -> None:
    from contextlib import ExitStack

    from inspector.commands.shared.forward_export import Run, options_from

    args = export_args(REAL_FILES[:2], "msgpack", output="-", batch=5)
    seen: list[int] = []
    with ExitStack() as stack:
        run = Run(args, options_from(args), stack, print)
        for _ in run.batches():
            seen.append(run.position())
        assert seen == sorted(seen) and 0 < seen[0] < run.total_bytes()
        assert run.position() == run.total_bytes() == sum(f.stat().st_size for f in REAL_FILES[:2])


def test_id_salt_and_usage_errors(tmp_path) -> None:
    f = REAL / "1.5.6-a.db"
    plain = stream_messages(_export(tmp_path, [f]))
    salted = stream_messages(_export(tmp_path, [f], id_salt="broker-a"))
    assert [m.id[:16] + m.id[20:] for m in plain] == [m.id[:16] + m.id[20:] for m in salted]
    assert {m.id[16:20] for m in salted} == {f"{salt_of('broker-a'):04X}"}
    for kw, text in ((dict(ack=True), "--ack and --heartbeat"), (dict(batch_size=0), "--batch-size must be at least 1"),
                     (dict(incoming=True), "--incoming needs --mode delivery"),
                     (dict(reference_time="yesterday"), "--reference-time yesterday: "),
                     (dict(topic=["a/#/b"]), "not a valid MQTT topic filter")):
        with pytest.raises(UsageError, match=text):
            run_forward_export(export_args([f], "msgpack", output=str(tmp_path / "u.fwd"), **kw))
