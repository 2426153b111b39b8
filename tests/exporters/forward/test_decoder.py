"""The frame/content decoder: precise errors with offsets, any segmentation, fuzzed input."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporters.forward.content import ForwardError, Message, array_header, batches, decode_content, make_id, message_map
from exporters.forward.frames import HANDSHAKE, HEARTBEAT, FrameDecoder, encode_forward, iter_packets

from support.cli import run
from support.forward import EX2_MS, doc_example

GOOD = HANDSHAKE + doc_example(2) + HEARTBEAT + doc_example(3)


def _decode_all(data: bytes) -> None:
    dec = FrameDecoder()
    for p in dec.feed(data):
        p.messages()
    dec.finish()


def _err(data: bytes) -> ForwardError:
    with pytest.raises(ForwardError) as e:
        _decode_all(data)
    return e.value


def test_good_stream_decodes() -> None:
    ps = list(iter_packets([GOOD]))
    assert [(p.name, p.offset, p.size) for p in ps] == [("handshake", 0, 3), ("forward", 3, 131),
                                                         ("heartbeat", 134, 2), ("forward", 136, 305)]
    assert [p.ack for p in ps] == [False, True, False, False]
    assert ps[3].content_offset == 136 + 5
    m1, m2 = ps[3].messages()
    assert m1 == Message("0005EEAC8B7B1FE80000F8F54E34A2A7", 1, False, False,
                         "auto-1F56F09A-97D3-2395-8B77-185E54E0A83C", "test-topic", b"message", 1669799725441)
    assert (m2.topic, m2.retain, m2.qos, m2.payload, m2.store_id) == ("will-topic", True, 2, b"will-payload",
                                                                     273732472648936)


@pytest.mark.parametrize("data,offset,text", [
    (b"\x00", 0, "length 0"),
    (b"\x02\x30\x01", 1, "unknown packet type 3"),
    (b"\x02\x00\x02", 2, "unsupported protocol version 2"),
    (b"\x03\x00\x01\x00", 0, "handshake packet of length 3"),
    (b"\x02\x20\x00", 0, "heartbeat packet of length 2"),
    (b"\xff\xff\xff\xff\x7f", 0, "longer than 4 bytes"),
    (b"\x03\x10\x05\x91", 2, "content length 5 disagrees with the packet length 3"),
    (b"\x03\x10\x00\x91", 2, "content length 0 disagrees"),
    (b"\x02\x10\x80", 2, "ends inside its content length"),
    (HANDSHAKE + b"\x05\x10\x04\x91\x87", 3, "stream ends inside a frame (5 bytes"),
])
def test_bad_frames_name_their_offset(data: bytes, offset: int, text: str) -> None:
    e = _err(data)
    assert e.offset == offset and text in e.reason, str(e)


def _forward(content: bytes) -> bytes:
    return HANDSHAKE + encode_forward(content)


GOOD_MAP = message_map(make_id(EX2_MS, 7), 1, False, True, "c", "t/1", b"\x00\x01", EX2_MS)


@pytest.mark.parametrize("content,text", [
    (b"\xc1", "not a msgpack array"),
    (msgpack.packb({"a": 1}), "not a msgpack array"),
    (b"\x90", "empty array"),
    (msgpack.packb([1]), "message 0: is a int, not a map"),
    (msgpack.packb([{**GOOD_MAP, "id": "00060820bc882e680000000000000001"}]), "not 32 uppercase hex"),
    (msgpack.packb([{**GOOD_MAP, "qos": 3}]), "qos 3 is not 0-2"),
    (msgpack.packb([{**GOOD_MAP, "flags": {"dup": 0, "retain": True}}]), "flags"),
    (msgpack.packb([{**GOOD_MAP, "payload": "text"}], use_bin_type=True), "payload is a str, not bin"),
    (msgpack.packb([{k: v for k, v in GOOD_MAP.items() if k != "topic"}], use_bin_type=True), "missing key(s) topic"),
    (msgpack.packb([GOOD_MAP], use_bin_type=True) + b"\x00", "1 bytes after the array"),
    (b"\x92" + msgpack.packb(GOOD_MAP, use_bin_type=True), "message 1: not valid msgpack"),
])
def test_bad_content(content: bytes, text: str) -> None:
    e = _err(_forward(content))
    assert text in e.reason, str(e)
    assert e.offset is not None and 6 <= e.offset <= 6 + len(content)  # content starts at 6


def test_error_offset_points_at_the_bad_message() -> None:
    good = msgpack.packb(GOOD_MAP, use_bin_type=True)
    bad = msgpack.packb({**GOOD_MAP, "qos": 9}, use_bin_type=True)
    data = _forward(array_header(2) + good + bad)
    e = _err(data)
    assert e.offset == 3 + 2 + 1 + 2 + 1 + len(good) and "message 1" in e.reason  # handshake, VBI, header, VBI, array header
    # any key order and unknown keys are fine
    shuffled = {"extra": [1, 2], **{k: GOOD_MAP[k] for k in reversed(GOOD_MAP)}}
    (m,) = decode_content(msgpack.packb([shuffled], use_bin_type=True))
    assert m.to_map() == GOOD_MAP


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), max_size=30))
def test_any_segmentation_gives_the_same_packets(cuts: list[int]) -> None:
    pieces, pos = [], 0
    for c in cuts:
        pieces.append(GOOD[pos:pos + c])
        pos += c
    pieces.append(GOOD[pos:])
    got = [(p.offset, p.type, p.flags, p.content) for p in iter_packets(pieces)]
    assert got == [(p.offset, p.type, p.flags, p.content) for p in iter_packets([GOOD])]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_random_bytes_only_forward_errors(data: bytes) -> None:
    try:
        _decode_all(data)
    except ForwardError as e:
        assert e.offset is None or 0 <= e.offset <= len(data)


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=len(GOOD) - 1), st.integers(min_value=0, max_value=255),
       st.integers(min_value=0, max_value=len(GOOD)))
def test_fuzz_mutated_stream_only_forward_errors(pos: int, byte: int, cut: int) -> None:
    data = bytearray(GOOD)
    data[pos] = byte
    try:
        _decode_all(bytes(data[:cut]) if cut < pos else bytes(data))
    except ForwardError as e:
        assert e.offset is not None and 0 <= e.offset <= len(data)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=20), st.binary(max_size=50), st.integers(0, 2), st.booleans(),
                          st.booleans(), st.integers(0, 2**63)), min_size=1, max_size=20),
       st.integers(min_value=1, max_value=7))
def test_encode_decode_round_trip(msgs, size: int) -> None:
    maps = [message_map(make_id(ts % 2**40, i), q, d, r, "src", topic.encode("utf-8", "replace").decode(), pl, ts)
            for i, (topic, pl, q, d, r, ts) in enumerate(msgs)]
    data = HANDSHAKE + b"".join(encode_forward(b.content) for b in batches(maps, size))
    got = [m.to_map() for p in iter_packets([data]) for m in p.messages()]
    assert got == maps


def test_fwd_dump_cli_reports_offsets(tmp_path) -> None:
    f = tmp_path / "bad.fwd"
    f.write_bytes(GOOD + b"\x02\x40\x00")
    r = run("fwd-dump", str(f), text=False)
    assert r.returncode == 1
    err = r.stderr.decode().strip()
    assert err == f"mosqdb fwd-dump: {f}: offset 442 (0x1ba): unknown packet type 4 (header byte 0x40)"
    assert b"will-topic" in r.stdout  # everything before the damage was printed
    r = run("fwd-dump", "-", input=doc_example(2), text=False)
    assert r.returncode == 1 and b"offset 0 (0x0): a stream starts with a handshake, not a forward" in r.stderr
    r = run("fwd-dump", "--json", input=GOOD, text=False)
    assert r.returncode == 0 and r.stdout.count(b"\n") == 4 and b'"payload_b64": "d2lsbC1wYXlsb2Fk"' in r.stdout
    r = run("fwd-dump", str(tmp_path / "missing.fwd"), text=False)
    assert r.returncode == 2 and b"no such file" in r.stderr
