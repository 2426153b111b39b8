"""The 1.x lines (modelled from source first) measured: Mosquitto 1.4.15, 1.5.11 and 1.6.15 built from
../shared/oracles, each started on variants of the real v3/v4 files, against the model of the same release.
Also 2.1.2 on a v3 file, whose v2-v4 reader takes strlen() of the topic as its length.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from codec.broker.model import predict
from codec.broker.versions import parse_version

from support.brokers import Broker, collect_retained, oracle_binary
from support.paths import V3, V4
from support.variants import _edit, _retained_stores, _set

pytestmark = pytest.mark.broker


class OldBroker(Broker):
    """1.x logs no "running" line: it is ready when its port accepts."""

    def _ready(self) -> bool:
        if self.binary.split("/")[-2].startswith("2."):
            return super()._ready()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False


def _binary(version: str) -> str:
    exe = oracle_binary(version)
    if exe is None:
        pytest.skip(f"cannot build or find Mosquitto {version}")
    return exe


def _serve(version: str, data: bytes, tmp: Path) -> tuple[object, set[str] | None]:
    """(the model's prediction, the retained topics the broker serves; None when it did not start)."""
    tmp.mkdir(parents=True, exist_ok=True)
    db = tmp / "mosquitto.db"
    db.write_bytes(data)
    db.chmod(0o600)
    pred = predict(db, parse_version(version), at=time.time())  # about now: the live broker judges by its clock
    b = OldBroker(None, binary=_binary(version), workdir=tmp)
    try:
        b.start(expect_fail=True)
        if b.returncode is not None:
            return pred, None
        return pred, set(collect_retained(b.port))
    finally:
        b.stop()


def _retained_topic(path: Path, topic: str) -> bytes:
    return _edit(path, lambda recs: _set(recs, _retained_stores(recs)[0], topic=topic))


@pytest.mark.parametrize("version", ["1.4.15", "1.5.11", "1.6.15"])
def test_a_retained_wildcard_topic(version: str, tmp_path: Path) -> None:
    """1.4/1.5 keep retained messages in the subscription tree and never serve a topic with a wildcard
    level; 1.6 serves it. Before: the model listed it for every release."""
    pred, served = _serve(version, _retained_topic(V3, "a/+/b"), tmp_path)
    assert served is not None and pred.verdict == "loads"
    assert ("a/+/b" in served) == (version == "1.6.15")
    assert set(pred.retained) == served


@pytest.mark.parametrize("version", ["1.4.15", "1.5.11", "1.6.15"])
def test_long_retained_topics(version: str, tmp_path: Path) -> None:
    """1.5's tokeniser counts every character against its 200-level limit: a retained topic of 200 bytes
    is loaded but never served (199: served); 1.4 has no limit, 1.6 counts levels. Before: listed everywhere."""
    for n in (199, 250):
        pred, served = _serve(version, _retained_topic(V4 if version != "1.4.15" else V3, "x" * n), tmp_path / str(n))
        assert served is not None
        assert ("x" * n in served) == (n < 200 or version != "1.5.11"), (version, n)
        assert set(pred.retained) == served and not pred.undefined


@pytest.mark.parametrize("version", ["1.4.15", "1.5.11", "1.6.15"])
def test_long_subscription_filter(version: str, tmp_path: Path) -> None:
    """The same limit for a subscription: 1.5.11 refuses the file at a 200-byte filter (sub__add fails);
    1.4 and 1.6 load it. Before: the model said every release loads it (the fuzzer found a 65,535-byte one)."""
    def change(recs: list) -> list:
        return _set(recs, next(k for k, r in enumerate(recs) if r.kind == "sub"), topic="x" * 200)
    pred, served = _serve(version, _edit(V3, change), tmp_path)
    assert (served is None) == (version == "1.5.11") == (pred.verdict == "refuses")


def test_16_shared_subscription_with_retained_is_undefined(tmp_path: Path) -> None:
    """1.6.15 gave a client with a restored $share/g/# subscription its 4 queued messages plus the 8
    retained ones: the model says what 1.6 serves then is undefined (2.0 delivers the 4)."""
    from support.paths import INCOMING

    def change(recs: list) -> list:
        return _set(recs, next(k for k, r in enumerate(recs) if r.kind == "sub" and r["client_id"] == "a-sub-v5"),
                    topic="$share/g/#")
    data = _edit(INCOMING / "2.0.22-a.db", change)
    db = tmp_path / "v.db"
    db.write_bytes(data)
    assert any(u.startswith("share-sub-restored") for u in predict(db, parse_version("1.6.15")).undefined)
    assert not predict(db, parse_version("2.0.22")).undefined


def test_21_refuses_a_v3_topic_starting_with_nul(tmp_path: Path) -> None:
    """2.1's v2-v4 reader sets the topic length to strlen(topic): a NUL first is length 0, and the restore
    refuses it. Before: the model said it loads."""
    def change(recs: list) -> list:
        i = next(k for k, r in enumerate(recs) if r.kind == "msg_store")
        return _set(recs, i, topic="\0")
    pred, served = _serve("2.1.2", _edit(V3, change), tmp_path)
    assert served is None
    assert pred.verdict == "refuses"
