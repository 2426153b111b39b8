"""The real broker is the oracle: it loads what convert/rm-retained/drop-client/prune-sessions/repair wrote.

What a broker should serve is computed at run time from the file it is given (the real
files' expiry times are absolute, see fixtures/README.md "Time matters"), and cross-checked
with the manifests where nothing can expire (v3/v4).
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from codec import DbFile

from support.brokers import (
    Broker,
    collect_many,
    collect_queued,
    collect_retained,
    db_state,
    expires_restored_sessions,
    have_mosquitto,
)
from support.cli import run
from support.paths import V3, V4, V5, V6, manifest

pytestmark = [pytest.mark.broker,
              pytest.mark.skipif(not have_mosquitto(), reason="mosquitto broker not installed")]

MARGIN = 120  # seconds: an expiry this close to now is not asserted either way


def mosqdb(*args: object) -> subprocess.CompletedProcess[str]:
    return run(*args, ok=True)


class Expect:
    """What a broker loading ``path`` now must serve: retained {topic: payload}, per-client outgoing queues."""

    def __init__(self, path: Path, *, ignore_expiry: bool = False) -> None:
        now = time.time()
        self.retained: dict[str, bytes] = {}
        self.queues: dict[str, Counter] = {}
        self.sessions: set[str] = set()
        self.unsure: set[str] = set()  # topics whose expiry is too close to now to call
        stores: dict[int, tuple[str, bytes, bool]] = {}
        expired_sessions = set()
        with DbFile(path) as db:
            for c in db.stream():
                r = c.record
                if r.kind == "msg_store":
                    exp = 0 if ignore_expiry else (r.get("expiry_time") or 0)
                    if exp and abs(exp - now) < MARGIN:
                        self.unsure.add(r["topic"])
                    stores[r["store_id"]] = (r["topic"], r["payload"], bool(exp and exp < now))
                elif r.kind == "client":
                    exp = r.get("session_expiry_time") or 0
                    if exp and exp < now and expires_restored_sessions():
                        expired_sessions.add(r["client_id"])
                    else:
                        self.sessions.add(r["client_id"])
                elif r.kind == "retain":
                    topic, payload, gone = stores[r["store_id"]]
                    if not gone:
                        self.retained[topic] = payload
                elif r.kind == "client_msg" and r["direction"] == 1 and r["client_id"] not in expired_sessions:
                    topic, payload, gone = stores[r["store_id"]]
                    if not gone:
                        self.queues.setdefault(r["client_id"], Counter())[(topic, payload)] += 1

    def check_retained(self, port: int) -> dict[str, bytes]:
        got = {t: m.payload for t, m in collect_retained(port).items()}
        sure = {t: p for t, p in got.items() if t not in self.unsure}
        assert sure == {t: p for t, p in self.retained.items() if t not in self.unsure}
        return got

    def check_clients(self, port: int, clients: list[str]) -> dict[str, int]:
        """Reconnect every client (in parallel) and compare what each gets; returns the counts."""
        wants = {cid: self.queues.get(cid, Counter()) for cid in clients}
        sessions = collect_many(port, {cid: sum(w.values()) for cid, w in wants.items()}, timeout=5)
        for cid, s in sessions.items():
            got = Counter((m.topic, m.payload) for m in s.messages)
            assert {k: v for k, v in got.items() if k[0] not in self.unsure} == \
                {k: v for k, v in wants[cid].items() if k[0] not in self.unsure}, cid
            assert s.session_present == (cid in self.sessions), cid
        return {cid: len(s.messages) for cid, s in sessions.items()}


# ---------------------------------------------------------------- convert


@pytest.mark.parametrize("src", [V3, V4, V5], ids=["v3", "v4", "v5"])
def test_convert_to_v6_broker_serves_retained_and_queues(tmp_path: Path, src: Path) -> None:
    out = tmp_path / "mosquitto.db"
    mosqdb("convert", src, "--to-version", "6", "-o", out)
    man = manifest(src)
    exp = Expect(out)
    with Broker(out, workdir=tmp_path / "b") as b:
        got = exp.check_retained(b.port)
        wanted = {r["topic"]: r["payload_sha256"] for r in man["workload"]["retained"] if r["topic"] not in exp.unsure}
        import hashlib

        assert {t: hashlib.sha256(got[t]).hexdigest() for t in wanted if t in got} == \
            {t: h for t, h in wanted.items() if t in exp.retained}
        counts = exp.check_clients(b.port, list(man["clients_observed"]))
        for cid, n in counts.items():
            if src in (V3, V4):  # nothing in a v3/v4 file expires: the manifest counts must all arrive
                by_state = man["client_messages_by_qos_direction_state"].get(cid, {})
                incoming = sum(k for s, k in by_state.items() if "/dir0/" in s)
                assert n == man["clients_observed"][cid]["queued_or_inflight_messages"] - incoming, cid
    if src in (V3, V4):
        assert len(got) == len(man["workload"]["retained"]) == 8


@pytest.mark.parametrize("src", [V3, V4], ids=["v3", "v4"])
def test_unconverted_v3_v4_lose_their_queues_in_mosquitto_2(tmp_path: Path, src: Path) -> None:
    """The measured problem convert fixes: the broker serves the retained messages but no queued ones."""
    man = manifest(src)
    with Broker(src, workdir=tmp_path / "b") as b:
        assert len(collect_retained(b.port)) == 8
        s = collect_queued(b.port, "a-sub-q1", timeout=0.7)
        assert man["clients_observed"]["a-sub-q1"]["queued_or_inflight_messages"] == 8
        assert (s.session_present, len(s.messages)) == (False, 0)


@pytest.mark.parametrize("middle", [3, 4])
def test_round_trip_through_older_version_broker_serves_the_same(tmp_path: Path, middle: int) -> None:
    mid, back = tmp_path / "mid.db", tmp_path / "mosquitto.db"
    mosqdb("convert", V6, "--to-version", middle, "-o", mid, "--force")
    mosqdb("convert", mid, "--to-version", "6", "-o", back)
    exp = Expect(V6, ignore_expiry=True)  # v3/v4 hold no expiry: nothing of the original may expire now
    with Broker(back, workdir=tmp_path / "b") as b:
        exp.check_retained(b.port)
        exp.check_clients(b.port, sorted(exp.sessions))


# ---------------------------------------------------------------- surgery, then the broker's own re-save


def resave(path: Path, tmp: Path) -> Path:
    """Let the broker load ``path`` and save it again at SIGTERM; returns its file."""
    b = Broker(path, workdir=tmp)
    b.start()
    assert b.stop() == 0
    return b.saved_db


@pytest.mark.parametrize("args,gone_topics,gone_clients", [
    (["rm-retained", "{src}", "corp/retained/+"], "corp/retained/+", []),
    (["drop-client", "{src}", "a-sub-q1", "a-raw-inflight"], None, ["a-sub-q1", "a-raw-inflight"]),
    (["prune-sessions", "{src}", "--no-subscriptions"], None, ["a-idle"]),
    (["prune-sessions", "{src}", "--expired", "--at", "2026-11-22T00:00:00Z"], None, ["a-idle", "a-sub-v5"]),
], ids=["rm-retained", "drop-client", "prune-no-subs", "prune-expired"])
def test_surgery_result_served_and_resaved_identically(tmp_path: Path, args: list[str], gone_topics: str | None,
                                                       gone_clients: list[str]) -> None:
    from support.reference_selection import topic_matches

    out = tmp_path / "mosquitto.db"
    mosqdb(*[a.format(src=V6) for a in args], "-o", out)
    ours = db_state(out)
    theirs = db_state(resave(out, tmp_path / "resave"))
    assert theirs == ours
    original = Expect(V6)
    exp = Expect(out)
    if gone_topics:
        assert set(exp.retained) == {t for t in original.retained if not topic_matches(gone_topics, t)}
    assert exp.sessions == original.sessions - set(gone_clients)
    with Broker(out, workdir=tmp_path / "b") as b:
        exp.check_retained(b.port)
        exp.check_clients(b.port, sorted(original.sessions))  # a removed session: not present, nothing queued


# ---------------------------------------------------------------- repair


def test_repair_of_garbage_in_the_middle_brings_everything_else_back(tmp_path: Path) -> None:
    with DbFile(V6) as db:
        chunks = list(db.stream())
    victim = next(c for c in chunks if c.kind == "client_msg" and c.record["client_id"] == "a-sub-q1")
    data = bytearray(V6.read_bytes())
    data[victim.offset : victim.offset + victim.size] = b"\xff" * victim.size
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(bytes(data))
    # the broker takes the garbage for an unknown chunk, skips past the end and loses the rest silently
    with Broker(damaged, workdir=tmp_path / "raw") as b:
        assert collect_retained(b.port) == {}
    out = tmp_path / "mosquitto.db"
    mosqdb("repair", damaged, "-o", out)
    exp = Expect(out)
    full = Expect(V6)
    assert exp.retained == full.retained
    assert sum(exp.queues["a-sub-q1"].values()) == sum(full.queues["a-sub-q1"].values()) - 1
    assert db_state(resave(out, tmp_path / "resave")) == db_state(out)
    with Broker(out, workdir=tmp_path / "b") as b:
        exp.check_retained(b.port)
        exp.check_clients(b.port, sorted(full.sessions))


def test_repair_of_truncated_file_lets_the_broker_start(tmp_path: Path) -> None:
    with DbFile(V4) as db:
        chunks = list(db.stream())
    cut = chunks[-4].offset + 6 + 3  # inside the body of a sub chunk near the end
    damaged = tmp_path / "cut.db"
    damaged.write_bytes(V4.read_bytes()[:cut])
    raw = Broker(damaged, workdir=tmp_path / "raw").start(expect_fail=True)
    running = raw.running
    raw.stop()
    assert not running and raw.returncode != 0  # a truncated known chunk: the broker refuses to start
    out = tmp_path / "mosquitto.db"
    mosqdb("repair", damaged, "-o", out)
    exp = Expect(out)
    assert len(exp.retained) == sum(1 for c in chunks[: len(chunks) - 4] if c.kind == "retain")
    with Broker(out, workdir=tmp_path / "b") as b:
        exp.check_retained(b.port)
    assert db_state(b.saved_db) == db_state(out)


def test_repair_recover_retained_broker_serves_them_again(tmp_path: Path) -> None:
    with DbFile(V6) as db:
        chunks = list(db.stream())
    first_retain = next(c for c in chunks if c.kind == "retain")
    cut = tmp_path / "cut.db"
    cut.write_bytes(V6.read_bytes()[: first_retain.offset + 9])
    raw = Broker(cut, workdir=tmp_path / "raw").start(expect_fail=True)
    running = raw.running
    raw.stop()
    assert not running and raw.returncode != 0
    out = tmp_path / "mosquitto.db"
    mosqdb("repair", cut, "-o", out, "--recover-retained")
    full = Expect(V6)
    exp = Expect(out)
    assert exp.retained == full.retained and exp.queues == full.queues
    with Broker(out, workdir=tmp_path / "b") as b:
        exp.check_retained(b.port)
        exp.check_clients(b.port, sorted(full.sessions))
