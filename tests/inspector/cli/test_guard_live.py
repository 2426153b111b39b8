"""`mosqdb guard` lets each of the five real brokers start, on every real file and every variant.

For each release: the guard runs on a copy (the engine `run_guard`, as `mosqdb guard` calls it; the
CLI itself is test_guard.py), then the broker starts on what the guard left. It must start and stay
up while every client reconnects, and serve what the model predicts for the guarded file; the
original bytes must still be on disk (the file, or FILE.bad-*), and a second guard run must change
nothing. The five run side by side for each file.
"""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codec.broker.guard import run_guard
from codec.broker.versions import parse_version

from support.brokers import Broker, collect_retained, have_mosquitto, oracle_binary
from support.observe import CASES, compare, five, observe, place, predictions  # noqa: F401  (five: a fixture)
from support.variants import make

pytestmark = [pytest.mark.broker, pytest.mark.skipif(not have_mosquitto(), reason="mosquitto not installed")]


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def listing(d: Path) -> dict[str, str]:
    return {p.name: sha(p) for p in sorted(d.iterdir()) if p.is_file() and p.name.startswith("mosquitto.db")}


def guarded(version: str, src: Path, d: Path) -> None:
    db = place(src, d)
    original = sha(db)
    v = parse_version(version)
    rep = run_guard(str(db), v)
    kept = [d / Path(p).name for p in rep.aside]
    assert original in {sha(p) for p in [db, *kept] if p.exists()}, f"{version}: the original bytes are gone"
    if rep.action == "none":
        assert sha(db) == original
    assert rep.action in ("none", "salvaged", "emptied"), rep.lines
    before = listing(d)
    again = run_guard(str(db), v)
    assert again.action == "none" and listing(d) == before, f"{version}: a second guard run changed something"
    if db.exists():
        pred, lo, hi = predictions(version, db)
        assert pred.verdict == "loads" or rep.action == "none", (version, pred.verdict, rep.lines)
        if pred.verdict == "loads":
            compare(observe(version, d, pred), pred, lo, hi)
            return
        raise AssertionError(f"{version}: the guard left a file the broker would not load: {rep.lines}")
    binary = oracle_binary(version)
    assert binary is not None
    with Broker(None, binary=binary, workdir=d) as b:  # no file: it starts empty
        assert collect_retained(b.port) == {}
        assert b.running


@pytest.mark.parametrize(("source", "variant"), CASES)
def test_guard_lets_five_brokers_start(five: tuple[str, ...], tmp_path: Path, source: Path,  # noqa: F811
                                       variant: str | None) -> None:
    src = source if variant is None else make(variant, source, tmp_path / "variant.db", time.time())
    with ThreadPoolExecutor(max_workers=len(five)) as pool:
        for f in [pool.submit(guarded, v, src, tmp_path / v) for v in five]:
            f.result()
