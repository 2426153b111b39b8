"""The broker cost model: predictions against the real brokers on files of a shape the fit never saw.

Memory is compared with the error bar the calibration measured on held-back files (codec.broker.cost.ERROR);
time is CPU time, which depends on the machine: the test only asks that the prediction orders files as the
broker's measured CPU time does when they differ several-fold, never a number of seconds.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from codec.broker import cost
from codec.broker.versions import parse_version

from support.brokers import oracle_binary
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
    small = cost.predict({"msg_store": 1_000, "retain": 1_000, "bytes": 100_000}, parse_version("2.0.18"))
    big = cost.predict({"msg_store": 100_000, "retain": 100_000, "bytes": 10_000_000}, parse_version("2.0.18"),
                       autosave_interval=1800)
    assert small.load_seconds is not None and big.load_seconds is not None
    assert big.load_seconds > small.load_seconds and big.memory_bytes > small.memory_bytes
    assert big.saves_per_day == 48 and big.bytes_per_day == 48 * 10_000_000
    assert cost.line_of(parse_version("2.1.2"), sqlite=True) == "2.1-sqlite"


def test_features_are_the_files_counts() -> None:
    f = cost.features_of(V6)
    assert f["msg_store"] == 31 and f["retain"] == 10 and f["client"] == 7 and f["bytes"] == V6.stat().st_size


@pytest.mark.broker
@pytest.mark.parametrize("version", ["2.0.22", "2.1.2"])
def test_held_back_shape_against_the_real_broker(version: str, tmp_path: Path) -> None:
    exe = oracle_binary(version)
    if exe is None:
        pytest.skip(f"Mosquitto {version} could not be built")
    shapes, measure = _bench("cost_shapes"), _bench("broker_cost").measure
    files = [shapes.write(tmp_path / f"mixed-{n}.db", "mixed", n) for n in (3_000, 30_000)]
    v = parse_version(version)
    predicted = [cost.predict(cost.features_of(f), v) for f in files]
    measured = [measure(exe, f) for f in files]
    assert all(m.loaded for m in measured)
    bar = cost.ERROR[cost.line_of(v)]["rss"]
    for p, m in zip(predicted, measured):
        assert abs(p.memory_bytes / m.rss - 1) <= bar, (p.memory_bytes, m.rss, bar)
    assert measured[1].load_cpu > measured[0].load_cpu and predicted[1].load_seconds > predicted[0].load_seconds
