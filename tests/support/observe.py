"""Start a real broker on a file and compare what it does with what the broker model predicted.

``observe(version, path, tmp)`` starts release ``version`` (one of the five: Debian's 2.0.11 and the
upstream oracles) on a copy of ``path`` in ``tmp`` and asks it, with real paho clients, everything a
prediction states: does it start (exit status, the lines it prints), which sessions a reconnecting
client finds (session present), how many queued messages each receives, which retained topics it
serves; and whether it is still alive afterwards (a crash on delivery). ``compare`` asserts that
every prediction holds, leaving out only what lies within ``MARGIN`` seconds of an expiry (the
broker's clock and the prediction's "now" are a second or two apart).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from codec.broker.model import Prediction, predict
from codec.broker.versions import parse_version

from support.brokers import FIVE_BROKERS, Broker, Session, collect_queued, collect_retained, oracle_binary
from support.paths import INCOMING, REAL_FILES, V4
from support.variants import VARIANTS

MARGIN = 90  # seconds around "now" in which an expiry is not asserted either way
V2022 = INCOMING / "2.0.22-a.db"
# the variants that read differently in a v4 file (1.5.6): client ids as counted strings, no expiry
V4_VARIANTS = ("truncated-chunk", "truncated-header", "truncated-in-payload", "client-without-id",
               "client-msg-without-client-id", "sub-without-client-id", "sub-without-topic", "empty-topic-retained",
               "empty-topic-queued", "missing-store", "no-client-chunk", "unknown-chunk")
# every real file as it is, every variant of 2.0.22-a (v6), the v4 ones of 1.5.6-a
CASES = ([pytest.param(p, None, id=p.name) for p in REAL_FILES]
         + [pytest.param(V2022, name, id=f"2.0.22-a.{name}") for name in VARIANTS]
         + [pytest.param(V4, name, id=f"1.5.6-a.{name}") for name in V4_VARIANTS])


@pytest.fixture(scope="session")
def five() -> tuple[str, ...]:
    """The five brokers, built once (the oracles are cached under ~/.cache/mosqdb-oracles)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = dict(zip(FIVE_BROKERS, pool.map(oracle_binary, FIVE_BROKERS)))
    missing = [v for v, b in found.items() if b is None]
    if missing:
        pytest.skip(f"cannot build or find Mosquitto {', '.join(missing)}")
    return FIVE_BROKERS

STAMP = re.compile(r"^\d+: ")


@dataclass
class Observed:
    version: str
    started: bool
    returncode: int | None
    lines: list[str]
    retained: set[str] = field(default_factory=set)
    sessions: dict[str, Session] = field(default_factory=dict)
    alive: bool = True
    crashed_on: list[str] = field(default_factory=list)


def _lines(b: Broker) -> list[str]:
    text = b.stderr + "\n" + b.log()
    return [STAMP.sub("", line).strip() for line in text.splitlines() if line.strip()]


def place(path: Path, workdir: Path) -> Path:
    """The copy the broker loads (mode 0600, as a broker leaves its db): predictions are made on it."""
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "mosquitto.db"
    shutil.copyfile(path, db)
    db.chmod(0o600)
    return db


def observe(version: str, workdir: Path, pred: Prediction, *, extra: tuple[str, ...] = (), queue_qos0: bool = True,
            max_queued: int = 1000) -> Observed:
    """Start ``version`` on ``workdir/mosquitto.db`` and ask it what ``pred`` says it serves."""
    binary = oracle_binary(version)
    assert binary is not None, f"no Mosquitto {version}"
    b = Broker(None, binary=binary, workdir=workdir, extra=extra, queue_qos0=queue_qos0, max_queued=max_queued)
    try:
        b.start(expect_fail=True)
        if b.returncode is not None:
            return Observed(version, False, b.returncode, _lines(b))
        time.sleep(0.5)  # the first main-loop pass (2.0.15-2.0.22 expire restored sessions there)
        obs = Observed(version, True, None, [])
        obs.retained = set(collect_retained(b.port))
        crashing = _crashing_clients(pred)
        clients = {c: n for c, n in _expected_counts(pred).items() if c not in crashing}
        with ThreadPoolExecutor(max_workers=max(len(clients), 1)) as pool:
            futures = {c: pool.submit(collect_queued, b.port, c, expected=n, timeout=3.0, grace=0.3)
                       for c, n in clients.items()}
            obs.sessions = {c: f.result() for c, f in futures.items()}
        for cid in crashing:  # last: it takes the broker down
            with contextlib.suppress(TimeoutError, OSError):
                collect_queued(b.port, cid, expected=pred.queued.get(cid, 0), timeout=2.0, grace=0.3)
            deadline = time.monotonic() + 3
            while b.running and time.monotonic() < deadline:
                time.sleep(0.05)
            obs.crashed_on.append(cid)
        obs.alive = b.running
        obs.returncode = b.stop()
        obs.lines = _lines(b)
        return obs
    finally:
        b.stop()


def _expected_counts(pred: Prediction) -> dict[str, int]:
    out = {c: pred.queued.get(c, 0) for c in pred.kept}
    out.update({d.client_id: 0 for d in pred.dropped})
    return out


def _crashing_clients(pred: Prediction) -> list[str]:
    if not pred.crash_when:
        return []
    return [c for c in pred.kept if f" {c}" in pred.crash_when or f"{c}," in pred.crash_when]


def predictions(version: str, db: Path, conf: Any = None) -> tuple[Prediction, Prediction, Prediction]:
    """(now, now - MARGIN, now + MARGIN): what differs between them is too close to call."""
    now = time.time()
    v = parse_version(version)
    return tuple(predict(db, v, at=t, conf=conf) for t in (now, now - MARGIN, now + MARGIN))  # type: ignore[return-value]


def _fate(p: Prediction, cid: str) -> tuple[bool, int]:
    return cid in p.kept, p.queued.get(cid, 0)


def compare(obs: Observed, pred: Prediction, lo: Prediction, hi: Prediction) -> None:
    """Assert that the broker did what the prediction said (one message naming the release and the item)."""
    who = f"Mosquitto {obs.version}"
    assert pred.verdict == lo.verdict == hi.verdict, f"{who}: the verdict changes within {MARGIN} s of now"
    if pred.verdict in ("refuses", "crashes") and not pred.crash_when:
        assert not obs.started, f"{who} started, the model said it {pred.verdict}"
        if pred.verdict == "refuses":
            assert obs.returncode == 1, f"{who} exited with {obs.returncode}, the model said it refuses (exit 1)"
        else:
            assert obs.returncode is not None and obs.returncode < 0, \
                f"{who} exited with {obs.returncode}, the model said it crashes (a signal)"
        for line in pred.log:
            if line.startswith("Saving in-memory database to "):
                assert any(o.startswith("Saving in-memory database to ") for o in obs.lines), (who, line, obs.lines)
            else:
                assert any(line in o for o in obs.lines), f"{who} did not print {line!r}: {obs.lines}"
        return
    assert obs.started, f"{who} did not start (exit {obs.returncode}): {obs.lines[-5:]}"
    if pred.undefined:
        return  # the model says what it serves is not known (e.g. 2.0 serving a freed message): only that it starts
    if pred.crash_when:
        assert obs.crashed_on and not obs.alive, f"{who} survived {obs.crashed_on}; the model said it crashes " \
                                                 f"{pred.crash_when}"
    else:
        assert obs.alive, f"{who} died while clients reconnected: {obs.lines[-5:]}"
    sure_topics = set(pred.retained) & set(lo.retained) & set(hi.retained)
    unsure_topics = (set(pred.retained) | set(lo.retained) | set(hi.retained)) - sure_topics
    served = {t for t in obs.retained if t not in unsure_topics}
    assert served == {t for t in sure_topics if not t.startswith("$")}, f"{who}: retained topics differ"
    for cid, got in obs.sessions.items():
        if not (_fate(pred, cid) == _fate(lo, cid) == _fate(hi, cid)):
            continue  # its session or a message of it expires within the margin
        kept, n = _fate(pred, cid)
        assert got.session_present == kept, f"{who}: {cid!r} session present {got.session_present}, predicted {kept}"
        assert len(got.messages) == (n if kept else 0), \
            f"{who}: {cid!r} received {len(got.messages)} queued message(s), predicted {n if kept else 0}"
    for line in pred.log:
        if line.startswith(("Expiring client", "Warning: File ")):
            continue  # timing (expired in the first loop pass) and the temp path: checked by the sessions
        assert any(line in o for o in obs.lines), f"{who} did not print {line!r}"


__all__ = ["CASES", "MARGIN", "Observed", "compare", "five", "observe", "place", "predictions"]
