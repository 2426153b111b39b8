"""The broker model without a broker: the rules table, the columnar pass against the emulation of the
broker's reads, and what the model says for releases no test can start (1.4-1.6, 2.0.15, 2.0.16).

Every prediction here is made at a fixed time (``AT`` below), and the hand-made variants are built
relative to it, so nothing depends on today's date. What the five real brokers do is in test_live.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from codec.broker.conf import read_conf
from codec.broker.model import predict
from codec.broker.rules import BY_ID, COULDNT_OPEN, RULES, native_db_version, reads_db_version
from codec.broker.versions import LINES, UnknownVersion, auto_version, parse_version

from support.paths import INCOMING, REAL_FILES, V3, V4, V5, V6
from support.variants import DAY, VARIANTS, make

AT = 1_795_394_509 + 4 * 3600  # 2026-11-23 04:41:49 UTC: four hours after 2.0.22-a.db was written
V2022 = INCOMING / "2.0.22-a.db"
# one release per distinct behaviour the table declares (the line ends and every boundary)
RELEASES = ["1.4.15", "1.5.5", "1.5.11", "1.6.10", "1.6.15", "2.0.0", "2.0.14", "2.0.15", "2.0.16", "2.0.18",
            "2.0.19", "2.0.22", "2.0.23", "2.1.0", "2.1.2"]
ACTIONS = {"refuses", "crashes", "crashes-on-delivery", "skips", "drops", "stops", "misreads", "keeps",
           "unknown"}  # the release does something the model cannot tell (what it serves is undefined)


def v(text: str) -> tuple[int, int, int]:
    return parse_version(text)


# ---------------------------------------------------------------- the table
def test_every_rule_cites_its_source_and_has_well_formed_ranges() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.source and r.situation, r.id
        assert r.effects, r.id
        for lo, hi, eff in r.effects:
            assert lo <= hi, r.id
            assert eff.action in ACTIONS, (r.id, eff.action)
            if eff.action == "refuses":
                assert eff.log[-1:] == (COULDNT_OPEN,), r.id  # every refusal ends with main()'s line


def test_every_rule_the_code_names_is_in_the_table() -> None:
    import re

    root = Path(__file__).resolve().parents[3] / "codec" / "broker"
    named = set()
    for name in ("loader.py", "model.py", "findings.py"):
        text = (root / name).read_text()
        named |= set(re.findall(r'(?:_Fatal|_stop|effect|Event|_sub_effect|note)\("([a-z0-9-]+)"', text))
    assert named, "the pattern found nothing"
    assert named <= set(BY_ID), named - set(BY_ID)


def test_release_lines_and_versions() -> None:
    assert [ln.name for ln in LINES] == ["1.4", "1.5", "1.6", "2.0.0-2.0.14", "2.0.15-2.0.18", "2.0.19-2.0.23", "2.1"]
    assert v("2.0.18") == (2, 0, 18) and v("v2.1.2") == (2, 1, 2)
    for bad in ("2.2.0", "1.3.5", "2.0.24", "2.0", "latest", "2.0.x"):
        with pytest.raises(UnknownVersion):
            parse_version(bad)
    assert [native_db_version(v(x)) for x in ("1.4.15", "1.5.5", "1.5.6", "1.6.10", "1.6.11", "2.0.0")] == [3, 3, 4, 5, 6, 6]
    assert reads_db_version(v("2.0.0"), 2) and not reads_db_version(v("2.1.2"), 7)
    assert not reads_db_version(v("1.6.10"), 6) and reads_db_version(v("1.6.11"), 6)
    assert auto_version(6) == (2, 0, 22) and auto_version(6, clock_ids=True) == (2, 1, 2) and auto_version(4) == (1, 5, 11)


# ---------------------------------------------------------------- columnar == emulation
SOURCES = {"2.0.22": V2022, "1.5.6": V4}


def _files(tmp: Path) -> list[Path]:
    out = list(REAL_FILES)
    for tag, src in SOURCES.items():
        for name in VARIANTS:
            out.append(make(name, src, tmp / f"{tag}.{name}.db", AT))
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return _files(tmp_path_factory.mktemp("variants"))


@pytest.mark.parametrize("release", RELEASES)
def test_columnar_pass_equals_the_emulation_of_the_brokers_reads(corpus: list[Path], release: str) -> None:
    """The fast path (columns over the chunks the broker reads as framed, the emulation only after them)
    says exactly what the emulation of every read from the first chunk says, on every file."""
    for path in corpus:
        fast = predict(path, v(release), at=AT).to_json()
        slow = predict(path, v(release), at=AT, emulate_all=True).to_json()
        fast.pop("misread_from"), slow.pop("misread_from")  # the emulation alone has no framing to leave
        assert fast == slow, path.name


# ---------------------------------------------------------------- what the model says per release
def _pred(tmp_path: Path, variant: str | None, release: str, src: Path = V2022):
    path = src if variant is None else make(variant, src, tmp_path / f"{variant}.db", AT)
    return predict(path, v(release), at=AT)


def test_fixture_as_written(tmp_path: Path) -> None:
    p = _pred(tmp_path, None, "2.0.22")
    assert p.verdict == "loads"
    assert p.queued == {"a-raw-inflight": 2, "a-sub-q0": 4, "a-sub-q1": 8, "a-sub-q2": 6, "a-ünï-客户端": 5}
    assert p.incoming == {"a-raw-inflight": 1}
    assert {d.client_id: d.rule for d in p.dropped} == {"a-idle": "expired-session", "a-sub-v5": "expired-session"}
    assert len(p.retained) == 10 and p.retained == sorted(p.retained)
    old = _pred(tmp_path, None, "2.0.14")  # never expires a restored session; the expired message still goes
    assert old.kept == sorted(p.kept + ["a-idle", "a-sub-v5"]) and old.queued["a-sub-v5"] == 3


@pytest.mark.parametrize(("variant", "release", "verdict", "log"), [
    ("nul-filled", "1.4.15", "refuses", ["Error: Unable to restore persistent database. Unrecognised file format.",
                                         COULDNT_OPEN]),
    ("unsupported-version", "2.0.11", "refuses", ["Error: Unsupported persistent database format version 7 (need "
                                                  "version 6).", COULDNT_OPEN]),
    ("truncated-chunk", "2.0.18", "refuses", ["Error: Not a directory.", COULDNT_OPEN]),
    ("truncated-chunk", "2.0.22", "refuses", ["Error: Not a directory.", COULDNT_OPEN]),
    ("truncated-in-payload", "2.0.18", "refuses", ["Error: Not a directory.", COULDNT_OPEN]),
    ("sub-without-client-id", "2.0.18", "crashes", ["persist__restore_sub: Assertion `client_id' failed."]),
    ("sub-without-topic", "1.6.15", "crashes", ["persist__restore_sub: Assertion `sub' failed."]),
    ("empty-topic-retained", "2.0.22", "crashes", []),
    ("empty-topic-retained", "2.1.0", "refuses", None),
    ("client-without-id", "1.6.15", "refuses", [COULDNT_OPEN]),
    ("client-msg-without-client-id", "1.6.15", "refuses",
     ["Error restoring persistent database, message store corrupt.", COULDNT_OPEN]),
    ("missing-store", "1.6.15", "loads", None),
    ("dbid-size-4", "2.0.0", "refuses", ["Error: Incompatible database configuration (dbid size is 4 bytes, "
                                         "expected 8)", COULDNT_OPEN]),
])
def test_verdicts(tmp_path: Path, variant: str, release: str, verdict: str, log: list[str] | None) -> None:
    p = _pred(tmp_path, variant, release)
    assert p.verdict == verdict
    if log is not None:
        assert p.log == log


@pytest.mark.parametrize(("variant", "release", "src", "verdict", "log"), [
    ("missing-store", "1.5.11", V4, "refuses", ["Error restoring persistent database, message store corrupt.",
                                                COULDNT_OPEN]),
    ("missing-retained-store", "1.4.15", V3, "refuses", ["Error: Corrupt database whilst restoring a retained "
                                                         "message.", COULDNT_OPEN]),
    ("client-without-id", "1.5.11", V4, "refuses", ["Error: Corrupt persistent database.", COULDNT_OPEN]),
    ("client-without-id", "2.0.11", V4, "refuses", [COULDNT_OPEN]),
    ("sub-without-client-id", "1.4.15", V3, "loads", None),
    ("sub-without-client-id", "1.5.11", V4, "crashes", ["persist__restore_sub: Assertion `client_id' failed."]),
    ("sub-without-topic", "1.6.10", V5, "crashes", ["persist__restore_sub: Assertion `sub' failed."]),
    ("truncated-header", "1.5.11", V4, "refuses", ["Error: Success.", COULDNT_OPEN]),
    ("truncated-header", "2.0.22", V4, "loads", None),
])
def test_verdicts_old_files(tmp_path: Path, variant: str, release: str, src: Path, verdict: str,
                            log: list[str] | None) -> None:
    p = _pred(tmp_path, variant, release, src=src)
    assert p.verdict == verdict
    if log is not None:
        assert p.log == log


def test_old_releases_refuse_newer_db_versions() -> None:
    for path, release, need in ((V4, "1.4.15", 3), (V5, "1.5.11", 4), (V6, "1.6.10", 5)):
        p = predict(path, v(release), at=AT)
        assert p.verdict == "refuses"
        db_version = {V4: 4, V5: 5, V6: 6}[path]
        assert p.log == [f"Error: Unsupported persistent database format version {db_version} (need version "
                         f"{need}).", COULDNT_OPEN]
    assert predict(V6, v("1.6.11"), at=AT).verdict == "loads"


def test_session_expiry_per_release(tmp_path: Path) -> None:
    expired = make("sessions-expired", V2022, tmp_path / "e.db", AT)
    assert predict(expired, v("2.0.14"), at=AT).dropped == []
    gone = {d.client_id for d in predict(expired, v("2.0.15"), at=AT).dropped}
    assert gone == {"a-idle", "a-sub-q0", "a-sub-q1", "a-sub-q2", "a-sub-v5", "a-ünï-客户端"}  # not a-raw-inflight
    zero = make("sessions-expiry-zero", V2022, tmp_path / "z.db", AT)
    assert {d.rule for d in predict(zero, v("2.0.15"), at=AT).dropped} == {"session-expiry-zero"}
    assert predict(zero, v("2.0.16"), at=AT).dropped == []
    alive = make("sessions-alive", V2022, tmp_path / "a.db", AT)
    p = predict(alive, v("2.1.2"), at=AT)
    assert p.dropped == [] and p.queued["a-sub-v5"] == 4  # the message expiry moved a day ahead too
    # a day later everything made "alive" has expired
    assert {d.client_id for d in predict(alive, v("2.1.2"), at=AT + 2 * DAY).dropped} == gone


def test_v34_sessions(tmp_path: Path) -> None:
    for path in (V3, V4):
        assert predict(path, v("1.5.11"), at=AT).dropped == []
        for release in ("2.0.11", "2.1.2"):
            p = predict(path, v(release), at=AT)
            assert p.kept == [] and {d.rule for d in p.dropped} == {"v34-session"}
            assert len(p.retained) == 8  # retained messages survive the upgrade


def test_sessions_without_client_chunk_or_interval(tmp_path: Path) -> None:
    for variant in ("no-client-chunk", "interval-zero"):
        p = _pred(tmp_path, variant, "2.0.22")
        assert "a-sub-q1" not in p.kept and "a-sub-q1" not in p.queued
    assert "a-sub-q1" in _pred(tmp_path, "no-client-chunk", "1.5.11", src=V4).kept


def test_misread_after_a_client_without_id(tmp_path: Path) -> None:
    p = _pred(tmp_path, "client-without-id", "2.0.22")
    assert p.verdict == "loads" and p.misread_at is not None
    assert p.retained == []  # everything after the client chunk is read out of step
    assert "Warning: Empty client entry found in persistence database, it may be corrupt." in p.log


def test_empty_topic_queued_crashes_on_delivery(tmp_path: Path) -> None:
    p = _pred(tmp_path, "empty-topic-queued", "2.0.18")
    assert p.verdict == "crashes" and p.starts and "a-sub-q0" in (p.crash_when or "")
    assert _pred(tmp_path, "empty-topic-queued", "2.1.2").verdict == "refuses"


def test_configuration(tmp_path: Path) -> None:
    conf = tmp_path / "m.conf"
    conf.write_text("listener 1883\n")
    p = predict(V2022, v("2.0.22"), at=AT, conf=read_conf(conf))
    assert p.ignored == "persistence-off" and p.kept == [] and p.retained == []
    # persistent_client_expiration puts sessions that never expire on the list too
    conf.write_text("persistence true\npersistent_client_expiration 1h\n")
    never = make("sessions-alive", V2022, tmp_path / "n.db", AT)
    p = predict(never, v("2.0.22"), at=AT, conf=read_conf(conf))
    assert "a-raw-inflight" in p.kept  # its expiry time is 0 in the file: now + 1 h
    conf.write_text("persistence true\nconnection up\naddress 10.0.0.1\nlocal_clientid a-sub-q1\n"
                    "local_cleansession true\n")
    p = predict(V2022, v("2.0.22"), at=AT, conf=read_conf(conf))
    assert {d.client_id: d.rule for d in p.dropped}["a-sub-q1"] == "bridge-local-session"


def test_queue_settings_change_nothing_restored(tmp_path: Path) -> None:
    """queue_qos0_messages false and a small max_queued_messages drop no restored entry (measured: test_live)."""
    conf = tmp_path / "m.conf"
    conf.write_text("persistence true\nqueue_qos0_messages false\nmax_queued_messages 2\n")
    for release in ("2.0.11", "2.1.2"):
        assert predict(V2022, v(release), at=AT, conf=read_conf(conf)).to_json() == \
            predict(V2022, v(release), at=AT).to_json()


def test_persistent_client_expiration(tmp_path: Path) -> None:
    dated = make("never-session-dated", V2022, tmp_path / "n.db", AT)
    conf = tmp_path / "m.conf"
    conf.write_text("persistence true\npersistent_client_expiration 1h\n")
    with_pce = predict(dated, v("2.0.18"), at=AT, conf=read_conf(conf))
    assert {d.client_id: d.rule for d in with_pce.dropped}["a-raw-inflight"] == "persistent-client-expiration"
    assert "a-raw-inflight" in predict(dated, v("2.0.18"), at=AT).kept  # no global expiry: never looked at
    assert "a-raw-inflight" in predict(dated, v("2.0.14"), at=AT, conf=read_conf(conf)).kept


def test_symlink_ignored_by_21(tmp_path: Path) -> None:
    real = tmp_path / "real.db"
    shutil.copyfile(V2022, real)
    link = tmp_path / "mosquitto.db"
    link.symlink_to(real)
    assert predict(link, v("2.1.2"), at=AT).ignored == "symlink"
    assert predict(link, v("2.0.22"), at=AT).retained  # 2.0 follows the link


def test_empty_and_missing_header(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    p = predict(empty, v("2.0.22"), at=AT)
    assert p.verdict == "loads" and p.log[-1] == "Warning: Persistence file is empty."
    short = make("short-header", V2022, tmp_path / "s.db", AT)
    assert predict(short, v("2.1.2"), at=AT).log == ["Error: Success.", COULDNT_OPEN, "mosquitto version 2.1.2 terminating",
                                                     f"Saving in-memory database to {short}."]
    assert predict(short, v("2.0.22"), at=AT).log == ["Error: Not a directory.", COULDNT_OPEN]  # 2.0 saves nothing


def test_verdict_for_an_open_file(tmp_path: Path) -> None:
    """The call the TUI makes: an open DbFile and a release (or auto) in, the prediction out."""
    from codec import DbFile
    from codec.broker import verdict_for

    bad = make("sub-without-client-id", V2022, tmp_path / "s.db", AT)
    with DbFile(bad) as db:
        assert verdict_for(db, "2.0.18", at=AT).verdict == "crashes"
        p = verdict_for(db, "auto", at=AT)
        assert p.broker == "2.0.22" and p.verdict == "loads"
        assert db.chunk(0).record.kind == "cfg"  # still open: the caller's document
    with DbFile(INCOMING / "2.1.2-a.db") as db:
        assert verdict_for(db, "auto", at=AT).broker == "2.1.2"
    with pytest.raises(UnknownVersion), DbFile(V2022) as db:
        verdict_for(db, "3.0.0")


# ---------------------------------------------------------------- the face's call: verdict_for
def test_verdict_for_reports_its_steps_and_counts_topics_without_text() -> None:
    """The TUI's call: ``progress`` climbs step by step to STEPS, and ``topics=False`` gives the count of
    retained topics with the same verdict, sessions and queues as the full prediction."""
    from codec import DbFile
    from codec.broker import verdict_for
    from codec.broker.model import STEPS

    seen: list[tuple[int, int]] = []
    with DbFile(V2022) as db:
        for _ in db.scan_steps():
            pass
        quick = verdict_for(db, "2.0.18", at=AT, topics=False, progress=lambda d, t: seen.append((d, t)))
        full = verdict_for(db, "2.0.18", at=AT)
    assert [d for d, _t in seen] == sorted(d for d, _t in seen) and seen[-1] == (STEPS, STEPS)
    assert {t for _d, t in seen} == {STEPS} and len(seen) >= STEPS - 1
    assert quick.retained == [] and quick.retained_count == len(full.retained) > 0
    assert (quick.verdict, quick.kept, quick.queued) == (full.verdict, full.kept, full.queued)
