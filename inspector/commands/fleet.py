"""`mosqdb fleet DIR|GLOB... --broker V [--to V2] [--master URL] [-o OUT]`: which of many devices' files fail.

The broker model (``check --broker``) on every file, on Spark: the files are packed into tasks by bytes and
the model runs on the executors, one row per file and release (the ``verdicts`` kind of the data source).
The report: ``OUT/verdicts.parquet`` (every row) and ``OUT/summary.txt`` (also printed): the files that fail
— refused, crashing, or losing data the file holds — grouped by reason (the model's stop rule and the
broker's log line); with ``--to``, what the upgrade from ``--broker`` loses per file. Exit 0 when every file
loads without loss on the release asked (``--to`` if given, else ``--broker``) and no upgrade loses data,
1 otherwise, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from collections import defaultdict
from typing import Any

from codec.values import printable
from inspector.commands import command

COMMANDS = ("fleet",)
HELP_ORDER = 170

SHOWN = 10  # files named per reason in the summary (all of them are in the Parquet)


def register(sub: argparse._SubParsersAction) -> None:
    from inspector.commands import add_at

    p = command(sub, "fleet", help="the broker model on many devices' files on Spark: which fail, grouped by "
                "reason, and what an upgrade loses (Parquet + a text summary)",
                description=__doc__.split("\n\n", 1)[1].strip()
                + " Needs PySpark (the spark extra: pip install 'mosqdb[spark]').", run=cmd_fleet)
    p.add_argument("inputs", nargs="+", metavar="DIR|GLOB",
                   help="directories (every *.db and *.sqlite3 below them) or glob patterns (quote them: ** "
                        "recurses)")
    p.add_argument("--broker", metavar="VERSION", required=True, help="the Mosquitto release running now, e.g. 2.0.18")
    p.add_argument("--to", metavar="VERSION", help="the release to upgrade to: what it loses per file")
    p.add_argument("-o", "--output", metavar="OUT", help="report directory: verdicts.parquet and summary.txt "
                   "(default: the summary on stdout only)")
    add_at(p, "session and message expiry (every file, every release)")
    p.add_argument("--master", metavar="URL", help="Spark master: local[*] (default), spark://HOST:PORT, yarn, ... "
                   "(on a cluster the files must be readable at the same path on every worker)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="any Spark setting, repeatable (spark.sql.files.maxPartitionBytes and "
                        "spark.sql.files.openCostInBytes pack the files into tasks)")
    p.add_argument("--no-ship-code", action="store_true",
                   help="do not add mosqdb's code to the executors' Python path (their Python has mosqdb)")


def find_files(inputs: list[str]) -> list[str]:
    """Every ``*.db`` and ``*.sqlite3`` below the directories and every file the patterns match, absolute, sorted,
    once each (a store's rows say the model does not cover it: not a file left out unseen)."""
    from codec.sources import persistence_files
    from inspector.commands import UsageError

    out: set[str] = set()
    for item in inputs:
        if os.path.isdir(item):
            found = persistence_files(item, below=True)
        else:
            found = [f for f in glob.glob(item, recursive=True) if os.path.isfile(f)]
            if not found and os.path.isfile(item):
                found = [item]
        if not found:
            raise UsageError(f"{item}: no *.db or *.sqlite3 files" if os.path.isdir(item) else f"{item}: matches no file")
        out.update(os.path.abspath(f) for f in found)
    return sorted(out)


def failing(row: dict[str, Any]) -> bool:
    """``check --broker``'s test: the broker does not load the file, or loses data the file holds."""
    return row["verdict"] != "loads" or (row["errors"] or 0) > 0


def summary(rows: list[dict[str, Any]], files: int, broker: str, to: str | None) -> tuple[str, bool]:
    """The text summary and whether anything fails (on the release asked) or an upgrade loses data."""
    lines = [f"{files:,} file(s), release(s) {broker}" + (f" and {to}" if to else "")]
    bad = False
    for release in [broker, *([to] if to else [])]:
        mine = [r for r in rows if r["release"] == release]
        verdicts: dict[str, int] = defaultdict(int)
        for r in mine:
            verdicts[r["verdict"]] += 1
        fails = [r for r in mine if failing(r)]
        lines.append("")
        lines.append(f"Mosquitto {release}: " + ", ".join(f"{n:,} {v}" for v, n in sorted(verdicts.items()))
                     + f"; {len(fails):,} fail")
        if release == (to or broker) and fails:
            bad = True
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in fails:
            groups[r["reason"] or r["verdict"]].append(r)
        for reason, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            details: dict[str, int] = defaultdict(int)
            for r in members:
                details[r["detail"] or ""] += 1
            detail = max(details.items(), key=lambda kv: (kv[1], kv[0]))[0]  # the most common line
            lines.append(f"  {len(members):,} × {reason}" + (f", e.g. {printable(detail)}" if detail else ""))
            names = sorted(r["file"] for r in members)
            lines.extend(f"      {printable(n)}" for n in names[:SHOWN])
            if len(names) > SHOWN:
                lines.append(f"      … and {len(names) - SHOWN:,} more (verdicts.parquet)")
    if to:
        losing = sorted((r for r in rows if r["release"] == to and r["loses_data"]), key=lambda r: r["file"])
        lines.append("")
        lines.append(f"Upgrade {broker} → {to}: {len(losing):,} file(s) lose data")
        for r in losing[:SHOWN * 5]:
            what = [f"{r['sessions_lost']} session(s)" if r["sessions_lost"] else "",
                    f"{r['queued_lost']} queued message(s)" if r["queued_lost"] else "",
                    f"{r['retained_lost']} retained topic(s)" if r["retained_lost"] else "",
                    "" if r["starts"] else "the broker no longer starts"]
            lines.append(f"  {printable(r['file'])}: " + (", ".join(w for w in what if w) or r["verdict"]))
        if len(losing) > SHOWN * 5:
            lines.append(f"  … and {len(losing) - SHOWN * 5:,} more (verdicts.parquet)")
        bad = bad or bool(losing)
    return "\n".join(lines) + "\n", bad


def write_report(out: str, table: Any, text: str) -> None:
    """OUT/verdicts.parquet and OUT/summary.txt, each renamed into place once complete."""
    import pyarrow.parquet as pq

    from codec import safefile

    safefile.make_dirs(out)
    mode = safefile.no_wider_than_inputs(0o644)  # verdicts name clients: as private as the files
    with safefile.atomic_replace(os.path.join(out, "verdicts.parquet"), new_mode=mode) as rep:
        pq.write_table(table, rep.file, compression="zstd")
    with safefile.atomic_replace(os.path.join(out, "summary.txt"), new_mode=mode) as rep:
        rep.file.write(text.encode("utf-8"))


def cmd_fleet(args: argparse.Namespace) -> int:
    from codec.broker.versions import parse_version
    from codec.broker.versions import text as version_text
    from codec.errors import CodecError
    from inspector.commands import UsageError
    from inspector.commands.shared.spark import SPARK_HINT

    try:
        broker = version_text(parse_version(args.broker))
    except CodecError as exc:
        raise UsageError(str(exc)) from None
    try:
        to = version_text(parse_version(args.to)) if args.to else None
    except CodecError as exc:
        raise UsageError(str(exc).replace("--broker", "--to", 1)) from None
    if to == broker:
        raise UsageError(f"--to {to} is the release --broker names: give the release to upgrade to")
    if args.output and os.path.exists(args.output) and not os.path.isdir(args.output):
        raise UsageError(f"{args.output}: exists and is not a directory (the report is a directory)")
    files = find_files(args.inputs)
    at = None
    if args.at:
        from inspector.commands.shared.writing import parse_at

        at = parse_at(args.at, files[0])
    try:
        import exporters.spark as xs
    except ImportError:
        raise UsageError(SPARK_HINT) from None
    if not xs.HAVE_SPARK:
        raise UsageError(SPARK_HINT)
    try:
        conf = xs.parse_conf(args.conf)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        spark = xs.session(args.master, app="mosqdb-fleet", conf=conf,  # the driver only schedules and collects
                           ship_code=False if args.no_ship_code else None, quick=True)
    except Exception as exc:  # a bad master URL or setting: Spark's first line
        raise UsageError(f"cannot start Spark: {xs.error_line(exc)}") from None
    try:
        releases = ",".join([broker, *([to] if to else [])])
        df = xs.verdicts_dataframe(spark, files, releases, at=at, upgrade_from=broker if to else None)
        try:
            table = df.toArrow()
        except Exception as exc:
            line = xs.error_line(exc)
            import contextlib

            with contextlib.suppress(Exception):
                spark.stop()
            raise CodecError(line) from None
    finally:
        import contextlib

        with contextlib.suppress(Exception):
            spark.stop()
    from exporters.spark.verdicts import SCHEMA

    table = table.cast(SCHEMA) if table.schema != SCHEMA else table
    rows = table.to_pylist()
    text, bad = summary(rows, len(files), broker, to)
    if args.output:
        write_report(args.output, table, text)
    sys.stdout.write(text)
    if args.output:
        print(f"report: {os.path.join(args.output, 'verdicts.parquet')}, {os.path.join(args.output, 'summary.txt')}",
              file=sys.stderr)
    return 1 if bad else 0
