"""Every performance target of mosqdb, measured in one run against its anchor: one table, and JSON.

    python bench/run_all.py [--runs N] [--only NAME,...] [--json OUT] [--big FILE] [--big10 FILE]
                            [--store FILE] [--list]

Each benchmark runs mosqdb and its anchor as child processes, alternately (mosqdb, anchor, mosqdb,
anchor, ...), so that a ratio compares two commands measured on the same machine state. An anchor is
Mosquitto's own ``mosquitto_db_dump`` (built from ``../shared/oracles`` by
``../shared/tools/build-mosquitto.sh V`` into ``~/.cache/mosqdb-oracles/V/`` when missing), or, for the
2.1 sqlite store, the same mosqdb command on the .db the store was made from. CPU figures are the
child's user + system time from wait4 (its threads and its own children included), so the other jobs
on a shared machine move them little; wall time is used only where a person waits (``info``, the TUI's
first rows). Peak RSS comes from wait4 too. The checkout is byte-compiled first, as an installed mosqdb
is (a run where PYTHONDONTWRITEBYTECODE is set would compile every module again in every run).

The figures (``--list`` prints them; ``--only`` takes names or group names):

* group ``db`` (the 371 MB, 2.4 M-chunk file, ``--big``): ``dump-json``, ``dump-text``, ``export-six``,
  ``export-default``, ``info``;
* group ``store`` (the 2.1 sqlite store made from it, ``--store``; made once with ``mosqdb migrate`` if
  absent): ``store-info``, ``store-check``, ``store-stats``, ``store-dump-json``, ``store-export``;
* group ``big10`` (the 10 M-chunk file, ``--big10``, made by ``bench/make_big10.sh``; skipped with a
  note when absent): ``big10-check``, ``big10-info``, ``big10-export-six``, ``big10-tui``;
* group ``spark`` (PySpark, local[2]): ``spark-every-column``, every column of the big file's stored messages
  (a ``noop`` write) through ``to_dataframe(cache="parquet")`` once its copy exists, against Spark's own
  Parquet reader on the same rows (the anchor; CPU of this process and its JVM and Python workers).

The table: figure, mosqdb min–median–max, anchor min–median–max, the ratio (min–median–max of the
per-pair ratios), the target and whether the median meets it. ``--json`` (default
``bench/results/run_all.json``) keeps every sample; ``bench/readme_table.py`` writes the README's
table from it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from timing import Run, child, spread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
ORACLES = os.path.expanduser("~/.cache/mosqdb-oracles")
MOSQDB = [sys.executable, "-m", "mosqdb"]
SIX = "cfg,msg_store,client_msg,retain,sub,client"
AT = ["--at", "1700000000"]  # a fixed reference time: the same output on every run


@dataclass
class Bench:
    """One figure: ``mine`` against ``anchor`` (None: an absolute target on ``metric``)."""

    name: str
    group: str
    label: str
    metric: str  # "cpu", "wall" or "rss"
    target: float  # the ratio (with an anchor) or the absolute figure (seconds / MiB) not to exceed
    mine: Callable[[str], list[str]]  # the command, given a scratch directory
    anchor: Callable[[str], list[str]] | None = None
    anchor_label: str = ""
    needs: tuple[str, ...] = ()  # files that must exist ("big", "big10", "store")
    extra: tuple[tuple[str, float], ...] = ()  # further absolute limits: (metric, limit)
    custom: Callable[[Paths], dict[str, float]] | None = None  # measured in-process (the TUI)
    custom_pair: Callable[[Paths], tuple[dict[str, float], dict[str, float]]] | None = None  # (mine, anchor)


@dataclass
class Paths:
    big: str
    big10: str
    store: str


@dataclass
class Result:
    name: str
    group: str
    label: str
    metric: str
    target: float
    anchor_label: str
    mine: list[dict[str, float]] = field(default_factory=list)
    anchor: list[dict[str, float]] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    extra: list[dict[str, float]] = field(default_factory=list)  # each: metric, limit, median
    met: bool | None = None
    note: str = ""


def oracle(version: str) -> str:
    """``mosquitto_db_dump`` of Mosquitto ``version``, built from the shared sources when missing."""
    path = os.path.join(ORACLES, version, "mosquitto_db_dump")
    if not os.path.exists(path):
        script = os.path.join(SHARED, "tools", "build-mosquitto.sh")
        print(f"building {version}'s mosquitto_db_dump with {script} ...", flush=True)
        subprocess.run(["bash", script, version], check=True, stdout=subprocess.DEVNULL)
    return path


def benches(p: Paths) -> list[Bench]:
    d20, d21 = (lambda: oracle("2.0.22")), (lambda: oracle("2.1.2"))
    out = [
        Bench("dump-json", "db", "`dump --json`, every chunk", "cpu", 0.4,
              lambda t: [*MOSQDB, "dump", "--json", *AT, p.big], lambda t: [d21(), "--json", p.big],
              "2.1.2 `mosquitto_db_dump --json`", ("big",)),
        Bench("dump-text", "db", "`dump` (text), every chunk", "cpu", 1.0,
              lambda t: [*MOSQDB, "dump", p.big, "-q"], lambda t: [d20(), p.big],
              "2.0.22 `mosquitto_db_dump` (full text dump)", ("big",)),
        Bench("export-six", "db", "`export --to parquet`, the six chunk kinds", "cpu", 1.0,
              lambda t: [*MOSQDB, "export", "--to", "parquet", "--kind", SIX, *AT, "-q", "-o", fresh(t), p.big],
              lambda t: [d20(), p.big], "2.0.22 full text dump", ("big",)),
        Bench("export-default", "db", "`export --to parquet` (default: with `messages`)", "cpu", 1.2,
              lambda t: [*MOSQDB, "export", "--to", "parquet", *AT, "-q", "-o", fresh(t), p.big],
              lambda t: [d20(), p.big], "2.0.22 full text dump", ("big",)),
        Bench("info", "db", "`info`", "wall", 0.5,
              lambda t: [*MOSQDB, "info", p.big], lambda t: [d20(), "--stats", p.big],
              "2.0.22 `mosquitto_db_dump --stats`", ("big",)),
    ]
    for name, args in (("info", ["info"]), ("check", ["check"]), ("stats", ["stats"]),
                       ("dump-json", ["dump", "--json", *AT]), ("export", ["export", "--to", "parquet", *AT, "-q"])):
        def mine(t: str, args: list[str] = args, f: str = p.store) -> list[str]:
            return [*MOSQDB, *args, *(["-o", fresh(t)] if args[0] == "export" else []), f]

        def anchor(t: str, args: list[str] = args, f: str = p.big) -> list[str]:
            return [*MOSQDB, *args, *(["-o", fresh(t)] if args[0] == "export" else []), f]

        out.append(Bench(f"store-{name}", "store", f"2.1 store: `{' '.join(a for a in args if a not in AT)}`",
                         "cpu", 1.5, mine, anchor, "the same command on the .db", ("big", "store")))
    out += [
        Bench("big10-check", "big10", "10 M chunks: `check`", "wall", 3.0,
              lambda t: [*MOSQDB, "check", p.big10], needs=("big10",), extra=(("rss", 300.0),)),
        Bench("big10-info", "big10", "10 M chunks: `info`", "wall", 1.0,
              lambda t: [*MOSQDB, "info", p.big10], needs=("big10",)),
        Bench("big10-export-six", "big10", "10 M chunks: `export --to parquet`, six kinds", "cpu", 1.0,
              lambda t: [*MOSQDB, "export", "--to", "parquet", "--kind", SIX, *AT, "-q", "-o", fresh(t), p.big10],
              lambda t: [d20(), p.big10], "2.0.22 full text dump", ("big10",)),
        Bench("big10-tui", "big10", "10 M chunks: TUI first rows (peak RSS through goto, filters, search, paging)",
              "wall", 0.6, lambda t: [], needs=("big10",), extra=(("rss", 300.0),), custom=tui_first_rows),
        Bench("spark-every-column", "spark", "Spark: every column of `msg_store` (`to_dataframe(cache=\"parquet\")`, "
              "its copy made)", "cpu", 2.0, lambda t: [], anchor_label="Spark's Parquet reader, same rows",
              needs=("big",), custom_pair=spark_every_column),
    ]
    return out


_SPARK: dict[str, object] = {}


def spark_every_column(p: Paths) -> tuple[dict[str, float], dict[str, float]]:
    """One pair: Spark's Parquet reader on the stored messages exported once, then ``to_dataframe`` through
    mosqdb's Parquet cache (its copy made at the first call), each written to Spark's ``noop`` sink; CPU of the
    whole process tree (the JVM, the Python workers). A ratio ≤ 2 is a read at ≥ 0.5× the Parquet reader's speed."""
    from bench_spark import measured

    import exporters.spark as xs
    from exporters.files import export_parquet

    if not _SPARK:
        tmp = tempfile.mkdtemp(prefix="run-all-spark-")
        parquet = os.path.join(tmp, "msg_store.parquet")
        export_parquet([p.big], parquet, kinds=["msg_store"], single_file=True)
        spark = xs.session("local[2]", app="run-all-spark")
        _SPARK.update(spark=spark, parquet=parquet, tmp=tmp)
    spark, parquet = _SPARK["spark"], str(_SPARK["parquet"])

    def noop(df: object) -> None:
        df.write.format("noop").mode("overwrite").save()  # type: ignore[attr-defined]

    def mine() -> None:
        noop(xs.to_dataframe(spark, p.big, "msg_store", cache="parquet"))

    def anchor() -> None:
        noop(spark.read.parquet(parquet))  # type: ignore[attr-defined]

    if not _SPARK.get("warm"):  # the JVM's first queries and the cache's copy are not what is measured
        anchor()
        mine()
        _SPARK["warm"] = True
    nan = float("nan")
    wall, cpu = measured(mine)
    a_wall, a_cpu = measured(anchor)
    return {"wall": wall, "cpu": cpu, "rss": nan}, {"wall": a_wall, "cpu": a_cpu, "rss": nan}


def stop_spark() -> None:
    """Stop the Spark session of the ``spark`` figures and remove its export (and the cache's copy)."""
    if _SPARK:
        from exporters.spark import cache

        _SPARK["spark"].stop()  # type: ignore[attr-defined]
        shutil.rmtree(str(_SPARK["tmp"]), ignore_errors=True)
        cache_dir = cache.safefile.user_cache_dir()
        for name in os.listdir(cache_dir):
            if name.startswith(cache.PREFIX):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(cache_dir, name))
        _SPARK.clear()


def fresh(tmp: str) -> str:
    """An export's output directory, emptied (every run writes the whole dataset)."""
    out = os.path.join(tmp, "export")
    shutil.rmtree(out, ignore_errors=True)
    return out


def tui_first_rows(p: Paths) -> dict[str, float]:
    """The TUI on the 10 M-chunk file (``bench_tui.first_paint``): first rows, peak RSS after use."""
    from bench_tui import first_paint

    marks = first_paint(p.big10)
    return {"wall": marks.get("first_row", float("nan")), "cpu": float("nan"),
            "rss": max(marks.get("peak_rss_mib", 0.0), marks.get("peak_after_use_mib", 0.0))}


def sample(run: Run) -> dict[str, float]:
    return {"wall": run.wall, "cpu": run.cpu, "rss": run.rss}


def measure(b: Bench, p: Paths, runs: int, tmp: str) -> Result:
    r = Result(b.name, b.group, b.label, b.metric, b.target, b.anchor_label)
    env = {**os.environ, "PYTHONPATH": ROOT}
    for _ in range(runs):
        if b.custom_pair is not None:
            mine, anchor = b.custom_pair(p)
            r.mine.append(mine)
            r.anchor.append(anchor)
            r.ratios.append(mine[b.metric] / anchor[b.metric])
            continue
        if b.custom is not None:
            r.mine.append(b.custom(p))
        else:
            r.mine.append(sample(child(b.mine(tmp), cwd=ROOT, env=env)))
        if b.anchor is not None:
            r.anchor.append(sample(child(b.anchor(tmp), cwd=ROOT, env=env)))
            r.ratios.append(r.mine[-1][b.metric] / r.anchor[-1][b.metric])
    shutil.rmtree(os.path.join(tmp, "export"), ignore_errors=True)
    value = statistics.median(r.ratios if r.ratios else [m[b.metric] for m in r.mine])
    r.met = value <= b.target
    for metric, limit in b.extra:
        med = statistics.median(m[metric] for m in r.mine)
        r.extra.append({"metric": metric, "limit": limit, "median": med})
        r.met = r.met and med <= limit
    return r


UNIT = {"cpu": "s CPU", "wall": "s wall", "rss": "MiB"}


def figure(samples: list[dict[str, float]], metric: str) -> str:
    if not samples:
        return "–"
    fmt = "{:.0f}" if metric == "rss" else "{:.2f}"
    text = f"{spread([s[metric] for s in samples], fmt)} {UNIT[metric]}"
    if metric != "rss" and not any(s["rss"] != s["rss"] for s in samples):  # (NaN: not measured)
        text += f", {spread([s['rss'] for s in samples], '{:.0f}')} MiB"
    return text


def target_text(r: Result | dict) -> str:
    d = r if isinstance(r, dict) else asdict(r)
    if d["anchor_label"]:
        main = f"≤ {d['target']:g}× {d['metric'].upper() if d['metric'] == 'cpu' else d['metric']}"
    else:
        main = f"≤ {d['target']:g} {UNIT[d['metric']]}"
    for x in d["extra"]:
        main += f", ≤ {x['limit']:g} {UNIT[x['metric']]}"
    return main


def rows(results: list[dict]) -> list[tuple[str, str, str, str, str, str]]:
    """(figure, mosqdb, anchor, ratio, target, met?) per result, as text: the printed and the README table."""
    out = []
    for d in results:
        if d["note"]:
            out.append((d["label"], "–", d["anchor_label"] or "–", "–", target_text(d), f"not measured: {d['note']}"))
            continue
        anchor = f"{d['anchor_label']}: {figure(d['anchor'], d['metric'])}" if d["anchor_label"] else "–"
        ratio = f"{spread(d['ratios'])}×" if d["ratios"] else "–"
        met = "yes" if d["met"] else "**no**"
        out.append((d["label"], figure(d["mine"], d["metric"]), anchor, ratio, target_text(d), met))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="pairs per figure (default 3)")
    ap.add_argument("--only", default="", help="comma-separated figure or group names (default: all)")
    ap.add_argument("--big", default=os.environ.get("MOSQDB_BIG", os.path.join(os.path.dirname(ROOT), "big", "big.db")))
    ap.add_argument("--big10", default=os.environ.get("MOSQDB_BIG10", os.path.join(os.path.dirname(ROOT), "big", "big10.db")))
    ap.add_argument("--store", default=None, help="the sqlite store made from --big (default: beside it, .sqlite3)")
    ap.add_argument("--json", default=os.path.join(ROOT, "bench", "results", "run_all.json"))
    ap.add_argument("--list", action="store_true", help="print the figures and exit")
    a = ap.parse_args()
    p = Paths(a.big, a.big10, a.store or os.path.splitext(a.big)[0] + ".sqlite3")
    chosen = benches(p)
    if a.list:
        for b in chosen:
            print(f"{b.name:18s} {b.group:6s} {b.label}")
        return
    if a.only:
        wanted = {w.strip() for w in a.only.split(",") if w.strip()}
        unknown = wanted - {b.name for b in chosen} - {b.group for b in chosen}
        if unknown:
            sys.exit(f"run_all.py: no figure or group {', '.join(sorted(unknown))} (--list shows them)")
        chosen = [b for b in chosen if b.name in wanted or b.group in wanted]
    if any("store" in b.needs for b in chosen) and not os.path.exists(p.store) and os.path.exists(p.big):
        print(f"making the 2.1 store {p.store} from {p.big} (once) ...", flush=True)
        child([*MOSQDB, "migrate", p.big, "--to", "sqlite", "-o", p.store, "-q"], cwd=ROOT,
              env={**os.environ, "PYTHONPATH": ROOT})
    compile_checkout()
    tmp = tempfile.mkdtemp(prefix="run-all-")
    results: list[Result] = []
    loads: list[float] = []
    try:
        for b in chosen:
            missing = [n for n in b.needs if not os.path.exists(getattr(p, n))]
            if missing:
                what = ", ".join(shown(getattr(p, n)) for n in missing)
                hint = " (make it with bench/make_big10.sh)" if "big10" in missing else ""
                results.append(Result(b.name, b.group, b.label, b.metric, b.target, b.anchor_label,
                                      note=f"{what} missing{hint}"))
                print(f"{b.name}: skipped, {results[-1].note}", flush=True)
                continue
            loads.append(os.getloadavg()[0])
            t = time.perf_counter()
            results.append(measure(b, p, a.runs, tmp))
            r = results[-1]
            print(f"{b.name}: {figure(r.mine, b.metric)}"
                  + (f" | anchor {figure(r.anchor, b.metric)} | ratio {spread(r.ratios)}" if r.ratios else "")
                  + f" | {'met' if r.met else 'NOT met'} ({time.perf_counter() - t:.0f} s, load {loads[-1]:.1f})",
                  flush=True)
            save(a, p, results, loads)  # after every figure: an interrupted run keeps what it measured
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        stop_spark()
    data = save(a, p, results, loads)
    print()
    print(markdown(data))
    print(f"\nwritten: {a.json}")


def compile_checkout() -> None:
    """Byte-compile the checkout's packages once (``__pycache__``, ignored by git), as installing mosqdb
    does: where PYTHONDONTWRITEBYTECODE is set, every run would otherwise compile its modules from
    source again, a quarter of a second of CPU counted against every mosqdb figure and against no anchor."""
    import compileall

    for package in ("codec", "exporters", "inspector", "mosqdb"):
        path = os.path.join(ROOT, package)
        if os.path.isdir(path):
            compileall.compile_dir(path, quiet=1)


def shown(path: str) -> str:
    """``path`` as the results name it: relative to the checkout (the default big files sit beside it), so the
    committed JSON names no machine's directories."""
    return os.path.relpath(os.path.abspath(path), ROOT)


def save(a: argparse.Namespace, p: Paths, results: list[Result], loads: list[float]) -> dict:
    """Write the run so far to ``--json``; returns what was written."""
    data = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": a.runs,
            "commit": git_head(), "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "load": [min(loads), max(loads)] if loads else None,
            "files": {"big": shown(p.big), "big10": shown(p.big10), "store": shown(p.store)},
            "results": [asdict(r) for r in results]}
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")
    return data


def git_head() -> str:
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def markdown(data: dict) -> str:
    """The table of a run (``run_all.json``) as Markdown, with a line saying when and how it was measured."""
    load = data.get("load")
    head = (f"Measured by `bench/run_all.py` on {data['when']} (commit {data['commit'] or '?'}, "
            f"{data['host']['cpus']} cores, {data['runs']} run{'' if data['runs'] == 1 else 's'} per figure, alternating "
            "with the anchor"
            + (f", load average {load[0]:.1f}–{load[1]:.1f}" if load else "") + "). Figures are min–median–max; "
            "a target is met when the median ratio (or figure) is within it.")
    lines = [head, "", "| figure | mosqdb | anchor | ratio | target | met? |", "| --- | --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows(data["results"])]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
