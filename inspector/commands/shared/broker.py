"""`mosqdb check FILE --broker VERSION|auto [--conf mosquitto.conf]`: what that Mosquitto does with the file.

The verdict (loads / refuses / crashes, with the lines the broker logs) and what it serves after
loading: sessions kept and dropped (and why), messages queued per client, retained topics. The
model is :mod:`codec.broker`; this module parses the options, runs it with the plain checker's
findings, and prints text or one JSON object. Exit 0 when the broker loads the file and nothing
that matters for it is wrong, 1 otherwise, 2 for usage errors (unknown version, unreadable conf).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from codec.broker.conf import BrokerConf, ConfError, read_conf
from codec.broker.versions import UnknownVersion, Version, auto_version, parse_version
from codec.broker.versions import text as version_text
from codec.errors import CodecError, unreachable
from codec.values import json_text, printable
from inspector.commands import UsageError

SHOWN = 20  # rows of each list in the text output (--json lists all)


def conf_db_path(conf: BrokerConf, version: Version | None) -> str:
    """The file ``version`` reads by ``conf`` (None: ``--broker auto``, the release is read from the file: only when
    every release reads the same file; a usage error otherwise)."""
    if version is not None:
        return str(conf.db_path_for(version))
    old, new = conf.db_path_for((1, 6, 15)), conf.db_path_for((2, 0, 0))
    if old != new:
        raise UsageError(f"{conf.path}: persistence_location {conf.persistence_location} has no trailing '/': Mosquitto "
                         f"1.6 and earlier read {old}, 2.0 and later {new}; give --broker VERSION")
    return str(new)


def misjoined(conf: BrokerConf, path: str) -> str | None:
    """A note when ``path`` (the release's file, :func:`conf_db_path`) is absent but the other join of
    persistence_location and persistence_file is a file: that release does not read it, and starts without it."""
    others = {str(conf.db_path_for(v)) for v in ((1, 6, 15), (2, 0, 0))} - {path}
    there = [p for p in others if os.path.isfile(p)]
    if os.path.lexists(path) or not there:
        return None
    return (f"{path}: note: {there[0]} is there, but this release does not read it (persistence_location "
            f"{conf.persistence_location} has no trailing '/': 1.6 and earlier join it to persistence_file as it is, "
            "2.0 and later with a '/')")


def conf_db_file(conf: BrokerConf, version: Version | None, command: str) -> str:
    """:func:`conf_db_path`, with the :func:`misjoined` note on stderr when there is one."""
    path = conf_db_path(conf, version)
    note = misjoined(conf, path)
    if note is not None:
        print(printable(f"mosqdb {command}: {note}"), file=sys.stderr)
    return path


def explicit_version(text: str | None) -> Version | None:
    """``--broker VERSION`` when it names a release (None: not given, or auto)."""
    return None if not text or text == "auto" else version_of(text, "")


def load_conf(path: str | None) -> BrokerConf | None:
    if path is None:
        return None
    try:
        return read_conf(path)
    except ConfError as exc:
        raise UsageError(str(exc)) from None


def resolve(args: argparse.Namespace) -> tuple[str, Version, BrokerConf | None]:
    """(the db file, the release, the configuration) from ``FILE``, ``--broker`` and ``--conf``; usage errors exit 2."""
    conf = load_conf(args.conf)
    path = args.file
    if path is None:
        if conf is None:
            raise UsageError("give FILE (or --conf MOSQUITTO.CONF, whose persistence_location names it)")
        if conf.persists_to_store:  # 2.1's plugin: the store it reads
            if conf.sqlite_path is None:
                raise UsageError(f"{args.conf}: the persist-sqlite plugin is loaded, but neither persistence_location "
                                 "nor plugin_opt_db_file says where its store is: give FILE")
            path = str(conf.sqlite_path)
        else:
            path = conf_db_file(conf, explicit_version(args.broker), getattr(args, "command", "check"))
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a mosquitto.db file")
    why = unreachable(path)
    absent = why is not None and (why.startswith("no such file") or os.path.islink(path))
    if why is not None and (not absent or getattr(args, "command", "") != "guard"):
        raise UsageError(f"{path}: {why}")  # guard starts from an absent file; one it may not reach is no such thing
    return path, version_of(args.broker, path), conf


def version_of(text: str | None, path: str) -> Version:
    if not text:
        raise UsageError("--broker VERSION is required (e.g. --broker 2.0.18, or --broker auto)")
    if text == "auto":
        return auto_for(path)
    try:
        return parse_version(text)
    except UnknownVersion as exc:
        raise UsageError(exc.reason) from None


def auto_for(path: str) -> Version:
    """The release ``--broker auto`` models: from the header's db version (and 2.1's clock-based ids)."""
    from codec.broker.storemodel import auto_release
    from codec.layouts import FILE_HEADER_SIZE, stored_version

    release = auto_release(path)
    if release is not None:
        return release
    try:
        with open(path, "rb") as f:
            head = f.read(FILE_HEADER_SIZE)
    except OSError:
        return auto_version(None)
    db_version = stored_version(head) if len(head) == FILE_HEADER_SIZE else None
    clock = False
    if db_version == 6:
        try:
            from codec import DbFile

            with DbFile(path) as db:
                for c in db.stream():
                    if c.record.kind == "cfg":
                        from codec.broker.versions import CLOCK_ID_MIN

                        clock = int(c.record["last_db_id"]) >= CLOCK_ID_MIN
                    break
        except CodecError:
            pass
    return auto_version(db_version, clock)


def plain_findings(args: argparse.Namespace, path: str, at: float) -> list[Any]:
    """The plain checker's findings (none when the file cannot be opened as a db: the model says why)."""
    from codec.ops.check import Finding, check_file
    from codec.sources import open_any
    from inspector.commands.shared.progress import progress

    try:
        db = open_any(path, endian=getattr(args, "endian", "little"))
    except CodecError:
        return []
    with db, progress(args, "checking") as bar:
        findings = list(check_file(db, at=at, progress=bar))
    if os.path.islink(path):
        findings.append(Finding("warning", "symlink", f"the path is a symlink to {os.path.realpath(path)}"))
    return findings


def run_model(path: str, version: Version, conf: BrokerConf | None, at: float) -> Any:
    from codec.broker.rules import V21
    from codec.broker.storemodel import predict_any
    from codec.broker.versions import text as version_text
    from codec.sources import NOT_READABLE, format_of, store_refusal

    fmt = format_of(path) if os.path.exists(path) else None
    if fmt is not None and not fmt.chunk_bytes:  # a sqlite file: a store the plugin reads, or not
        reason = store_refusal(path)
        if reason is not None and not reason.startswith(NOT_READABLE):
            raise UsageError(f"{path}: {reason}: neither a mosquitto.db file nor a store the persist-sqlite "
                             "plugin reads")
        if version < V21:
            raise UsageError(f"{path}: is a Mosquitto 2.1 sqlite store (the persist-sqlite plugin's); Mosquitto "
                             f"{version_text(version)} has no such plugin and reads a mosquitto.db")
    pred = predict_any(path, version, at=at, conf=conf)
    pred.cost = file_cost(path, version, conf)
    return pred


def file_cost(path: str, version: Version, conf: BrokerConf | None) -> Any:
    """What the release pays to load and autosave the file (codec.broker.cost; None for a file it cannot count)."""
    from codec.broker import cost

    try:
        features = cost.features_of(path, version)
    except (CodecError, OSError):
        return None
    from codec.sources import format_of

    rows = os.path.isfile(path) and not format_of(path).chunk_bytes  # kept as a database's rows: the plugin's
    sqlite = rows or (conf is not None and conf.persists_to_store)
    return cost.predict(features, version, sqlite=sqlite,
                        autosave_interval=conf.autosave_interval if conf is not None else None)


def cmd_check_broker(args: argparse.Namespace) -> int:
    from inspector.commands.shared.writing import parse_at

    path, version, conf = resolve(args)
    at = parse_at(getattr(args, "at", None), path)
    pred = run_model(path, version, conf, at)
    from codec.broker.findings import broker_findings

    findings = broker_findings(plain_findings(args, path, at), pred)
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors
    bad = pred.verdict != "loads" or errors > 0
    verdict = f"Mosquitto {pred.broker} {pred.verdict}"
    if args.json:
        data = report(path, args.broker, pred)
        data["findings"] = [f.to_json() for f in findings]
        data["summary"] = {"errors": errors, "warnings": warnings, "verdict": verdict}
        print(json_text(data))
    else:
        for line in text_lines(path, pred):
            print(printable(line))
        for f in findings:
            print(printable(f"{f.severity}: {path}: {f.where() + ': ' if f.where() else ''}{f.message} [{f.rule}]"))
        print(printable(f"{path}: {verdict}: {errors} error(s), {warnings} warning(s)"), file=sys.stderr)
    if pred.verdict == "unknown":
        return 3  # the model cannot say what the broker does: neither "loads" (0) nor "does not" (1)
    if pred.stop is not None and pred.stop.rule in NOT_A_DB:
        return 2  # not a Mosquitto file at all: the exit status of plain `check` on it (the verdict is printed)
    return 1 if bad else 0


NOT_A_DB = ("bad-magic", "short-header")


def report(path: str, asked: str | None, pred: Any) -> dict[str, Any]:
    """The JSON object: the keys the issue fixes first (broker, verdict, log, sessions, queued, retained)."""
    from codec.views.timeview import iso

    data = {"file": path, **pred.to_json(), "asked": asked, "at": iso(pred.at), "format": pred.format_key,
            "db_version": pred.db_version,
            "ignored": pred.ignored}
    cost = getattr(pred, "cost", None)
    data["cost"] = None if cost is None else cost.to_json()
    if pred.log_more:
        data["log_more"] = pred.log_more
    return data


def _some(items: list[str], n: int = SHOWN) -> str:
    more = f", … and {len(items) - n:,} more (--json lists all)" if len(items) > n else ""
    return ", ".join(items[:n]) + more


def _grouped(log: list[str]) -> list[tuple[str, int]]:
    """The log with each run of one repeated line as (line, times)."""
    out: list[tuple[str, int]] = []
    for line in log:
        if out and out[-1][0] == line:
            out[-1] = (line, out[-1][1] + 1)
        else:
            out.append((line, 1))
    return out


def text_lines(path: str, pred: Any) -> list[str]:
    from codec.views.timeview import iso

    head = f"{path}: Mosquitto {pred.broker} {pred.verdict}"
    if pred.crash_when:
        head += f" (it starts, then crashes {pred.crash_when})"
    if pred.ignored == "symlink":
        head += " (a symlinked file is ignored: it starts empty)"
    if pred.ignored == "persistence-off":
        head += " (persistence is off in the configuration: the file is not read)"
    if pred.unknown is not None:
        where = f" at offset {pred.unknown.offset:,}" if pred.unknown.offset is not None else ""
        head += f" (what the broker does is not known{where}: {pred.unknown.reason})"
    kind = "a sqlite store" if pred.format_key == "sqlite" else f"db version {pred.db_version or '-'}"
    lines = [head + f"   [{kind}, as of {iso(pred.at)}]"]
    grouped = _grouped(pred.log)
    for i, (line, n) in enumerate(grouped[:SHOWN]):
        lines.append(("  log:      " if i == 0 else "            ") + line + (f"   (× {n:,})" if n > 1 else ""))
    more = sum(n for _line, n in grouped[SHOWN:]) + pred.log_more
    if more:
        lines.append(f"            … and {more:,} more log lines")
    if pred.verdict in ("refuses", "unknown") or (pred.verdict == "crashes" and not pred.crash_when):
        return lines
    lines.append(f"  sessions: {len(pred.kept):,} kept, {len(pred.dropped):,} dropped")
    for cid in pred.kept[:SHOWN]:
        extra = f", {pred.incoming[cid]} incoming" if pred.incoming.get(cid) else ""
        lines.append(f"    kept     {cid}: {pred.queued.get(cid, 0):,} queued{extra}")
    if len(pred.kept) > SHOWN:
        lines.append(f"    … and {len(pred.kept) - SHOWN:,} more kept (--json lists all)")
    for d in pred.dropped[:SHOWN]:
        lines.append(f"    dropped  {d.client_id}: {d.reason}")
    if len(pred.dropped) > SHOWN:
        lines.append(f"    … and {len(pred.dropped) - SHOWN:,} more dropped (--json lists all)")
    lines.append(f"  retained: {len(pred.retained):,} topic(s)" + (f": {_some(pred.retained)}" if pred.retained else ""))
    for i, what in enumerate(pred.at_start[:SHOWN]):
        lines.append(("  at start: " if i == 0 else "            ") + what)
    if len(pred.at_start) > SHOWN:
        lines.append(f"            … and {len(pred.at_start) - SHOWN:,} more (--json lists all)")
    cost = getattr(pred, "cost", None)
    if cost is not None:
        lines.append("  cost:     " + cost_text(cost))
    return lines


def cost_text(cost: Any) -> str:
    """One line: load time and memory, one autosave, bytes per day — with the error bar measured for the line."""
    if cost.load_seconds is None:
        return f"no calibration for the {cost.line} line: load time and memory unknown"
    err = cost.error

    def pm(key: str) -> str:
        return f" (±{err[key]:.0%})" if key in err else ""

    text = (f"load ≈ {cost.load_seconds:.2f} s CPU{pm('load_cpu')}, memory ≈ {cost.memory_bytes / 2**20:,.0f} MiB"
            f"{pm('rss')}; one autosave ≈ {cost.save_seconds:.2f} s CPU{pm('save_cpu')}")
    if cost.save_bytes is not None:
        text += f", writes {cost.save_bytes / 2**20:,.1f} MiB"
    if cost.bytes_per_day is not None:
        text += f" ({cost.saves_per_day:,.0f} a day: {cost.bytes_per_day / 2**30:,.2f} GiB a day)"
    if cost.damaged:
        where = "at an offset it does not name" if cost.damaged_at is None else f"at offset {cost.damaged_at:,}"
        text += f"; a low estimate: damaged {where}, only the chunks before it counted"
    return text


__all__ = ["cmd_check_broker", "report", "resolve", "run_model", "text_lines",
           "version_text"]
