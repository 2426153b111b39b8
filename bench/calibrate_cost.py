"""Calibrate the broker cost model (codec/broker/cost.py) by measuring the real brokers.

Each release line's broker loads files of every shape (bench/cost_shapes.py) at several sizes, in the db version
that line writes (and 2.1.2 also its sqlite store, made by ``mosqdb migrate``); bench/broker_cost.py measures load
CPU time, resident memory and one save, ``--repeat`` times a file (the median is kept). Debian's 2.0.11 loads the
same files as 2.0.22, for checking only: is 2.0.x one line? Per line the model (constants per term of
codec.broker.cost.TERMS, each >= 0) is fitted by non-negative least squares of the relative error on every shape but
the held-back ones, at the fitting sizes only, and checked on the held-back shapes and sizes.

    nice -n -5 python bench/calibrate_cost.py [--lines 1.4,2.0] [--repeat 3] [--out bench/cost_calibration.json]
    python bench/calibrate_cost.py --refit [--refeature]   # fit the measurements already in --out

Run it as root under ``nice -n -5`` on a machine as quiet as it gets: CPU time does not count the time the broker
waits for a core, but a busy neighbour on the same core still slows its caches. Prints each line's held-back errors
and the constants (as the Python dicts codec/broker/cost.py holds); writes every measurement as JSON.
"""

from __future__ import annotations

import argparse
import itertools
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

from codec.broker.cost import TERMS, WALKS, features_of, slowdown, vector, working_set  # noqa: E402

LINES = {  # what is measured -> (line, broker version (a path: that binary), db version it reads, sqlite store)
    "1.4": ("1.4", "1.4.15", 3, False), "1.5": ("1.5", "1.5.11", 4, False), "1.6": ("1.6", "1.6.15", 5, False),
    "2.0": ("2.0", "2.0.22", 6, False), "2.0.11": ("2.0", "/usr/sbin/mosquitto", 6, False),
    "2.1": ("2.1", "2.1.2", 6, False), "2.1-sqlite": ("2.1-sqlite", "2.1.2", 6, True),
}
CHECK_ONLY = {"2.0.11"}  # measured against another broker's fit, never fitted
# sizes (units of a shape: messages, sessions or subscriptions) fitted, and held back: 1.x's quadratic terms make
# its big files slow to load (1.4.15: 1.3 s for 10,000 retained messages under one level)
SIZES = {"1.": ((2000, 6000, 16000), (4000, 10000)), "2.": ((2000, 10000, 40000), (5000, 20000))}
HOLD = ("mixed", "devices")
TARGETS = ("load_cpu", "rss", "save_cpu", "save_peak")


def binary(version: str) -> str:
    if version.startswith("/"):
        return version
    out = subprocess.run(["bash", str(HERE.parent.parent / "shared" / "tools" / "build-mosquitto.sh"), version],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def make_store(db: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "inspector.cli", "migrate", str(db), "--to", "sqlite", "-o", str(out), "-q"],
                   check=True, capture_output=True, cwd=HERE.parent)
    return out


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min |a x - b| with x >= 0 (Lawson and Hanson's active set)."""
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, bool)
    for _ in range(3 * n):
        w = a.T @ (b - a @ x)
        if passive.all() or w[~passive].max() <= 1e-12:
            break
        passive[np.argmax(np.where(passive, -np.inf, w))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > 1e-15
    return x


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares of the relative error (each row weighted by 1/y: the files span three orders of magnitude),
    every coefficient >= 0 (a cost is never negative); the columns scaled to 1 for the solver."""
    w = 1.0 / np.maximum(np.abs(y), 1e-9)
    xw, yw = x * w[:, None], y * w
    scale = np.abs(xw).max(axis=0)
    scale[scale == 0] = 1.0
    return nnls(xw / scale, yw) / scale


def sizes_of(line: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return SIZES[line[:2]]


def make(tmp: Path, shape: str, n: int, dbv: int) -> Path:
    path = tmp / f"{shape}-{n}-v{dbv}.db"
    if not path.exists():
        write(path, shape, n, version=dbv, payload=4096 if shape == "payloads" else 64)
    return path


def record(measured: str, version: str, dbv: int, shape: str, n: int, why: str | None, path: Path,
           costs: list) -> dict | None:
    """One file's row: the median of its loads (and every load, for checking the spread), its features."""
    costs = [c for c in costs if c.loaded]
    if not costs:
        print(f"{measured} {shape} {n}: not loaded", file=sys.stderr)
        return None
    med = {k: float(np.median([getattr(c, k) for c in costs])) for k in (*TARGETS, "saved_bytes")}
    print(f"{measured:11} {shape:9} {n:7} load {med['load_cpu']:.4f} s  rss {med['rss'] / 2**20:7.1f} MiB"
          f"  save {med['save_cpu']:.4f} s{'  (held back: ' + why + ')' if why else ''}", flush=True)
    return {"line": LINES[measured][0], "measured": measured, "broker": version.rsplit("/", 1)[-1], "dbv": dbv,
            "shape": shape, "n": n, "held": why is not None, "why_held": why,
            "features": features_of(path), **med,
            "samples": {k: [round(float(getattr(c, k)), 6) for c in costs] for k in TARGETS}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", default=",".join(LINES), help="what to measure (comma-separated: " + ", ".join(LINES)
                    + ")")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--repeat", type=int, default=3, help="measurements per file (the median is kept)")
    ap.add_argument("--out", default=str(HERE / "cost_calibration.json"))
    ap.add_argument("--big", default="", help="a real-sized v6 file (and its .sqlite3 store beside it) every 2.x"
                    " broker also loads, held back")
    ap.add_argument("--refit", action="store_true", help="fit the measurements already in --out (measure nothing)")
    ap.add_argument("--refeature", action="store_true",
                    help="with --refit: remake each file and read its features again (after the features changed)")
    args = ap.parse_args()
    out = Path(args.out)
    if args.refit:
        rows = json.loads(out.read_text())
        if args.refeature:
            with tempfile.TemporaryDirectory(prefix="mosqdb-calibrate-") as tmp:
                for r in rows:
                    if r["shape"] != "big":
                        r["features"] = features_of(make(Path(tmp), r["shape"], r["n"], r["dbv"]))
            out.write_text(json.dumps(rows, indent=1) + "\n")
        print_fit(rows)
        return 0
    wanted = args.lines.split(",")
    shapes = [s for s in args.shapes.split(",") if s] + (["big"] if args.big else [])
    rows = [r for r in json.loads(out.read_text()) if (r.get("measured"), r.get("shape")) not in
            {(m, s) for m in wanted for s in shapes}] if out.exists() else []  # what is measured again is replaced
    with tempfile.TemporaryDirectory(prefix="mosqdb-calibrate-") as tmp:
        for measured in wanted:
            line, version, dbv, sqlite = LINES[measured]
            exe = binary(version)
            plugin = str(Path(exe).parent / "mosquitto_persist_sqlite.so") if sqlite else None
            fitted, held_sizes = sizes_of(line)
            for shape in (s for s in shapes if s != "big"):
                for n in sorted(fitted + held_sizes):
                    path = make(Path(tmp), shape, n, dbv)
                    target = make_store(path, Path(tmp) / f"{shape}-{n}.sqlite3") if sqlite else path
                    costs = [measure(exe, target, sqlite_plugin=plugin) for _ in range(args.repeat)]
                    if sqlite:
                        os.unlink(target)
                    held = measured in CHECK_ONLY or shape in HOLD or n in held_sizes
                    why = "broker" if measured in CHECK_ONLY else "shape" if shape in HOLD else "size" if held else None
                    row = record(measured, version, dbv, shape, n, why, path, costs)
                    if row is not None:
                        rows.append(row)
                        out.write_text(json.dumps(rows, indent=1) + "\n")  # kept as it goes: runs are long
            if args.big and dbv == 6:  # a real-sized file, never fitted: how the model extrapolates
                big = Path(args.big)
                target = big.with_suffix(".sqlite3") if sqlite else big
                if target.exists():
                    costs = [measure(exe, target, sqlite_plugin=plugin) for _ in range(args.repeat)]
                    row = record(measured, version, dbv, "big", 0, "file", big, costs)
                    if row is not None:
                        rows.append(row)
                        out.write_text(json.dumps(rows, indent=1) + "\n")
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print_fit(rows)
    return 0


FLOORS = [2.0**k * 2**20 for k in range(0, 6)]  # 1 MiB ... 32 MiB
RISES = [round(0.05 * k, 2) for k in range(0, 41)]  # 0 ... 2 per doubling
CEILINGS = [2.0**k * 2**20 for k in range(5, 11)]  # 32 MiB (the L3 cache) ... 1 GiB


def design(rows: list[dict], line: str) -> np.ndarray:
    return np.array([vector(r["features"], line) for r in rows])


def scaled(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The design under a slowdown ``m`` per row: every term but the walks' (cost.WALKS) multiplied by it."""
    walks = np.array([t in WALKS for t in TERMS])
    return np.where(walks[None, :], x, x * m[:, None])


def fit_line(train: list[dict], line: str) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Constants per target, and for the CPU times the slowdown (cost.slowdown) that fits best: each floor, rise
    and ceiling of the grid, the constants refitted under it, the smallest root-mean-square relative error kept.
    The slowdown reads the memory the fitted model predicts, as cost.predict does."""
    x = design(train, line)
    coefs: dict[str, list[float]] = {}
    scales: dict[str, list[float]] = {}
    walks = np.array([t in WALKS for t in TERMS])
    for target in ("rss", "save_peak"):  # memory: what is allocated, never the steps of a walk
        coefs[target] = [float(f"{c:.6g}") for c in fit(np.where(walks[None, :], 0.0, x),
                                                        np.array([r[target] for r in train]))]
    rss = np.array([working_set(v, r["features"]) for v, r in zip(x @ np.array(coefs["rss"]), train)])
    for target in ("load_cpu", "save_cpu"):
        y = np.array([r[target] for r in train])
        best: tuple[float, list[float], list[float]] | None = None
        for floor, rise, ceiling in itertools.product(FLOORS, RISES, CEILINGS):
            if ceiling <= floor or (rise == 0 and (floor, ceiling) != (FLOORS[0], CEILINGS[0])):
                continue  # (no rise: one model, whatever the floor and ceiling)
            xm = scaled(x, np.array([slowdown(v, (floor, rise, ceiling)) for v in rss]))
            c = fit(xm, y)
            score = float(np.sqrt(np.mean((xm @ c / y - 1) ** 2)))
            if best is None or score < best[0] - 1e-9:
                best = (score, [float(f"{v:.6g}") for v in c], [floor, rise, ceiling])
        assert best is not None
        coefs[target], scales[target] = best[1], best[2]
    return coefs, scales


def predicted(r: dict, line: str, coefs: dict[str, list[float]], scales: dict[str, list[float]],
              offset: dict[str, float] | None = None) -> dict[str, float]:
    """What cost.predict says for row ``r`` under these constants (``offset``: a build's, cost.BUILD_OFFSET)."""
    x = np.array(vector(r["features"], line))
    rss = working_set(float(x @ np.array(coefs["rss"])), r["features"])
    return {t: float(scaled(x[None, :], np.array([slowdown(rss, scales.get(t))]))[0] @ np.array(coefs[t]))
            + (offset or {}).get(t, 0.0) for t in TARGETS}


def fitted_like(r: dict) -> bool:
    """A row of a shape and size the line's fit uses (for a check-only build: the rows its offset is fitted on)."""
    return r["shape"] not in HOLD and r["shape"] != "big" and r["n"] in sizes_of(r["line"])[0]


def print_fit(rows: list[dict]) -> None:
    """Fit each line on its fitting rows; print the held-back errors and the constants for codec/broker/cost.py.

    A check-only build (Debian's 2.0.11) gets its line's constants plus an offset per target: the median of
    measured minus predicted over its loads of the fitting shapes and sizes; its error is read on the rest."""
    model: dict[str, dict[str, list[float]]] = {}
    scale: dict[str, dict[str, list[float]]] = {}
    error: dict[str, dict[str, float]] = {}
    broker_error: dict[str, dict[str, float]] = {}
    offsets: dict[str, dict[str, float]] = {}
    summary = ["| measured | target | rows | min / median / max | worst |", "| --- | --- | --- | --- | --- |"]
    print("\nerror (predicted / measured - 1) on the rows the fit did not see: min, median, max  [worst row]")
    for line in dict.fromkeys(r["line"] for r in rows):
        mine = [r for r in rows if r["line"] == line]
        train = [r for r in mine if not r["held"]]
        if not train:
            continue
        model[line], scale[line] = fit_line(train, line)
        error[line] = {}
        for group in dict.fromkeys(r["measured"] for r in mine):
            rows_g = [r for r in mine if r["measured"] == group]
            offset = None
            if group in CHECK_ONLY:
                base = [r for r in rows_g if fitted_like(r)]
                offset = {t: float(np.median([r[t] - predicted(r, line, model[line], scale[line])[t] for r in base]))
                          for t in TARGETS} if base else {}
                offsets[group] = {t: float(f"{v:.4g}") for t, v in offset.items()}
                rows_g = [r for r in rows_g if not fitted_like(r)]
            else:
                rows_g = [r for r in rows_g if r["held"]]
            for target in TARGETS:
                for why in ("shape", "size", "file"):
                    test = [r for r in rows_g if ("shape" if r["shape"] in HOLD else "file" if r["shape"] == "big"
                                                  else "size") == why]
                    if not test:
                        continue
                    err = np.array([predicted(r, line, model[line], scale[line], offset)[target]
                                    / max(r[target], 1e-9) - 1 for r in test])
                    worst = test[int(np.argmax(np.abs(err)))]
                    print(f"  {group:11} {target:9} held {why:6} {err.min():+5.0%} {np.median(err):+5.0%}"
                          f" {err.max():+5.0%}  [{worst['shape']} {worst['n']}]")
                if rows_g and target in ("load_cpu", "rss"):
                    err = np.array([predicted(r, line, model[line], scale[line], offset)[target]
                                    / max(r[target], 1e-9) - 1 for r in rows_g])
                    summary.append(f"| {group} | {target} | {len(rows_g)} | {err.min():+.0%} / {np.median(err):+.0%} / "
                                   f"{err.max():+.0%} | {np.abs(err).max():.0%} |")
                if rows_g:  # the error bar: the largest error on anything the fit did not see
                    worst_err = round(max(abs(predicted(r, line, model[line], scale[line], offset)[target]
                                              / max(r[target], 1e-9) - 1) for r in rows_g), 3)
                    (error[line] if group == line else broker_error.setdefault(group, {}))[target] = worst_err
        for target in TARGETS:
            fit_err = np.array([predicted(r, line, model[line], scale[line])[target] / max(r[target], 1e-9) - 1
                                for r in train])
            print(f"  {line:11} {target:9} fitted rows: median {np.median(np.abs(fit_err)):.0%},"
                  f" worst {np.abs(fit_err).max():.0%}")
    print("\n" + "\n".join(summary))
    print(f"\nterms: {', '.join(TERMS)}\n")
    print(python_block(model, scale, error, broker_error, offsets))


def _values(values: list[float], indent: str) -> str:
    """A list of numbers wrapped at 120 columns."""
    lines, line = [], ""
    for text in (f"{v:.6g}" if v else "0.0" for v in values):
        if len(indent) + len(line) + len(text) + 2 > 118:
            lines.append(line.rstrip())
            line = ""
        line += text + ", "
    lines.append(line.rstrip(", "))
    return ("\n" + indent).join(lines)


def python_block(model: dict, scale: dict, error: dict, broker_error: dict, offsets: dict) -> str:
    """The constants as codec/broker/cost.py holds them (pasted between its "Fitted by" comment and Cost)."""
    out = ["MODEL: dict[str, dict[str, list[float]]] = {"]
    for line, targets in model.items():
        out.append(f'    "{line}": {{')
        for target, values in targets.items():
            out.append(f'        "{target}": [')
            out.append("            " + _values(values, "            ") + ",")
            out.append("        ],")
        out.append("    },")
    out.append("}")
    out.append("SCALE: dict[str, dict[str, list[float]]] = {")
    for line, targets in scale.items():
        inner = ", ".join(f'"{t}": [{", ".join(f"{v:.6g}" for v in vs)}]' for t, vs in targets.items())
        out.append(f'    "{line}": {{{inner}}},')
    out.append("}")
    for name, table in (("BUILD_OFFSET", offsets), ("BROKER_ERROR", broker_error), ("ERROR", error)):
        out.append(f"{name}: dict[str, dict[str, float]] = {{")
        for key, targets in table.items():
            inner = ", ".join(f'"{t}": {v:.4g}' for t, v in targets.items())
            out.append(f'    "{key}": {{{inner}}},')
        out.append("}")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
