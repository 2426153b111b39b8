"""The broker cost model: predictions against the real brokers on files of a shape the fit never saw.

Every calibrated broker loads the held-back shapes at a size the calibration never measured. Memory is compared
as measured; load CPU time, which depends on the machine, relative to files the fit saw loaded in the same rounds
(never a number of seconds). The tolerance is the error the calibration measured on held-back files
(codec.broker.cost.ERROR) plus the measured spread of one such comparison.
"""

from __future__ import annotations

import importlib.util
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from codec.broker import cost
from codec.broker.versions import parse_version

from support.brokers import DEBIAN_VERSION, oracle_binary
from support.paths import ROOT, V6


def _bench(name: str):  # noqa: ANN202 - a bench script loaded as a module
    spec = importlib.util.spec_from_file_location(f"mosqdb_bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_line_the_calibration_measured_has_constants_and_an_error_bar() -> None:
    assert set(cost.MODEL) >= {"1.4", "1.5", "1.6", "2.0", "2.1", "2.1-sqlite"}
    for line, targets in cost.MODEL.items():
        for target in ("load_cpu", "rss", "save_cpu", "save_peak"):
            assert len(targets[target]) == len(cost.TERMS), (line, target)
            assert all(c >= 0 for c in targets[target])
        assert set(cost.ERROR[line]) == {"load_cpu", "rss", "save_cpu", "save_peak"}


def test_prediction_grows_with_the_file_and_says_per_day_with_an_interval() -> None:
    # (a retained message's features: its store, the RETAIN chunk, its payload and its topic's level)
    small = cost.predict({"msg_store": 1_000, "retain": 1_000, "bytes": 100_000, "payload": 64_000, "nodes": 1_001},
                         parse_version("2.0.18"))
    big = cost.predict({"msg_store": 100_000, "retain": 100_000, "bytes": 10_000_000, "payload": 6_400_000,
                        "nodes": 100_001}, parse_version("2.0.18"), autosave_interval=1800)
    assert small.load_seconds is not None and big.load_seconds is not None
    assert big.load_seconds > small.load_seconds and big.memory_bytes > small.memory_bytes
    assert big.saves_per_day == 48 and big.bytes_per_day == 48 * 10_000_000
    assert cost.line_of(parse_version("2.1.2"), sqlite=True) == "2.1-sqlite"


def test_features_are_the_files_counts() -> None:
    f = cost.features_of(V6)
    assert f["msg_store"] == 31 and f["retain"] == 10 and f["client"] == 7 and f["bytes"] == V6.stat().st_size


# What the test measures with every calibrated broker: the line it checks, the broker (a version, or Debian's 2.0.11),
# the db version it reads, and whether it loads 2.1's sqlite store. 2.0.11 is checked against the 2.0 line's fit.
BROKERS = {"1.4": ("1.4", "1.4.15", 3, False), "1.5": ("1.5", "1.5.11", 4, False), "1.6": ("1.6", "1.6.15", 5, False),
           "2.0": ("2.0", "2.0.22", 6, False), "2.0.11": ("2.0", DEBIAN_VERSION, 6, False),
           "2.1": ("2.1", "2.1.2", 6, False), "2.1-sqlite": ("2.1-sqlite", "2.1.2", 6, True)}
HELD = ("mixed", "devices")  # the shapes the calibration never fitted
SIZE = {"1.": 8_000, "2.": 8_000}  # a size the calibration measured for no shape
# files the fit saw: every fitted shape at the fitted size nearest SIZE. Their measured/predicted load times give
# the machine's speed (their geometric mean: each shape counts alike). A machine other than the calibration's
# weighs the terms differently (its caches and memory set what a list walk costs against a parse), so a speed
# taken from a few shapes is their terms' speed: from retained and subs alone (mostly list walks), a machine
# whose walks cost relatively more puts 1.4's mixed shape 52 % off. All eight shapes weigh every term the fit has.
REFERENCES = tuple(s for s in _bench("cost_shapes").SHAPES if s not in HELD)
REFERENCE_SIZE = {"1.": 6_000, "2.": 10_000}
ROUNDS = 5  # loads of each file, interleaved; the median is compared
# Over the calibration's held-back error, what one run of this comparison spreads on the measuring machine: in three
# runs per broker (load average 1-2), the load-time errors of the held-back shapes came out between -12 % and +37 %
# (42 comparisons: 36 within ±15 %, 41 within ±30 %; the largest, 1.5 and devices: +6 %, +12 %, +37 %), while the same shape's
# error moved by up to 30 points between runs; resident memory moved by 1 point at most.
MARGIN = {"load_cpu": 0.20, "rss": 0.05}
TARGET = 0.30  # the ±30 % aim


def tolerance(measured: str, target: str) -> float:
    """The calibration's held-back error for the broker and ``target`` plus :data:`MARGIN`.

    Memory stays within :data:`TARGET` on every line. Load time does not: its held-back errors (26-35 %) plus the
    spread of one run here exceed it; capped at 30 %, one comparison in 42 failed on this machine."""
    err = cost.BROKER_ERROR.get(measured, cost.ERROR[BROKERS[measured][0]])[target]
    return err + MARGIN[target]


def test_memory_tolerances_are_within_the_aim() -> None:
    for measured in BROKERS:
        assert tolerance(measured, "rss") <= TARGET, measured


def _store(db: Path, out: Path) -> Path:
    """The 2.1 sqlite store of ``db``, made by mosqdb migrate."""
    subprocess.run([sys.executable, "-m", "inspector.cli", "migrate", str(db), "--to", "sqlite", "-o", str(out), "-q"],
                   check=True, capture_output=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return out


@pytest.mark.broker
@pytest.mark.parametrize("measured", list(BROKERS))
def test_held_back_shapes_against_the_real_broker(measured: str, tmp_path: Path) -> None:
    """Memory as measured; load CPU time relative to files the fit saw, loaded in the same rounds.

    The model's seconds are this machine's; the ratio of two files' load times is the broker's own. Scaling the
    prediction by the reference files' measured/predicted time takes the machine's speed, and what else it runs
    (a neighbour on the same core slows every file's loads alike), out of the comparison; CPU time (not wall
    time), interleaved loads and the median of :data:`ROUNDS` take out a busy machine's noise."""
    line, version, dbv, sqlite = BROKERS[measured]
    exe = oracle_binary(version)
    if exe is None:
        pytest.skip(f"Mosquitto {version} could not be built")
    plugin = str(Path(exe).parent / "mosquitto_persist_sqlite.so") if sqlite else None
    if plugin is not None and not Path(plugin).exists():
        pytest.skip("no persist-sqlite plugin")
    shapes, measure = _bench("cost_shapes"), _bench("broker_cost").measure
    dbs = {name: shapes.write(tmp_path / f"{name}.db", name, (REFERENCE_SIZE if name in REFERENCES else SIZE)[line[:2]],
                              version=dbv) for name in (*REFERENCES, *HELD)}
    loads = {name: _store(db, tmp_path / f"{name}.sqlite3") if sqlite else db for name, db in dbs.items()}
    runs: dict[str, list] = {name: [] for name in dbs}
    for _ in range(ROUNDS):
        for name, path in loads.items():
            got = measure(exe, path, sqlite_plugin=plugin)
            assert got.loaded, (measured, name)
            runs[name].append(got)
    v = parse_version(version)
    predicted = {name: cost.predict(cost.features_of(db), v, sqlite=sqlite) for name, db in dbs.items()}
    seconds = {name: statistics.median(r.load_cpu for r in rs) for name, rs in runs.items()}
    rss = {name: statistics.median(r.rss for r in rs) for name, rs in runs.items()}
    speed = math.exp(statistics.fmean(math.log(seconds[n] / predicted[n].load_seconds) for n in REFERENCES))
    for name in HELD:
        p = predicted[name]
        load_err = p.load_seconds * speed / seconds[name] - 1
        rss_err = p.memory_bytes / rss[name] - 1
        assert abs(load_err) <= tolerance(measured, "load_cpu"), (name, "load", load_err, p.load_seconds * speed,
                                                                  seconds[name], speed)
        assert abs(rss_err) <= tolerance(measured, "rss"), (name, "rss", rss_err, p.memory_bytes, rss[name])


def test_features_of_a_file_damaged_part_way_are_its_counts_before_the_damage(tmp_path: Path) -> None:
    """The fleet and ``check --broker`` predict a torn file too: the chunks before its damage are counted, the
    column terms (payload, topics, walks) left at 0; the column reader refused it and the fleet run stopped."""
    from codec import DbFile
    from codec.broker.cost import features_of

    from support.paths import V6

    data = V6.read_bytes()
    cut = tmp_path / "torn.db"
    cut.write_bytes(data[: len(data) - 3])
    with DbFile(cut) as db:
        assert db.index.error is not None
        before = {int(t): n for t, n in db.index.counts().items()}
    got = features_of(cut)
    assert got["msg_store"] == before.get(2, 0) and got["retain"] == before.get(4, 0)
    assert got["bytes"] == len(data) - 3 and got["payload"] == got["nodes"] == 0


def test_levels_are_the_distinct_prefixes_of_shallow_and_deep_topics() -> None:
    import random

    from codec.broker.cost import DEEP, levels

    def brute(topics: list[bytes]) -> int:
        return len({t[:i] for t in topics for i in [k for k, b in enumerate(t) if b == 0x2F] + [len(t)]})

    rng = random.Random(5)
    for _ in range(200):
        topics = []
        for _ in range(rng.randrange(1, 12)):
            depth = rng.choice((1, 2, 3, DEEP - 1, DEEP, DEEP + 1, DEEP + 2, 3 * DEEP))
            topics.append(b"/".join(rng.choice((b"", b"a", b"b", b"cc")) for _ in range(depth + 1)))
        topics += [t[: rng.randrange(len(t) + 1)] for t in topics[:3]]  # prefixes of the deep ones, as topics too
        assert levels(topics) == brute(topics), topics
    assert levels([b"/" * 60_000]) == 60_001


def test_a_damaged_files_prediction_says_it_is_a_low_estimate(tmp_path: Path) -> None:
    from inspector.commands.shared.broker import cost_text

    data = V6.read_bytes()
    cut = tmp_path / "torn.db"
    cut.write_bytes(data[: len(data) - 3])
    whole, torn = (cost.predict(cost.features_of(p), parse_version("2.0.18")) for p in (V6, cut))
    assert not whole.damaged and whole.damaged_at is None and whole.to_json()["low_estimate"] is None
    assert "low estimate" not in cost_text(whole)
    assert torn.damaged and 0 < torn.damaged_at < len(data) and torn.load_seconds < whole.load_seconds
    assert torn.to_json()["low_estimate"]["damaged_at"] == torn.damaged_at
    assert f"a low estimate: damaged at offset {torn.damaged_at:,}" in cost_text(torn)


def test_damage_without_an_offset_is_a_low_estimate_that_names_no_offset() -> None:
    """Damage that names no offset is still damage: never "offset 0"."""
    from inspector.commands.shared.broker import cost_text

    features = {**cost.features_of(V6), "damaged": 1}
    unknown = cost.predict(features, parse_version("2.0.18"))
    assert unknown.damaged and unknown.damaged_at is None
    assert unknown.to_json()["low_estimate"] == {"damaged_at": None, "note": cost.LOW_ESTIMATE}
    text = cost_text(unknown)
    assert "a low estimate: damaged at an offset it does not name" in text and "offset 0" not in text
