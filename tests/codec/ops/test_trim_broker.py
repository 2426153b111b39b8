"""trim-queue against the real broker: what a client gets after `trim-queue --keep-newest N`.

A real Mosquitto (Debian's 2.0.11) builds the file: persistent clients (MQTT 3.1.1 and 5, QoS 1 and 2
subscriptions) go offline, a publisher sends each of them a different number of messages, the broker
is stopped with SIGTERM. After the trim the broker loads the result: every session is present on
reconnect, each client receives exactly the newest N of its queue (all of it when shorter), in order,
with identical payloads, and its subscriptions still deliver new messages.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codec import DbFile

from support.bridges import publish
from support.brokers import Broker, collect_many, collect_queued, db_state, have_mosquitto
from support.cli import run

pytestmark = [pytest.mark.broker,
              pytest.mark.skipif(not have_mosquitto(), reason="mosquitto broker not installed")]

KEEP = 3
# client id -> (MQTT v5, subscription filter, messages published to it)
CLIENTS = {
    "q1-long": (False, "t/long/#", 12),
    "q2-v5": (True, "t/v5/#", 9),
    "short": (False, "t/short/#", 2),
    "everything": (False, "t/#", 12 + 9 + 2),
}


def workload(workdir: Path) -> tuple[Path, dict[str, list[tuple[str, bytes]]]]:
    """The broker's own file, and per client the messages queued for it in publish order."""
    b = Broker(workdir=workdir)
    b.start()
    try:
        for cid, (v5, flt, _n) in CLIENTS.items():
            s = collect_queued(b.port, cid, expected=0, subscribe=(flt,), v5=v5, grace=0.1)
            assert not s.session_present
        sent: list[tuple[str, bytes]] = []
        for name, n in (("long", 12), ("v5", 9), ("short", 2)):
            sent += [(f"t/{name}/{i % 2}", bytes([i, 0, 255]) + f"{name} #{i}".encode()) for i in range(n)]
        # interleaved, so a client's queue is not one run of the file
        order = sorted(range(len(sent)), key=lambda k: (k % 5, k))
        msgs = [sent[k] for k in order]
        publish(b.port, msgs)
    finally:
        b.stop()
    queued = {cid: [m for m in msgs if m[0].startswith(flt[:-1]) or flt == "t/#"] for cid, (_v5, flt, _n) in
              CLIENTS.items()}
    return b.saved_db, queued


def test_keep_newest_served_by_the_broker(tmp_path: Path) -> None:
    src, queued = workload(tmp_path / "make")
    assert {c: len(q) for c, q in queued.items()} == {c: n for c, (_v, _f, n) in CLIENTS.items()}
    out = tmp_path / "trimmed.db"
    r = run("trim-queue", src, "--keep-newest", KEEP, "-o", out, "--json", ok=True)
    report = json.loads(r.stdout)
    assert report["client_msgs_removed"] == sum(max(len(q) - KEEP, 0) for q in queued.values())
    before, after = db_state(src), db_state(out)
    assert after["clients"] == before["clients"] and after["subs"] == before["subs"]
    with DbFile(src) as a, DbFile(out) as b:
        cfg_a, cfg_b = next(a.stream()).record, next(b.stream()).record
        assert cfg_b["last_db_id"] == cfg_a["last_db_id"]

    with Broker(out, workdir=tmp_path / "serve") as b:
        want = {cid: q[-KEEP:] for cid, q in queued.items()}
        got = collect_many(b.port, {cid: len(w) for cid, w in want.items()}, timeout=5)
        for cid, s in got.items():
            assert s.session_present, cid
            assert [(m.topic, m.payload) for m in s.messages] == want[cid], cid
        # the subscriptions survived: a new message reaches every client on its next connect
        fresh = [(f"t/{name}/new", f"after trim {name}".encode()) for name in ("long", "v5", "short")]
        publish(b.port, fresh)
        again = collect_many(b.port, {"q1-long": 1, "q2-v5": 1, "short": 1, "everything": 3}, timeout=5)
        assert [m.payload for m in again["q1-long"].messages] == [b"after trim long"]
        assert [m.payload for m in again["q2-v5"].messages] == [b"after trim v5"]
        assert [m.payload for m in again["short"].messages] == [b"after trim short"]
        assert [m.payload for m in again["everything"].messages] == [p for _t, p in fresh]
        assert all(s.session_present for s in again.values())


def test_keep_newest_per_client_pattern_only_touches_those_clients(tmp_path: Path) -> None:
    src, queued = workload(tmp_path / "make")
    out = tmp_path / "trimmed.db"
    run("trim-queue", src, "--keep-newest", "1", "--client", "q?-*", "-o", out, ok=True)
    with Broker(out, workdir=tmp_path / "serve") as b:
        got = collect_many(b.port, {"q1-long": 1, "q2-v5": 1, "everything": len(queued["everything"])}, timeout=5)
    assert [(m.topic, m.payload) for m in got["q1-long"].messages] == queued["q1-long"][-1:]
    assert [(m.topic, m.payload) for m in got["q2-v5"].messages] == queued["q2-v5"][-1:]
    assert [(m.topic, m.payload) for m in got["everything"].messages] == queued["everything"]
