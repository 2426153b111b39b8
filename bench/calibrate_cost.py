"""Calibrate the broker cost model (codec/broker/cost.py) by measuring the real brokers.

Each release line's broker loads files of every shape (bench/cost_shapes.py) at several sizes, in the db version
that line writes (and 2.1.2 also its sqlite store, made by ``mosqdb migrate``); bench/broker_cost.py measures load
CPU time, resident memory and one save. A linear model per line — a constant plus a cost per chunk of each kind
plus a cost per byte of the file — is fitted on every shape but the held-back ones, and checked on those.

    python bench/calibrate_cost.py [--sizes 2000,20000,80000] [--hold mixed] [--out bench/cost_calibration.json]

Prints the fitted constants (as the Python dict codec/broker/cost.py holds) and each line's error on the held-back
files; writes every measurement as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from broker_cost import measure  # noqa: E402
from cost_shapes import SHAPES, write  # noqa: E402

from codec.broker.cost import QUADRATIC_LINES, SQUARED, TERMS, features_of, vector  # noqa: E402

LINES = {  # line name -> (broker version to build, db version it reads, sqlite store)
    "1.4": ("1.4.15", 3, False), "1.5": ("1.5.11", 4, False), "1.6": ("1.6.15", 5, False),
    "2.0": ("2.0.22", 6, False), "2.1": ("2.1.2", 6, False), "2.1-sqlite": ("2.1.2", 6, True),
}
DEBIAN = "/usr/sbin/mosquitto"


def binary(version: str) -> str:
    out = subprocess.run(["bash", str(HERE.parent.parent / "shared" / "tools" / "build-mosquitto.sh"), version],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def make_store(db: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "inspector.cli", "migrate", str(db), "--to", "sqlite", "-o", str(out), "-q"],
                   check=True, capture_output=True, cwd=HERE.parent)
    return out


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares of the relative error (each row weighted by 1/y: the files span three orders of magnitude),
    with every coefficient >= 0 (a cost is never negative): drop the negative ones and refit."""
    w = 1.0 / np.maximum(np.abs(y), 1e-6)
    x, y = x * w[:, None], y * w
    scale = np.maximum(np.abs(x).max(axis=0), 1e-12)
    active = np.ones(x.shape[1], bool)
    coef = np.zeros(x.shape[1])
    for _ in range(x.shape[1]):
        sol, *_ = np.linalg.lstsq(x[:, active] / scale[active], y, rcond=None)
        coef[:] = 0
        coef[active] = sol / scale[active]
        if (coef >= 0).all():
            break
        active &= coef > 0
    return np.clip(coef, 0, None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000,20000,80000")
    ap.add_argument("--held-sizes", default="40000", help="sizes measured for checking only")
    ap.add_argument("--hold", default="mixed", help="shapes measured for checking only (comma-separated)")
    ap.add_argument("--lines", default=",".join(LINES))
    ap.add_argument("--repeat", type=int, default=2, help="measurements per file (the median is kept)")
    ap.add_argument("--out", default=str(HERE / "cost_calibration.json"))
    ap.add_argument("--refit", action="store_true", help="fit the measurements already in --out (measure nothing)")
    args = ap.parse_args()
    if args.refit:
        rows = json.loads(Path(args.out).read_text())
        print_fit(rows)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    held_sizes = [int(s) for s in args.held_sizes.split(",") if s]
    hold = set(args.hold.split(","))
    rows = []
    with tempfile.TemporaryDirectory(prefix="mosqdb-calibrate-") as tmp:
        for line in args.lines.split(","):
            version, dbv, sqlite = LINES[line]
            exe = binary(version)
            plugin = str(Path(exe).parent / "mosquitto_persist_sqlite.so") if sqlite else None
            for shape in SHAPES:
                for n in sorted(set(sizes + held_sizes)):
                    path = Path(tmp) / f"{shape}-{n}-v{dbv}.db"
                    if not path.exists():
                        write(path, shape, n, version=dbv, payload=4096 if shape == "payloads" else 64)
                    feats = features_of(path)
                    target = make_store(path, Path(tmp) / f"{shape}-{n}.sqlite3") if sqlite else path
                    costs = [measure(exe, target, sqlite_plugin=plugin) for _ in range(args.repeat)]
                    costs = [c for c in costs if c.loaded]
                    if not costs:
                        print(f"{line} {shape} {n}: not loaded", file=sys.stderr)
                        continue
                    med = {k: float(np.median([getattr(c, k) for c in costs]))
                           for k in ("load_cpu", "rss", "save_cpu", "save_peak", "saved_bytes")}
                    held = shape in hold or n in held_sizes
                    rows.append({"line": line, "broker": version, "shape": shape, "n": n, "held": held,
                                 "features": feats, **med})
                    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")  # kept as it goes: runs are long
                    print(f"{line:11} {shape:9} {n:7} load {med['load_cpu']:.4f} s  rss {med['rss'] / 2**20:7.1f} MiB"
                          f"  save {med['save_cpu']:.4f} s{'  (held back)' if held else ''}", flush=True)
                    if sqlite:
                        os.unlink(target)
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    print_fit(rows)
    return 0


def print_fit(rows: list[dict]) -> None:
    """Fit each line on its training rows; print the held-back errors and the constants for codec/broker/cost.py."""
    model: dict[str, dict[str, list[float]]] = {}
    error: dict[str, dict[str, float]] = {}
    print("\nheld-back error (predicted / measured - 1): min, median, max")
    for line in dict.fromkeys(r["line"] for r in rows):
        mine = [r for r in rows if r["line"] == line]
        train = [r for r in mine if not r["held"]]
        x = np.array([vector(r["features"]) for r in train])
        if line not in QUADRATIC_LINES:  # no square terms where the broker's structures are hash tables
            x[:, len(TERMS) - len(SQUARED):] = 0.0
        model[line], error[line] = {}, {}
        for target in ("load_cpu", "rss", "save_cpu", "save_peak"):
            coef = fit(x, np.array([r[target] for r in train]))
            model[line][target] = [float(f"{c:.6g}") for c in coef]
            test = [r for r in mine if r["held"]]
            if test:
                pred = np.array([vector(r["features"]) for r in test]) @ coef
                err = pred / np.array([max(r[target], 1e-9) for r in test]) - 1
                error[line][target] = round(float(np.abs(err).max()), 3)
                print(f"  {line:11} {target:9} {err.min():+.0%} {np.median(err):+.0%} {err.max():+.0%}")
    print(f"\nterms: {', '.join(TERMS)}")
    print("MODEL =", json.dumps(model))
    print("ERROR =", json.dumps(error))


if __name__ == "__main__":
    sys.exit(main())
