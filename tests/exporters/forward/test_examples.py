"""The worked examples of docs/forward-packet.md, byte for byte, and the id/timestamp rules."""

from __future__ import annotations

import os
import socket

import pytest

from codec import ChunkType, DbFile, Record
from exporters.forward.content import MAX_VBI, ForwardError, batches, make_id, salt_of
from exporters.forward.frames import (
    HANDSHAKE,
    HEARTBEAT,
    FrameDecoder,
    Incomplete,
    decode_vbi,
    encode_forward,
    encode_vbi,
)
from exporters.forward.net import Listener
from exporters.forward.source import MessageSource, Options, clock_time_ms
from inspector.commands.shared.forward_export import run_forward_export

from support.cli import run
from support.forward import EX2_MS, S1, S2, doc_example, example3_db, export_args, make_db
from support.paths import UNIT, manifest, writer

V6_STORE = UNIT / "persist_read" / "v6-message-store.test-db"


def test_example1_handshake_and_heartbeat_bytes() -> None:
    assert bytes.fromhex("02 00 01") == HANDSHAKE
    assert bytes.fromhex("01 20") == HEARTBEAT
    hs, hb = FrameDecoder().feed(HANDSHAKE + HEARTBEAT)
    assert (hs.type, hs.flags, hs.version, hs.size) == (0, 0, 1, 3)
    assert (hb.type, hb.offset, hb.size) == (2, 3, 2)


def test_example1_exchange_with_the_listener() -> None:
    with Listener().start() as lis, socket.create_connection(("127.0.0.1", lis.port), timeout=5) as s:
        s.sendall(bytes.fromhex("02 00 01"))
        assert s.recv(1) == b"\xff"
        s.sendall(bytes.fromhex("01 20"))
        assert s.recv(1) == b"\xff"


def test_example2_store_mode_with_ack() -> None:
    with DbFile(V6_STORE) as db:
        maps = list(MessageSource(db, Options(reference_ms=EX2_MS)))
    assert maps == [{"id": "00060820BC882E680000000000000001", "qos": 2, "flags": {"dup": False, "retain": True},
                     "from": "source_id", "topic": "topic", "payload": b"payload", "timestamp": EX2_MS}]
    (batch,) = batches(maps)
    assert len(batch.content) == 127
    wire = encode_forward(batch.content, ack=True)
    assert wire == doc_example(2)
    assert len(wire) == 131 and wire[:4] == bytes.fromhex("81 01 11 7F")


def test_example2_through_the_cli(tmp_path) -> None:
    out = tmp_path / "ex2.fwd"
    r = run("export", str(V6_STORE), "--to", "msgpack", "-o", str(out), "--reference-time", str(EX2_MS), text=False)
    assert r.returncode == 0, r.stderr
    expected = bytearray(doc_example(2))
    expected[2] = 0x10  # a stream file's forward packets carry no ACK flag
    assert out.read_bytes() == HANDSHAKE + bytes(expected)
    assert b"exported 1 messages in 1 forward packets (134 bytes)" in r.stderr
    # ISO form of the same reference time
    r = run("export", str(V6_STORE), "--to", "msgpack", "-o", "-", "--reference-time",
            "2023-10-20T07:22:35.281Z", "-q", text=False)
    assert r.stdout == HANDSHAKE + bytes(expected)


def test_example3_delivery_and_store_messages_no_ack(tmp_path) -> None:
    path = example3_db(tmp_path / "v6-props.db")
    with DbFile(path) as db:
        delivered = list(MessageSource(db, Options(mode="delivery")))
        retained = list(MessageSource(db, Options(retained_only=True)))
    assert [m["timestamp"] for m in delivered + retained] == [1669799725441, 1669799726635]
    (batch,) = batches(delivered + retained)
    assert len(batch.content) == 300
    assert encode_forward(batch.content, ack=False) == doc_example(3)


def test_example3_via_run_forward_export(tmp_path) -> None:
    path = example3_db(tmp_path / "v6-props.db")
    out = tmp_path / "d.fwd"
    assert run_forward_export(export_args([path], "msgpack", output=str(out), mode="delivery")) == 0
    ex = doc_example(3)
    # the delivery message alone: same map bytes as in the doc's batch (after array header 0x92)
    data = out.read_bytes()
    first_map = ex[6:0xAA]  # offsets 0x06..0xA9 of the dump hold message 1
    assert data.endswith(first_map)
    assert data[:9] == HANDSHAKE + bytes.fromhex("A8 01 10 A5 01 91")  # 168-byte packet, 165-byte content


@pytest.mark.parametrize("n,encoded", [
    (0, "00"), (127, "7F"), (128, "80 01"), (300, "AC 02"), (303, "AF 02"), (16383, "FF 7F"),
    (16384, "80 80 01"), (2097151, "FF FF 7F"), (2097152, "80 80 80 01"), (MAX_VBI, "FF FF FF 7F"),
])
def test_vbi_boundaries(n: int, encoded: str) -> None:
    b = bytes.fromhex(encoded)
    assert encode_vbi(n) == b
    assert decode_vbi(b, 0, len(b)) == (n, len(b))
    with pytest.raises(Incomplete):
        decode_vbi(b[:-1], 0, len(b) - 1)


def test_vbi_limits() -> None:
    with pytest.raises(ForwardError, match="268435455"):
        encode_vbi(MAX_VBI + 1)
    with pytest.raises(ForwardError, match="longer than 4 bytes") as e:
        decode_vbi(bytes.fromhex("AA FF FF FF FF 01"), 1, 6, base=100)
    assert e.value.offset == 101
    assert decode_vbi(bytes.fromhex("80 00"), 0, 2) == (0, 2)  # overlong accepted, as EMQX does


def test_ids_and_clock_times() -> None:
    assert make_id(EX2_MS, 1) == "00060820BC882E680000000000000001"
    assert make_id(1669799725441, S1) == "0005EEAC8B7B1FE80000F8F54E34A2A7"
    assert clock_time_ms(S1) == 1669799725441 and clock_time_ms(S2) == 1669799726635
    salted = make_id(EX2_MS, 1, salt_of("broker-a"))
    assert salted[:16] == "00060820BC882E68" and salted[20:] == "000000000001" and salted[16:20] != "0000"
    assert salt_of("broker-a") != salt_of("broker-b")


def _one_store(tmp_path, store_id: int, mtime: int):
    recs = [Record(ChunkType.CFG, {"shutdown": 1, "dbid_size": 8, "last_db_id": store_id}, 6),
            Record(ChunkType.MSG_STORE, {"store_id": store_id, "source_id": None, "topic": "t", "qos": 0,
                                         "retain": 0, "payload": b""}, 6)]
    path = make_db(tmp_path / f"s{store_id}.db", recs, mtime=mtime)
    with DbFile(path) as db:
        (m,) = MessageSource(db, Options())
    return m


def test_counter_store_ids_take_the_file_time(tmp_path) -> None:
    # a 2.0 counter (small) decodes to the 2.1 epoch base: not plausible, the file's mtime is used
    m = _one_store(tmp_path, 83, 1_700_000_000)
    assert m["timestamp"] == 1_700_000_000_000 and m["from"] == "" and m["payload"] == b""
    assert m["id"] == f"{1_700_000_000_000_000:016X}{83:016X}"


def test_clock_ids_after_the_file_time_are_not_plausible(tmp_path) -> None:
    # S1 encodes 2022-11-30; a file last written 2022-11-01 cannot hold it
    assert _one_store(tmp_path, S1, 1667260800)["timestamp"] == 1667260800000
    assert _one_store(tmp_path, S1, 1669852800)["timestamp"] == 1669799725441


def test_reference_time_is_the_mtime_of_real_files(real_file) -> None:
    with DbFile(real_file) as db:
        maps = list(MessageSource(db, Options()))
    mtime_ms = os.stat(real_file).st_mtime_ns // 1_000_000
    assert maps
    if writer(manifest(real_file)) >= (2, 1):
        # 2.1 store ids are clock-based (database.c, db__new_msg_id): each message's own publish time, no later
        # than the file's mtime (a copy only moves the mtime later) and all within the one short workload run
        ms = {m["id"]: m["timestamp"] for m in maps}
        assert all(t == clock_time_ms(int(i[16:], 16)) for i, t in ms.items())
        assert all(t <= mtime_ms for t in ms.values())
        assert max(ms.values()) - min(ms.values()) < 3_600_000
        assert all(i.startswith(f"{t * 1000:016X}") for i, t in ms.items())
        return
    assert {m["timestamp"] for m in maps} == {mtime_ms}
    assert all(m["id"].startswith(f"{mtime_ms * 1000:016X}") for m in maps)
