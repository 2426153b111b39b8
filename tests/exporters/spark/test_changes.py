"""`format("mosquitto-changes")` on a real broker's autosaves: Debian's mosquitto with `autosave_interval 1`,
real MQTT clients making changes one at a time; the stream yields exactly those changes, in order, and a
query restarted from its checkpoint repeats none and loses none (what happened while it was down arrives
once)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from support.brokers import Broker, _client, db_state, have_mosquitto

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.broker]

import exporters.spark as xs  # noqa: E402
from exporters.snapshots import VersionStore, key_of  # noqa: E402

COLUMNS = ("kind", "change", "client_id", "topic", "payload_sha256", "fields", "queue_added", "queue_removed",
           "queue_changed", "queue_length")


def sha(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def change(kind: str, what: str, *, client_id: str | None = None, topic: str | None = None,
           payload: bytes | None = None, fields: tuple[str, ...] = (), queue: tuple[int, ...] | None = None) -> tuple:
    q = queue or (None, None, None, None)
    return (kind, what, client_id, topic, None if payload is None else sha(payload), list(fields), *q)


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    session = xs.session("local[2]", app="mosqdb-changes-test")
    yield session
    session.stop()


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    if not have_mosquitto():
        pytest.skip("needs Debian's mosquitto")
    b = Broker(workdir=tmp_path / "broker", extra=("autosave_interval 1",))
    b.start()
    yield b
    b.stop()


SINKS: dict[str, list[dict]] = {}


def start(spark, broker: Broker, snapshots: Path, checkpoint: Path, name: str):  # type: ignore[no-untyped-def]
    """The stream into ``SINKS[name]``: every row of every batch the query hands over (a batch run twice
    would show twice)."""
    sink = SINKS.setdefault(name, [])

    def collect(df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        sink.extend({**r.asDict(), "batch": batch_id} for r in df.collect())

    df = spark.readStream.format("mosquitto-changes").option("snapshots", str(snapshots)).load(str(broker.dir))
    q = (df.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
         .trigger(processingTime="500 milliseconds").start())
    q.processAllAvailable()
    return q


def rows(spark, name: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return sorted(SINKS.get(name, []), key=lambda r: (r["file"], r["version"], r["n"]))


def plain(rs: list[dict]) -> list[tuple]:
    return [tuple(r[c] for c in COLUMNS) for r in rs]


def wait_rows(spark, table: str, count: int, timeout: float = 90.0) -> list[dict]:  # type: ignore[no-untyped-def]
    """The table's rows once it has at least ``count`` (the broker saves every 1-2 s, then a batch runs)."""
    deadline = time.monotonic() + timeout
    while True:
        got = rows(spark, table)
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def wait_saved(broker: Broker, test, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Until the broker's own file shows ``test(state)`` (its autosave caught up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if broker.db_path.exists() and test(db_state(broker.db_path)):
            return
        time.sleep(0.2)
    raise AssertionError("the broker did not save the change in time")


def connect(broker: Broker, client_id: str, *, clean: bool):  # type: ignore[no-untyped-def]
    c = _client(client_id, clean=clean, v5=False)
    c.connect("127.0.0.1", broker.port)
    c.loop_start()
    deadline = time.monotonic() + 10
    while not c.is_connected():
        assert time.monotonic() < deadline, f"{client_id}: no CONNACK"
        time.sleep(0.02)
    return c


def test_autosaves_stream_exactly_the_changes_once(spark, broker: Broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    snapshots, checkpoint = tmp_path / "snapshots", tmp_path / "checkpoint"
    pub = connect(broker, "publisher", clean=True)  # clean session: never saved
    q = start(spark, broker, snapshots, checkpoint, "run1")
    try:
        want = [change("retained", "added", topic="fleet/s1/temp", payload=b"21.5")]
        pub.publish("fleet/s1/temp", b"21.5", qos=1, retain=True).wait_for_publish()
        assert plain(wait_rows(spark, "run1", 1)) == want

        dev = connect(broker, "dev-1", clean=False)  # a persistent session
        want.append(change("session", "added", client_id="dev-1"))
        assert plain(wait_rows(spark, "run1", 2)) == want

        dev.subscribe("cmd/dev-1/#", 1)
        want.append(change("subscription", "added", client_id="dev-1", topic="cmd/dev-1/#"))
        run1 = wait_rows(spark, "run1", 3)
        assert plain(run1) == want
        dev.disconnect()
        dev.loop_stop()
        time.sleep(2.5)  # a save or two after the disconnect: nothing of it may show
        q.processAllAvailable()
        assert plain(rows(spark, "run1")) == want
    finally:
        q.stop()
    first = rows(spark, "run1")
    assert [r["version"] for r in first] == sorted(r["version"] for r in first)

    # while the query is down: a message queued for the offline session, a second retained message
    pub.publish("cmd/dev-1/set", b"on", qos=1).wait_for_publish()
    pub.publish("fleet/s2/temp", b"19.0", qos=1, retain=True).wait_for_publish()
    wait_saved(broker, lambda s: "fleet/s2/temp" in s["retained"] and s["queues"].get("dev-1"))

    q = start(spark, broker, snapshots, checkpoint, "run2")  # the same checkpoint
    try:
        want2 = [change("retained", "added", topic="fleet/s2/temp", payload=b"19.0"),
                 change("session", "changed", client_id="dev-1", fields=("last_mid",)),
                 change("queued", "changed", client_id="dev-1", queue=(1, 0, 0, 1))]
        assert plain(wait_rows(spark, "run2", 3)) == want2
        pub.publish("fleet/s1/temp", b"", qos=1, retain=True).wait_for_publish()  # clears the retained message
        want2.append(change("retained", "removed", topic="fleet/s1/temp", payload=b"21.5"))
        second = wait_rows(spark, "run2", 4)
        q.processAllAvailable()
        second = rows(spark, "run2")
    finally:
        q.stop()
        pub.disconnect()
        pub.loop_stop()
    assert plain(second) == want2
    assert min(r["version"] for r in second) > max(r["version"] for r in first)  # nothing read twice
    assert {r["file"] for r in first + second} == {str(broker.db_path)}
    # the versions consumed are gone; the last one stays for the next diff
    kept = VersionStore(str(snapshots)).seqs(key_of(str(broker.db_path)))
    assert len(kept) <= 2 and kept[0] >= max(r["version"] for r in second) - 1
