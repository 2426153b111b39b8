"""What every writing command shares: ``-o/--in-place/--dry-run/--json``, the target checks,
backups that are never overwritten, the report, and the ``--at``-style time options.

A writing command reads FILE and writes ``-o OUT`` atomically (``codec.writer.atomic_output``:
temp file in the destination's directory, fsync, rename). ``--in-place`` writes over FILE
after keeping a copy of it: ``FILE.bak``, or ``FILE.bak.1``, ``FILE.bak.2``, ... when that
exists, never over an older backup nor anything else (:mod:`codec.safefile`). A FILE or an
output that is a symbolic link is refused (one line, exit 2): mosqdb never writes through a
link; owner, group and mode of the original are kept on the result and the backup. An output
that exists and is not a regular file (FIFO, device node, directory) is refused before
anything is read. A backup of a run that changed nothing (the same bytes) is removed again.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any

from codec.broker.running import require_no_broker
from codec.errors import CodecError, unreachable
from codec.values import json_text, printable
from inspector.commands.shared.usage import UsageError, add_endian

# a reference time outside these is a mistake (a millisecond timestamp read as seconds, a typo)
TIME_MIN = 0.0  # 1970-01-01
TIME_MAX = 7258118400.0  # 2200-01-01T00:00:00Z
MTIME_SLACK = 120  # seconds between the newest expiry-derived save time and a plausible mtime


def add_writing(p: argparse.ArgumentParser, *, filters: bool = False) -> None:
    """The options of every command that writes a db; ``filters``: it removes what matches (adds --fail-if-none)."""
    p.add_argument("-o", "--output", help="output file (written atomically; never the input); - for stdout "
                   "when it is not a terminal (the report then goes to stderr)")
    p.add_argument("--in-place", action="store_true",
                   help="write over FILE (not a symlink: refused), keeping a copy first in "
                        "FILE.bak (FILE.bak.1, ... when that exists; never overwritten)")
    p.add_argument("--dry-run", action="store_true", help="only report what would change")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    if filters:
        p.add_argument("--fail-if-none", action="store_true",
                       help="exit 1 when nothing matches (nothing is written either way)")
    add_endian(p)
    from inspector.commands.shared.progress import add_quiet

    add_quiet(p)


# ---------------------------------------------------------------- targets and backups


def check_output(path: str) -> None:
    """Refuse an existing output that is a symbolic link or not a regular file (one line, exit 2), before
    any work (:func:`codec.safefile.target_stat`, the one place that decides it)."""
    from codec import safefile  # the writer only where a command writes (not on --at's start-up path)

    try:
        safefile.target_stat(path)
    except CodecError as exc:
        raise UsageError(str(exc)) from None


def refuse_sqlite(args: argparse.Namespace) -> None:
    """Only the write operations of :mod:`codec.edits` change a file whose chunks are not bytes (a sqlite
    store, edited as rows); any other writing command would write a .db under its name (or as its edited
    copy), which loses it.

    ``convert`` is the one command whose job is to change the format, and only to ``-o OUT``; ``repair`` salvages
    a store into a new store, to ``-o OUT``.
    """
    from codec.sources import format_of

    if args.dry_run:
        return
    fmt = format_of(args.file)
    if fmt.chunk_bytes:
        return
    if args.command == "repair":  # salvaged into a new file of its own format
        if args.in_place:
            raise UsageError(f"{args.file}: is a {fmt.format_name}; repair writes its salvage to -o OUT and leaves the "
                             "damaged one as it is: --in-place refused, nothing written")
        return
    if args.in_place:
        raise UsageError(f"{args.file}: is a {fmt.format_name}; {args.command} --in-place would replace it "
                         "with a mosquitto.db file, which the persist-sqlite plugin cannot load: refused, nothing "
                         "written")
    if args.command != "convert":
        raise UsageError(f"{args.file}: is a {fmt.format_name}; {args.command} works on mosquitto.db files: "
                         "refused, nothing written (`mosqdb check` reports a store's problems; rm-retained, "
                         "drop-client, prune-sessions, trim-queue and renew edit it)")


def target(args: argparse.Namespace) -> str | None:
    """The path to write (None for --dry-run), after the usage checks."""
    refuse_sqlite(args)
    return destination(args)


def destination(args: argparse.Namespace, writer: Any = None) -> str | None:
    """The path to write (None for --dry-run; FILE for --in-place; ``-`` for stdout), after the usage checks.
    ``writer``: what writes the result (:class:`codec.edits.Edits`); one that cannot stream it (a store, a
    database file) refuses ``-o -``."""
    if args.dry_run:
        if args.in_place:
            raise UsageError("--dry-run and --in-place exclude each other")
        return None
    if args.in_place:
        if args.output:
            raise UsageError("give either -o OUT or --in-place, not both")
        check_output(args.file)
        require_no_broker(args.file)
        return str(args.file)
    if not args.output:
        raise UsageError("give -o OUT (or --in-place, or --dry-run)")
    if args.output == STDOUT:
        if writer is not None and not writer.streams:
            raise UsageError(f"{args.file}: is a {writer.format_name}; -o - streams a mosquitto.db, not a store: "
                             "give -o FILE")
        refuse_terminal()
        return STDOUT
    if os.path.exists(args.output) and os.path.exists(args.file) and os.path.samefile(args.output, args.file):
        raise UsageError(f"{args.output}: the output is the input file; write elsewhere or use --in-place")
    check_output(args.output)
    require_no_broker(args.output)  # a running broker would write over it at its next save
    return str(args.output)


STDOUT = "-"


def refuse_terminal() -> None:
    """``-o -`` writes the db's bytes to stdout: not onto a terminal."""
    if sys.stdout.isatty():
        raise UsageError("-o -: stdout is a terminal; a db is binary: redirect it (> OUT.db, | ssh HOST 'cat > ...') "
                         "or give -o FILE; nothing written")


def to_stdout(args: argparse.Namespace, work: Callable[[str], Any]) -> Any:
    """Run ``work(path)`` into a scratch file, then copy that file to stdout (``-o -``); its size in ``args``.

    The db is finished (and, for repair, verified) before the first byte goes out; a result
    that says it was ``written`` to the scratch file says ``-`` instead. The scratch file is in a
    private directory (:func:`codec.safefile.private_dir`), beside nobody's file.
    """
    from codec import safefile

    with safefile.private_dir("mosqdb-stdout-") as scratch:
        path = os.path.join(scratch, os.path.basename(str(args.file)) or "out.db")
        result = work(path)
        args.stdout_bytes = None
        if os.path.exists(path):
            out = sys.stdout.buffer
            sys.stdout.flush()
            with open(path, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
            out.flush()
            args.stdout_bytes = os.path.getsize(path)
        if getattr(result, "written", None) == path:
            result.written = STDOUT
        return result


def report_stream(args: argparse.Namespace) -> Any:
    """Where the report goes: stdout, or stderr when stdout carries the db (``-o -``)."""
    return sys.stderr if getattr(args, "output", None) == STDOUT else sys.stdout


def make_backup(path: str) -> str:
    """Copy ``path`` to a backup name nobody uses yet, with its owner, group, mode and times; return the name.

    :func:`codec.safefile.keep_backup`: the copy is finished under an unpredictable temp name and
    hard-linked to ``FILE.bak`` (``.bak.1``, ...), which fails instead of replacing anything at the
    name (an older backup, a symlink someone put there). A ``path`` that is a symlink is refused.
    """
    from codec import safefile

    return safefile.keep_backup(path)


def same_bytes(a: str, b: str) -> bool:
    """Do the regular files ``a`` and ``b`` hold the same bytes (read without following links)?"""
    from codec.edits import same_bytes as same

    return same(a, b)


def run(args: argparse.Namespace, work: Callable[[str | None], Any],
        changed: Callable[[Any], bool] | None = None) -> Any:
    """Run ``work(out)``; with --in-place keep a backup first (removed again if the work fails or changed
    nothing: ``changed(result)`` false, or, without ``changed``, FILE holding the same bytes as before:
    :func:`codec.edits.with_backup`).

    The backup's name is left in ``args.backup`` for :func:`emit`.
    """
    out = target(args)
    args.backup = None
    if args.in_place:
        from codec.edits import with_backup

        result, args.backup = with_backup(args.file, lambda: work(out), changed)
        return result
    return to_stdout(args, work) if out == STDOUT else work(out)


def emit(args: argparse.Namespace, data: dict[str, Any], text: list[str], out: str | None) -> None:
    """The report: JSON (with ``dry_run`` and ``backup``) or the text lines and where the result went."""
    backup = getattr(args, "backup", None)
    stream = report_stream(args)
    if args.json:
        data = {"file": args.file, **{k: v for k, v in data.items() if k != "file"}}
        data["dry_run"] = out is None and args.dry_run
        if args.in_place:
            data["backup"] = backup
        print(json_text(data), file=stream)
        return
    for line in text:
        print(printable(line), file=stream)
    if out is None:
        print("dry run: nothing written" if args.dry_run else "nothing written", file=stream)
    elif out == STDOUT:
        print(f"wrote {getattr(args, 'stdout_bytes', None) or 0:,} bytes to stdout", file=stream)
    else:
        size = os.path.getsize(out) if os.path.exists(out) else 0
        extra = f" (original kept in {backup})" if backup else ""
        print(printable(f"wrote {out}: {size:,} bytes{extra}"))


def no_match(args: argparse.Namespace, data: dict[str, Any], what: str) -> int:
    """A filter that matched nothing: nothing written, say so; exit 0 (1 with --fail-if-none)."""
    msg = f"{args.file}: {what}: nothing written" + ("" if args.dry_run else ", the file is unchanged")
    if args.json:
        data = {"file": args.file, **{k: v for k, v in data.items() if k != "file"}}
        data.update(dry_run=args.dry_run, written=None, matched=False, note=msg)
        if args.in_place:
            data["backup"] = None
        print(json_text(data), file=report_stream(args))
    else:
        print(printable(msg), file=report_stream(args))
    return 1 if getattr(args, "fail_if_none", False) else 0


# ---------------------------------------------------------------- times


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def check_time(value: float, text: str, option: str) -> float:
    """A reference time must lie in 1970-2200; a millisecond timestamp gets a hint."""
    if TIME_MIN <= value < TIME_MAX:
        return value
    hint = ""
    if TIME_MIN <= value / 1000 < TIME_MAX:
        hint = f"; it looks like milliseconds: {option} {value / 1000:.0f} is {_iso(value / 1000)}"
    raise UsageError(f"{option} {text}: outside 1970-2200 (Unix seconds expected){hint}")


def parse_at(text: str | None, path: str, *, option: str = "--at", quiet: bool = False) -> float:
    """``now`` (default), ``file-mtime``, Unix seconds or ISO 8601, in 1970-2200 (exit 2 otherwise).

    ``file-mtime`` says which time it used and warns when the mtime looks like a copy's.
    """
    from codec.views.timeview import parse_time

    if text == "file-mtime" and unreachable(path) is not None:
        raise UsageError(f"{path}: {unreachable(path)}")
    try:
        value = parse_time(text, path=path)
    except CodecError as exc:
        raise UsageError(f"{option} {text}: {exc.reason}") from None
    except (OverflowError, ValueError) as exc:
        raise UsageError(f"{option} {text}: not a time ({exc})") from None
    value = check_time(value, str(text), option)
    if text == "file-mtime" and not quiet:
        note_mtime(path, value, f"{option} file-mtime")
    return value


def reference_time_ms(text: str, path: str, *, option: str = "--reference-time") -> int | None:
    """A ``--reference-time`` (the ``--at`` syntax) in milliseconds; ``file-mtime``: None (each file's own mtime).

    All digits beyond 2200 as seconds but plausible as milliseconds: the old milliseconds spelling,
    still taken, with one deprecation line.
    """
    if text == "file-mtime":
        return None
    if text.isdigit() and not TIME_MIN <= int(text) < TIME_MAX and TIME_MIN <= int(text) / 1000 < TIME_MAX:
        print(f"warning: {option} {text}: milliseconds are deprecated here; give Unix seconds "
              f"({int(text) // 1000}) or ISO 8601", file=sys.stderr)
        return int(text)
    return round(parse_at(text, path, option=option) * 1000)


def optional_at(text: str | None, path: str, *, option: str) -> float | None:
    """Like :func:`parse_at`, None when the option is not given (``--idle-since``)."""
    return None if text is None else parse_at(text, path, option=option)


def newest_save_time(path: str) -> float | None:
    """The latest time the expiry fields say the broker saved the file (v5/v6 sessions), None when unknown.

    A v5/v6 session that expires carries ``session_expiry_time`` = the time it went offline
    (or the save time, for a connected client) + ``session_expiry_interval``.
    """
    from codec import DbFile
    from codec.layouts import ChunkType
    from codec.values import NEVER

    try:
        with DbFile(path) as db:
            if db.empty or (db.version or 0) < 5 or db.index.error is not None:
                return None
            import numpy as np

            best = None
            for i in np.flatnonzero(db.index.arrays()[1] == int(ChunkType.CLIENT)).tolist():
                rec = db.chunk(i).record
                exp, interval = rec.get("session_expiry_time") or 0, rec.get("session_expiry_interval")
                if exp > 0 and interval is not None and interval != NEVER:
                    t = exp - interval
                    best = t if best is None or t > best else best
            return best
    except (CodecError, OSError):
        return None


def mtime_warning(path: str, mtime: float) -> str | None:
    """Why ``mtime`` is probably not when the broker wrote the file (cp/scp without -p), or None."""
    saved = newest_save_time(path)
    if mtime > time.time() + MTIME_SLACK:
        return f"the mtime {_iso(mtime)} lies in the future"
    if saved is not None and mtime > saved + MTIME_SLACK:
        return (f"the mtime {_iso(mtime)} is later than the newest save time the session expiry fields imply "
                f"({_iso(saved)}): the file was probably copied without its times (cp -p / scp -p keep them)")
    return None


def note_mtime(path: str, mtime: float, what: str) -> None:
    """On stderr: which time the file's mtime gave, and a warning when it looks implausible."""
    print(printable(f"{what}: using the mtime of {path}: {_iso(mtime)}"), file=sys.stderr)
    warning = mtime_warning(path, mtime)
    if warning:
        print(printable(f"warning: {path}: {warning}"), file=sys.stderr)
