"""`check` evaluated over column batches: the same findings as the per-record checker it replaced
(tests/support/check_oracle.py) on every fixture and on damaged copies of them; the per-rule cap."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from codec import DbFile
from codec.engine import Record
from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.ops import checker
from codec.ops.check import check_file
from codec.writer import write_records

from support.check_oracle import check_file as oracle_check
from support.clock import AT, CHECK_AT
from support.paths import REAL_FILES, UNIT_FILES

FILES = REAL_FILES + UNIT_FILES


def loadable(path: Path) -> bool:
    try:
        DbFile(path).close()
    except CodecError:
        return False
    return True


def both(path: Path, at: float) -> tuple[object, list[dict]]:
    """(the oracle's findings, or its crash) and the columnar findings, uncapped, as JSON objects."""
    with DbFile(path) as db:
        try:
            old: object = [f.to_json() for f in oracle_check(db, at=at, cap=None)]
        except IndexError as exc:  # the per-record checker crashed on references without any store
            old = exc
    with DbFile(path) as db:
        new = [f.to_json() for f in check_file(db, at=at, limit=None)]
    return old, new


@pytest.mark.parametrize("path", [p for p in FILES if loadable(p)], ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("at", [CHECK_AT, AT, 4.2e9])
def test_same_findings_as_the_per_record_checker(path: Path, at: float) -> None:
    old, new = both(path, at)
    assert new == old


def mutate(data: bytearray, rng: random.Random) -> bytearray:
    for _ in range(rng.choice([1, 1, 2, 5, 20])):
        if len(data) <= 24:
            break
        p = rng.randrange(23, len(data))
        op = rng.random()
        if op < 0.6:
            data[p] = rng.randrange(256)
        elif op < 0.75:
            data[p] = rng.choice([0, 0x80, 0x2B, 0x23, 0xFF, 1, 2, 3])
        elif op < 0.85:
            del data[p:p + rng.randrange(1, 10)]
        elif op < 0.95:
            data[p:p] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 10)))
        else:
            del data[p:]
    return data


@pytest.mark.parametrize("seed", range(4))
def test_same_findings_on_damaged_files(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    files = [p for p in FILES if loadable(p) and p.stat().st_size > 30]
    compared = 0
    for k in range(60):
        src = rng.choice(files)
        path = tmp_path / f"m{k}.db"
        path.write_bytes(mutate(bytearray(src.read_bytes()), rng))
        if not loadable(path):
            continue
        old, new = both(path, rng.choice([CHECK_AT, 4.2e9]))
        if isinstance(old, IndexError):
            assert any(f["rule"] == "dangling" for f in new)  # what the old checker died on
            continue
        assert new == old, f"{src.name} mutated (seed {seed}, #{k})"
        compared += 1
    assert compared > 20


def test_short_and_long_text_scans_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values scanned in the (rows, width) window and as flat bytes give the same findings and hashes."""
    for path in [p for p in FILES if loadable(p)]:
        with DbFile(path) as db:
            wide = check_file(db, at=AT, limit=None)
        monkeypatch.setattr(checker._Text, "WINDOW", 1)
        with DbFile(path) as db:
            narrow = check_file(db, at=AT, limit=None)
        monkeypatch.undo()
        assert narrow == wide, path.name


def many_unreferenced(path: Path, n: int) -> Path:
    """v6: n stores nobody references, one retained, and a retain whose store is missing."""
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": n + 5}, 6)]
    for i in range(1, n + 1):
        recs.append(Record(int(ChunkType.MSG_STORE), {
            "store_id": i, "expiry_time": 0, "source_mid": 0, "source_id": "c", "source_username": None,
            "source_port": 0, "topic": f"t/{i}", "qos": 0, "retain": 1 if i == 1 else 0, "payload": b"x",
            "properties": None}, 6))
    recs += [Record(int(ChunkType.RETAIN), {"store_id": 1}, 6), Record(int(ChunkType.RETAIN), {"store_id": n + 3}, 6)]
    write_records(path, 6, recs)
    return path


def test_a_rule_over_the_limit_says_how_many_more(tmp_path: Path) -> None:
    path = many_unreferenced(tmp_path / "many.db", 2500)
    with DbFile(path) as db:
        every = check_file(db, at=CHECK_AT, limit=None)
        capped = check_file(db, at=CHECK_AT)
        assert oracle_check(db, at=CHECK_AT, cap=None) == every
    unref = [f for f in every if f.rule == "unreferenced"]
    assert len(unref) == 2499
    shown = [f for f in capped if f.rule == "unreferenced"]
    assert shown[:1000] == unref[:1000]
    assert len(shown) == 1001
    more = shown[-1]
    assert more.message == "… and 1,499 more unreferenced findings"
    assert (more.severity, more.offset, more.chunk_index, more.chunk_type) == ("warning", None, None, None)
    # the other rules are untouched, and the summary comes right after the last finding shown
    assert [f for f in capped if f.rule != "unreferenced"] == [f for f in every if f.rule != "unreferenced"]
    assert capped.index(more) == capped.index(unref[999]) + 1


def test_limit_counts_every_rule_apart(tmp_path: Path) -> None:
    path = many_unreferenced(tmp_path / "few.db", 6)
    with DbFile(path) as db:
        every = check_file(db, at=CHECK_AT, limit=None)
        two = check_file(db, at=CHECK_AT, limit=2)
    rules = {f.rule for f in every}
    for rule in rules:
        all_of = [f for f in every if f.rule == rule]
        got = [f for f in two if f.rule == rule]
        if len(all_of) <= 2:
            assert got == all_of
        else:
            assert got[:2] == all_of[:2]
            assert got[2].message == f"… and {len(all_of) - 2:,} more {rule} findings"
            assert got[2].severity == all_of[0].severity
            assert len(got) == 3


def test_progress_reaches_the_total(tmp_path: Path) -> None:
    path = many_unreferenced(tmp_path / "p.db", 50)
    seen: list[tuple[int, int]] = []
    with DbFile(path) as db:
        check_file(db, at=CHECK_AT, progress=lambda done, total: seen.append((done, total)))
        total = db.size  # bytes read, as every codec progress callback reports
    assert seen and seen[-1] == (total, total)
    assert all(t == total and 0 <= d <= total for d, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
