"""TCP: export to fwd-listen for every real fixture, and the client against misbehaving receivers."""

from __future__ import annotations

import socket
import time
from collections import Counter

import pytest

from codec import DbFile
from exporters.forward.content import Batch, Message, batches, make_id, message_map
from exporters.forward.frames import ACK_OK, HANDSHAKE, HEARTBEAT, FrameDecoder, Packet, encode_forward
from exporters.forward.net import ForwardClient, Listener, SendError
from exporters.forward.source import MessageSource, Options
from inspector.commands.shared.forward_export import run_forward_export

from support.cli import run
from support.forward import FakeReceiver, FwdListen, db_stores, export_args, stream_messages
from support.paths import REAL, REAL_FILES

F20 = REAL / "2.0.20-a.db"
FF = bytes((ACK_OK,))


def _batches(size: int = 3) -> list[Batch]:
    """The 10 retained messages of 2.0.20-a.db: batches of 3, 3, 3, 1."""
    with DbFile(F20) as db:
        return list(batches(MessageSource(db, Options(retained_only=True)), size))


class Peer:
    """The receiving end of one connection, as a test script drives it."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.dec = FrameDecoder()
        self.queue: list[Packet] = []
        self.messages: list[Message] = []

    def packet(self) -> Packet | None:
        while not self.queue:
            data = self.conn.recv(1 << 16)
            if not data:
                return None
            self.queue.extend(self.dec.feed(data))
        p = self.queue.pop(0)
        self.messages.extend(p.messages())
        return p

    def handshake(self) -> None:
        p = self.packet()
        assert p is not None and p.type == 0
        self.conn.sendall(FF)

    def serve(self) -> None:
        """Behave: ACK what asks for it, answer heartbeats."""
        while (p := self.packet()) is not None:
            if p.ack or p.type == 2:
                self.conn.sendall(FF)


def _client(port: int, **kw: object) -> ForwardClient:
    opts = dict(ack=True, timeout=2.0, retries=2)  # generous where no timeout is meant to fire
    opts.update(kw)
    return ForwardClient("127.0.0.1", port, **opts)  # type: ignore[arg-type]


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_every_fixture_through_fwd_listen(path, tmp_path) -> None:
    with FwdListen(tmp_path / "got.fwd") as lis:
        r = run("export", str(path), "--to", f"forward://127.0.0.1:{lis.port}", "--ack", "--batch", "5",
                "--timeout", "5", text=False)
        assert r.returncode == 0, r.stderr
        assert lis.stop() == 0
    msgs = stream_messages((tmp_path / "got.fwd").read_bytes())
    stores = db_stores(path)
    n = len(stores)
    assert f"{n} of {n} messages acknowledged in {-(-n // 5)} packets".encode() in r.stderr
    assert sorted(m.store_id for m in msgs) == sorted(stores)  # every stored message arrives once
    for m in msgs:
        rec = stores[m.store_id]
        assert m.payload == rec["payload"] and m.topic == rec["topic"] and m.retain == (rec["retain"] != 0)
    assert b"1 connections" in lis.stderr and f"{n} messages, 0 errors".encode() in lis.stderr


def test_no_ack_mode_confirms_by_heartbeat_and_matches_the_file_export(tmp_path) -> None:
    got: list[Message] = []
    with Listener(on_packet=lambda c, p, ms: got.extend(ms)).start() as lis:
        assert run_forward_export(export_args([F20], f"forward://127.0.0.1:{lis.port}", batch=4,
                                              mode="delivery")) == 0
    out = tmp_path / "f.fwd"
    assert run_forward_export(export_args([F20], "msgpack", output=str(out), batch=4, mode="delivery")) == 0
    assert got == stream_messages(out.read_bytes())
    assert len(got) == 29


def test_listener_print_and_out_file(tmp_path) -> None:
    with FwdListen(tmp_path / "got.fwd", "--print") as lis:
        r = run("export", str(F20), "--to", f"forward://127.0.0.1:{lis.port}", "--kind", "retained", text=False)
        assert r.returncode == 0, r.stderr
        lis.stop()
    assert lis.stdout.count(b"\n") == 11 and b"corp/retained/emoji/\xf0\x9f\x98\x80" in lis.stdout
    assert (tmp_path / "got.fwd").read_bytes()[:3] == HANDSHAKE
    r = run("fwd-dump", str(tmp_path / "got.fwd"), text=False)
    assert r.returncode == 0 and b"2 packets, 10 messages" in r.stderr


# ---------------------------------------------------------------- misbehaving receivers


def test_receiver_never_acks() -> None:
    def handler(conn: socket.socket, n: int) -> None:
        peer = Peer(conn)
        peer.handshake()
        while peer.packet() is not None:
            pass

    with FakeReceiver(handler) as rx:
        t0 = time.monotonic()
        with pytest.raises(SendError) as e:
            _client(rx.port, timeout=0.5).send(_batches())
        elapsed = time.monotonic() - t0
    assert e.value.summary.acked == 0 and e.value.summary.sent == 3
    assert "gave up on a batch of 3 messages after 2 retries (no answer to the forward packet" in str(e.value)
    assert "0 of 3 messages acknowledged" in str(e.value)
    assert rx.connections == 3 and elapsed < 10  # 3 attempts x 0.5 s; no hang


def test_receiver_never_answers_the_handshake() -> None:
    def handler(conn: socket.socket, n: int) -> None:
        conn.recv(10)
        time.sleep(3)

    with FakeReceiver(handler) as rx, pytest.raises(SendError) as e:
        _client(rx.port, retries=1, timeout=0.5).send(_batches())
    assert "gave up on the handshake after 1 retries (no answer to the handshake within 0.5 s)" in str(e.value)
    assert e.value.summary.sent == 0


def test_receiver_answers_00() -> None:
    def handler(conn: socket.socket, n: int) -> None:
        peer = Peer(conn)
        peer.handshake()
        while peer.packet() is not None:
            ok = n == 1 and len(peer.messages) <= 6
            conn.sendall(FF if ok else b"\x00")
            if not ok:
                return

    with FakeReceiver(handler) as rx, pytest.raises(SendError) as e:
        _client(rx.port).send(_batches())
    s = e.value.summary
    assert (s.acked, s.sent, s.packets, s.reconnects) == (6, 9, 2, 2)
    assert "forward packet (3 messages) rejected (00)" in str(e.value) and "6 of 9 messages" in str(e.value)


def test_receiver_closes_mid_batch() -> None:
    received: dict[int, list[Message]] = {}

    def handler(conn: socket.socket, n: int) -> None:
        peer = Peer(conn)
        received[n] = peer.messages
        peer.handshake()
        if n == 1:
            peer.packet()
            conn.sendall(FF)
            conn.recv(20)  # a part of the second packet, then hang up
            return
        peer.serve()

    with FakeReceiver(handler) as rx:
        s = _client(rx.port).send(_batches())
    assert (s.acked, s.sent, s.packets, s.reconnects) == (10, 10, 4, 1)
    assert len(received[1]) == 3 and len(received[2]) == 7  # the cut batch was resent whole
    with DbFile(F20) as db:
        want = sorted(m["id"] for m in MessageSource(db, Options(retained_only=True)))
    assert sorted(m.id for m in received[1] + received[2]) == want


def test_receiver_acks_late() -> None:
    seen: list[int] = []

    def handler(conn: socket.socket, n: int) -> None:
        peer = Peer(conn)
        peer.handshake()
        while (p := peer.packet()) is not None:
            seen.append(len(p.messages()))
            if n == 1:
                time.sleep(2.0)  # twice the client's timeout
            conn.sendall(FF)

    with FakeReceiver(handler) as rx:
        s = _client(rx.port, timeout=1.0).send(_batches())
    assert (s.acked, s.sent, s.packets, s.reconnects) == (10, 10, 4, 1)  # late FF not counted twice
    assert seen == [3, 3, 3, 3, 1]  # the first batch arrived twice (ids let a receiver drop the copy)


def test_receiver_reads_a_byte_at_a_time() -> None:
    def handler(conn: socket.socket, n: int) -> None:
        dec = FrameDecoder()
        while data := conn.recv(7):
            for p in dec.feed(data):
                if p.type == 0 or p.ack or p.type == 2:
                    conn.sendall(FF)

    with FakeReceiver(handler) as rx:
        s = _client(rx.port, heartbeat=1e-6).send(_batches())
    assert (s.acked, s.packets, s.reconnects) == (10, 4, 0)
    assert s.heartbeats == 4  # one before each batch (idle >= 1 µs)


def test_no_ack_connection_lost_is_not_reported_as_delivered() -> None:
    received: dict[int, list[Message]] = {}

    def handler(conn: socket.socket, n: int) -> None:
        peer = Peer(conn)
        received[n] = peer.messages
        peer.handshake()
        if n == 1:
            peer.packet()
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            return  # reset: whatever follows on this connection is lost
        peer.serve()

    with FakeReceiver(handler) as rx:
        try:
            s = _client(rx.port, ack=False).send(_batches(1))
        except SendError as exc:
            s = exc.summary
    assert s.sent == 10 and s.acked + s.unconfirmed == 10
    assert s.acked == len(received.get(2, []))  # only what an FF on the new connection covered
    assert s.unconfirmed >= 1


def test_cli_exit_code_when_retries_run_out() -> None:
    def handler(conn: socket.socket, n: int) -> None:
        peer = Peer(conn)
        peer.handshake()
        peer.packet()
        conn.sendall(b"\x00")

    with FakeReceiver(handler) as rx:
        r = run("export", str(F20), "--to", f"forward://127.0.0.1:{rx.port}", "--ack", "--timeout", "0.5",
                "--retries", "1", "--kind", "retained", text=False)
    assert r.returncode == 1
    lines = r.stderr.decode().strip().splitlines()
    assert lines[-1].startswith("mosqdb export: forward://127.0.0.1:")
    assert lines[-1].endswith("gave up on a batch of 10 messages after 1 retries (forward packet (10 messages) "
                              "rejected (00)); 0 of 10 messages acknowledged")


# ---------------------------------------------------------------- the listener


def _raw(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def test_listener_handles_bytes_split_across_segments() -> None:
    maps = [message_map(make_id(1_700_000_000_000, i), i % 3, False, True, "c", f"t/{i}", b"p" * i,
                        1_700_000_000_000) for i in range(1, 7)]
    (b,) = batches(maps)
    data = HANDSHAKE + encode_forward(b.content, ack=True) + HEARTBEAT + encode_forward(b.content, ack=False)
    got: list[Message] = []
    with Listener(on_packet=lambda c, p, ms: got.extend(ms)).start() as lis, _raw(lis.port) as s:
        for i in range(len(data)):
            s.sendall(data[i:i + 1])  # one segment per byte (TCP_NODELAY)
        acks = b""
        while len(acks) < 3 and (more := s.recv(4)):
            acks += more
        assert acks == FF * 3  # handshake, forward with ACK flag, heartbeat; none for the no-ACK packet
        s.shutdown(socket.SHUT_WR)
        assert s.recv(1) == b""
    assert [m.to_map() for m in got] == maps * 2 and lis.stats.errors == 0


@pytest.mark.parametrize("first", [b"\x02\x00\x02", HEARTBEAT, b"\x02\x70\x00"])
def test_listener_rejects_a_bad_start_with_00(first: bytes) -> None:
    with Listener().start() as lis, _raw(lis.port) as s:
        s.sendall(first)
        assert s.recv(1) == b"\x00"
        assert s.recv(1) == b""  # and closes
        assert lis.stats.errors == 1


def test_listener_closes_on_bad_content_and_keeps_serving() -> None:
    with Listener().start() as lis:
        with _raw(lis.port) as s:
            s.sendall(HANDSHAKE)
            assert s.recv(1) == FF
            s.sendall(encode_forward(b"\x91\x01", ack=True))
            assert s.recv(1) == b""  # no ACK for it
        s2 = _raw(lis.port)
        s2.sendall(HANDSHAKE + HEARTBEAT)
        assert s2.recv(1) == FF and s2.recv(1) == FF
        s2.close()
    assert lis.stats.errors == 1 and lis.stats.packets == 0


def test_listener_handshake_timeout() -> None:
    with Listener(handshake_timeout=0.3).start() as lis, _raw(lis.port) as s:
        assert s.recv(1) == b""


def test_fwd_listen_counts(tmp_path) -> None:
    with FwdListen(tmp_path / "x.fwd") as lis:
        with _raw(lis.port) as s:
            s.sendall(HANDSHAKE)
            assert s.recv(1) == FF
            for b in _batches(4):
                s.sendall(encode_forward(b.content, ack=True))
                assert s.recv(1) == FF
        lis.stop()
    assert Counter(m.qos for m in stream_messages((tmp_path / "x.fwd").read_bytes())) == Counter({0: 2, 1: 4, 2: 4})


def test_fwd_listen_print_json(tmp_path) -> None:
    import json

    with FwdListen(tmp_path / "j.fwd", "--print", "--json") as lis:
        r = run("export", str(F20), "--to", f"forward://127.0.0.1:{lis.port}", "--ack", "--mode", "delivery",
                "--client", "a-sub-v5", text=False)
        assert r.returncode == 0, r.stderr
        lis.stop()
    rows = [json.loads(line) for line in lis.stdout.decode().splitlines()]
    assert len(rows) == 4 and {r["connection"] for r in rows} == {1}
    assert Counter(r["qos"] for r in rows) == Counter({2: 2, 1: 2})  # the manifest's a-sub-v5 queue
    assert sum(r["flags"]["retain"] for r in rows) == 1
