"""What a Mosquitto release pays for a file: load CPU time, resident memory, one autosave.

A linear model per release line — a constant, a cost per chunk of each kind, a cost per byte of the file —
fitted on measurements of the real brokers (``bench/calibrate_cost.py``: every line's broker loading files of
six shapes at several sizes, CPU time and memory read from /proc; held-back shapes check the fit). Times are
CPU seconds of the broker's single-threaded restore: on an idle machine the wall time is the same, on a busy
one it is longer. :data:`ERROR` holds, per line, the largest held-back error measured: the prediction's error bar.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from codec.broker.versions import Version

FEATURES = ("msg_store", "client_msg", "retain", "sub", "client", "bytes")
# 1.x keeps sessions, and the children of a topic level, in lists it searches on every insert: its load time
# grows with the square of their number (measured: 1.4.15 loads 2,000 sessions in 0.016 s, 20,000 in 1.7 s).
SQUARED = ("client", "sub", "retain")
QUADRATIC_LINES = frozenset({"1.4", "1.5", "1.6"})  # 2.0 and later keep them in hash tables: linear
TERMS = ("constant", *FEATURES, *(f"{name}^2" for name in SQUARED))

# Fitted by bench/calibrate_cost.py (bench/cost_calibration.json holds the measurements); per line and target
# (load_cpu, rss, save_cpu, save_peak) one coefficient per TERMS entry. Seconds and bytes.
MODEL: dict[str, dict[str, list[float]]] = {
    "1.4": {
        "load_cpu": [0.00262302, 6.01424e-07, 1.31923e-07, 3.63005e-06, 0.0, 0.0, 5.53304e-09, 0.0, 3.2729e-09, 0.0],
        "rss": [6073750.0, 195.59, 46.1577, 202.549, 341.587, 387.392, 0.977145, 0.0, 0.000227597, 0.0],
        "save_cpu": [0.00210805, 3.24361e-07, 1.43806e-07, 5.57233e-07, 0.0, 0.0, 1.71015e-09, 0.0, 1.23851e-10, 4.6065e-11],
        "save_peak": [6073750.0, 195.59, 46.1577, 202.549, 341.587, 387.392, 0.977145, 0.0, 0.000227597, 0.0],
    },
    "1.5": {
        "load_cpu": [0.00201357, 7.72156e-07, 5.46902e-07, 1.15484e-06, 3.0905e-06, 0.0, 3.85358e-09, 0.0, 0.0, 4.04402e-10],
        "rss": [4737790.0, 282.797, 42.4158, 848.02, 1488.04, 0.0, 0.818499, 0.0, 0.00165996, 0.0],
        "save_cpu": [0.00120041, 4.77938e-07, 1.88626e-07, 9.6312e-07, 1.24722e-06, 0.0, 1.63566e-09, 0.0, 1.07862e-10, 4.52525e-11],
        "save_peak": [4730410.0, 283.323, 43.0958, 850.688, 1500.5, 0.0, 0.818115, 0.0, 0.00058773, 0.0],
    },
    "1.6": {
        "load_cpu": [0.00426373, 5.44928e-07, 3.04198e-07, 2.13077e-06, 2.02118e-06, 0.0, 9.70466e-10, 0.0, 1.17664e-10, 1.19586e-10],
        "rss": [6224730.0, 295.861, 23.9179, 909.973, 1680.59, 0.0, 0.80604, 0.0, 0.0012648, 0.0],
        "save_cpu": [0.00115644, 3.72782e-07, 1.22284e-07, 1.57427e-06, 1.79495e-06, 0.0, 1.67584e-09, 0.0, 1.13385e-10, 0.0],
        "save_peak": [6246740.0, 294.56, 22.4208, 910.628, 1684.82, 0.0, 0.80567, 0.0, 0.000688232, 0.0],
    },
    "2.0": {
        "load_cpu": [0.00127908, 7.46512e-07, 3.82498e-07, 2.22958e-06, 4.27475e-06, 0.0, 1.15612e-09, 0.0, 0.0, 0.0],
        "rss": [6281430.0, 238.1, 78.1482, 930.04, 1734.0, 0.0, 0.815622, 0.0, 0.0, 0.0],
        "save_cpu": [0.000713814, 4.29565e-07, 1.78113e-07, 1.12127e-06, 2.51218e-06, 0.0, 1.58971e-09, 0.0, 0.0, 0.0],
        "save_peak": [6290450.0, 237.916, 77.9902, 929.703, 1734.12, 0.0, 0.815545, 0.0, 0.0, 0.0],
    },
    "2.1": {
        "load_cpu": [0.00174294, 8.71642e-07, 4.76118e-07, 2.81733e-06, 3.86368e-06, 2.03252e-06, 9.46292e-10, 0.0, 0.0, 0.0],
        "rss": [6839130.0, 324.484, 110.203, 816.58, 1635.83, 4298.62, 0.82153, 0.0, 0.0, 0.0],
        "save_cpu": [0.000270615, 5.61794e-07, 2.23405e-07, 1.38097e-06, 2.75343e-06, 0.0, 1.29685e-09, 0.0, 0.0, 0.0],
        "save_peak": [6848790.0, 324.558, 110.179, 816.511, 1635.61, 4298.66, 0.821501, 0.0, 0.0, 0.0],
    },
    "2.1-sqlite": {
        "load_cpu": [0.00529246, 2.96092e-06, 1.56049e-06, 1.58003e-06, 4.28454e-06, 7.0592e-06, 1.86956e-09, 0.0, 0.0, 0.0],
        "rss": [8824290.0, 284.45, 84.8384, 923.142, 1628.3, 4294.0, 0.846935, 0.0, 0.0, 0.0],
        "save_cpu": [0.00153707, 1.76441e-07, 1.20286e-07, 1.14145e-06, 1.91518e-06, 4.14946e-07, 1.36459e-11, 0.0, 0.0, 0.0],
        "save_peak": [8824290.0, 284.45, 84.8384, 923.142, 1628.3, 4294.0, 0.846935, 0.0, 0.0, 0.0],
    },
}
# the largest relative error on held-back files, per line and target (the ± of a prediction)
ERROR: dict[str, dict[str, float]] = {
    "1.4": {"load_cpu": 0.747, "rss": 0.047, "save_cpu": 0.839, "save_peak": 0.047},
    "1.5": {"load_cpu": 0.755, "rss": 0.355, "save_cpu": 0.299, "save_peak": 0.357},
    "1.6": {"load_cpu": 0.518, "rss": 0.322, "save_cpu": 0.682, "save_peak": 0.322},
    "2.0": {"load_cpu": 0.893, "rss": 0.516, "save_cpu": 0.633, "save_peak": 0.515},
    "2.1": {"load_cpu": 0.431, "rss": 0.354, "save_cpu": 0.397, "save_peak": 0.354},
    "2.1-sqlite": {"load_cpu": 0.335, "rss": 0.29, "save_cpu": 0.207, "save_peak": 0.29},
}


@dataclass
class Cost:
    """A release's cost for one file; None where the line has no calibration."""

    line: str
    load_seconds: float | None
    memory_bytes: int | None
    save_seconds: float | None
    save_extra_bytes: int | None
    save_bytes: int | None  # what one autosave writes (the whole file, for a .db)
    error: dict[str, float]
    saves_per_day: float | None = None
    bytes_per_day: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "load_seconds": _r(self.load_seconds), "memory_bytes": self.memory_bytes,
                "autosave": {"seconds": _r(self.save_seconds), "extra_memory_bytes": self.save_extra_bytes,
                             "bytes_written": self.save_bytes, "per_day": _r(self.saves_per_day),
                             "bytes_per_day": self.bytes_per_day},
                "error": self.error, "calibrated": self.load_seconds is not None}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def line_of(version: Version, *, sqlite: bool = False) -> str:
    """The calibrated line a release belongs to."""
    if version >= (2, 1, 0):
        return "2.1-sqlite" if sqlite else "2.1"
    if version >= (2, 0, 0):
        return "2.0"
    return f"{version[0]}.{version[1]}"


def features_of(path: str | os.PathLike[str]) -> dict[str, int]:
    """Chunks per kind and the file's size (a sqlite store's rows count as the chunks they restore)."""
    from codec.layouts import ChunkType
    from codec.sources import open_any

    with open_any(path) as db:
        counts = {int(t): n for t, n in db.counts().items()}
    out = {name: int(counts.get(int(ChunkType[name.upper()]), 0)) for name in FEATURES if name != "bytes"}
    out["bytes"] = os.path.getsize(path)
    return out


def vector(features: dict[str, int]) -> list[float]:
    """The model's terms (:data:`TERMS`) for a file's features."""
    return [1.0, *(float(features.get(f, 0)) for f in FEATURES),
            *(float(features.get(f, 0)) ** 2 for f in SQUARED)]


def predict(features: dict[str, int], version: Version, *, sqlite: bool = False,
            autosave_interval: float | None = None) -> Cost:
    """The cost of a file with ``features`` for ``version`` (``autosave_interval`` seconds: saves per day)."""
    line = line_of(version, sqlite=sqlite)
    model = MODEL.get(line)
    if not model:
        return Cost(line, None, None, None, None, None, {})
    x = vector(features)

    def value(target: str) -> float:
        return max(0.0, sum(c * v for c, v in zip(model[target], x)))

    rss, peak = value("rss"), value("save_peak")
    save_bytes = None if sqlite else features.get("bytes", 0)
    cost = Cost(line, value("load_cpu"), int(rss), value("save_cpu"), int(max(0.0, peak - rss)), save_bytes,
                dict(ERROR.get(line, {})))
    if autosave_interval and autosave_interval > 0:
        cost.saves_per_day = 86400.0 / autosave_interval
        if save_bytes is not None:
            cost.bytes_per_day = int(cost.saves_per_day * save_bytes)
    return cost
