"""The start guard: make sure a broker can start, never losing the bytes it could not load.

Run before the broker starts (systemd ``ExecStartPre=``, a container entrypoint). The broker model
says what the release does with the file; when it would refuse or crash:

1. the file's bytes are kept under ``FILE.bad-<UTC timestamp>`` beside it (a hard link, so nothing
   is copied and nothing can be half-written; ``.1``, ``.2`` ... when that name exists: an earlier
   one is never overwritten), and a leftover ``FILE.new`` (a save the broker never finished) under
   ``FILE.new.bad-<timestamp>``;
2. each of them is salvaged with the engine of ``mosqdb repair`` into a scratch file beside FILE,
   and the model must say the broker loads the result (the candidate that keeps most chunks wins,
   the newer ``FILE.new`` on a tie);
3. the winner replaces FILE atomically (``codec.writer.atomic_output``: temp, fsync, rename; owner
   and mode of the original kept), or, when nothing loads (or salvage is off), FILE is removed and
   the broker starts empty. The original bytes stay in ``FILE.bad-*`` either way.

Each decision is one line for the journal. A dry run salvages into a scratch directory elsewhere
and changes nothing beside FILE.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codec.broker.conf import BrokerConf
from codec.broker.model import Prediction, predict
from codec.broker.versions import Version
from codec.errors import CodecError, WriteError
from codec.writer import atomic_output, keep_owner_and_mode


@dataclass
class Candidate:
    source: str  # the file salvaged (the kept original or FILE.new)
    scratch: str | None = None
    kept: int = 0
    dropped: int = 0
    prediction: Prediction | None = None
    problem: str | None = None
    report: Any = None


@dataclass
class GuardReport:
    path: str
    broker: str
    before: Prediction | None
    action: str = "none"  # none | salvaged | emptied (dry run: would-salvage | would-empty)
    aside: list[str] = field(default_factory=list)
    chosen: Candidate | None = None
    candidates: list[Candidate] = field(default_factory=list)
    after: Prediction | None = None
    lines: list[str] = field(default_factory=list)
    dry_run: bool = False


def stamp(now: float | None = None) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))


def aside_name(path: str, suffix: str) -> str:
    """``path.<suffix>``, or ``.1``, ``.2`` ... after it: a name nothing uses yet."""
    base = f"{path}.{suffix}"
    n = 0
    while os.path.lexists(base if n == 0 else f"{base}.{n}"):
        n += 1
    return base if n == 0 else f"{base}.{n}"


def keep_aside(path: str, suffix: str) -> str:
    """Give ``path``'s bytes a second name that nothing can overwrite; returns it.

    A hard link (instant, atomic, same inode); where the file system has none, a copy made
    under an exclusive create and fsynced. Either way ``path`` itself is untouched.
    """
    while True:
        name = aside_name(path, suffix)
        try:
            os.link(path, name)
            return name
        except FileExistsError:
            continue
        except OSError:
            pass
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())
            shutil.copystat(path, name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name)
            raise
        return name


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def summary(p: Prediction) -> str:
    return (f"{len(p.kept):,} session(s) kept, {len(p.dropped):,} dropped, {sum(p.queued.values()):,} queued "
            f"message(s), {p.retained_count:,} retained topic(s)")


def why(p: Prediction) -> str:
    """One line: the verdict, what the broker logs, and the situation."""
    if p.crash_when:
        return f"Mosquitto {p.broker} would start, then crash {p.crash_when}"
    stop = p.stop
    assert stop is not None
    from codec.broker.rules import BY_ID

    rule = BY_ID.get(stop.rule)
    where = f" at offset {stop.offset:,}" if stop.offset is not None else ""
    said = f" logging {' / '.join(stop.log)!r}" if stop.log else " (it logs nothing about it)"
    verb = "refuse the file" if p.verdict == "refuses" else "crash while loading"
    return f"Mosquitto {p.broker} would {verb}{said}: {rule.situation if rule else stop.rule}{where}"


def run_guard(path: str, version: Version, *, conf: BrokerConf | None = None, at: float | None = None,
              salvage: bool = True, dry_run: bool = False, say: Callable[[str], None] = lambda line: None,
              now: float | None = None, topics: bool = False) -> GuardReport:
    """Check ``path`` for ``version`` and, if the broker would not start with it, set it aside and salvage it.

    ``topics``: also list the retained topics of the file as found (``before.retained``; costs time on big files).
    """
    from codec.broker.versions import text as version_text

    at = time.time() if at is None else at
    rep = GuardReport(path, version_text(version), None, dry_run=dry_run)

    def line(text: str) -> None:
        rep.lines.append(text)
        say(text)

    leftover = f"{path}.new"
    has_file, has_new = os.path.lexists(path), os.path.isfile(leftover)
    if not has_file and not has_new:
        line(f"no file: Mosquitto {rep.broker} starts empty; nothing to do")
        return rep
    if has_file:
        rep.before = predict(path, version, at=at, conf=conf, topics=topics)
        if rep.before.verdict == "loads":
            line(f"Mosquitto {rep.broker} loads it ({summary(rep.before)}); nothing to do"
                 + (f"; {leftover} (an unfinished save) left as it is" if has_new else ""))
            return rep
        line(why(rep.before))
    else:
        line(f"no file, but {leftover} is there (the broker stopped while saving): Mosquitto {rep.broker} would "
             "start empty and overwrite it at its next save")
    sources: list[str] = []
    tag = f"bad-{stamp(now)}"
    if dry_run:
        if has_file:
            line(f"would keep its bytes as {aside_name(path, tag)}")
            sources.append(path)
        if has_new:
            line(f"would keep {leftover} as {aside_name(leftover, tag)}")
            sources.append(leftover)
    else:
        if has_file:
            kept = keep_aside(path, tag)
            rep.aside.append(kept)
            line(f"kept its bytes as {kept} ({os.path.getsize(kept):,} bytes)")
            sources.append(kept)
        if has_new:
            kept_new = keep_aside(leftover, tag)
            rep.aside.append(kept_new)
            line(f"kept {leftover} as {kept_new} ({os.path.getsize(kept_new):,} bytes)")
            sources.append(kept_new)
    chosen = _salvage(rep, sources[::-1], version, conf, at, path, line) if salvage else None
    if not salvage:
        line("--no-salvage: the broker starts empty")
    try:
        _put(rep, chosen, path, leftover, has_file, has_new, version, conf, at, line)
    finally:
        for c in rep.candidates:
            if c.scratch and os.path.exists(c.scratch):
                with contextlib.suppress(OSError):
                    os.unlink(c.scratch)
    return rep


def _salvage(rep: GuardReport, sources: list[str], version: Version, conf: BrokerConf | None, at: float,
             path: str, line: Callable[[str], None]) -> Candidate | None:
    """Repair each source into a scratch file; the one the broker loads and that keeps most chunks."""
    from codec.ops.repair import repair

    scratch_dir = tempfile.mkdtemp(prefix="mosqdb-guard-") if rep.dry_run else os.path.dirname(os.path.abspath(path))
    best: Candidate | None = None
    for src in sources:  # FILE.new first: on a tie it is the newer state
        cand = Candidate(src)
        rep.candidates.append(cand)
        fd, cand.scratch = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.guard.", suffix=".tmp", dir=scratch_dir)
        os.close(fd)
        try:
            report = repair(src, cand.scratch, at=at)
        except CodecError as exc:
            cand.problem = f"nothing salvageable: {exc.reason}"
            line(f"salvage of {src}: {cand.problem}")
            continue
        cand.report = report
        cand.kept = sum(report.kept.values())
        cand.dropped = len(report.dropped)
        cand.prediction = predict(cand.scratch, version, at=at, conf=conf, topics=False)
        if cand.prediction.verdict != "loads":
            cand.problem = why(cand.prediction)
            line(f"salvage of {src} is not loadable either: {cand.problem}")
            continue
        first = report.dropped[0] if report.dropped else None
        detail = f"; first dropped: {first.kind} at offset {first.offset:,}: {first.reason}" if first else ""
        line(f"salvaged {src}: kept {cand.kept:,} chunk(s), dropped {cand.dropped:,} chunk(s) or region(s){detail}; "
             f"Mosquitto {rep.broker} loads it ({summary(cand.prediction)})")
        if best is None or cand.kept > best.kept:
            best = cand
    if rep.dry_run:
        rep.chosen = best
        shutil.rmtree(scratch_dir, ignore_errors=True)
    return best


def _put(rep: GuardReport, chosen: Candidate | None, path: str, leftover: str, has_file: bool, has_new: bool,
         version: Version, conf: BrokerConf | None, at: float, line: Callable[[str], None]) -> None:
    if rep.dry_run:
        if chosen is not None:
            rep.action = "would-salvage"
            line(f"would put the salvage of {chosen.source} in place as {path} (atomic rename)")
        else:
            rep.action = "would-empty"
            line(f"would remove {path}: the broker would start empty")
        line("dry run: nothing changed")
        return
    rep.chosen = chosen
    if chosen is not None:
        assert chosen.scratch is not None

        def verify(tmp: str) -> None:
            got = predict(tmp, version, at=at, conf=conf, topics=False)
            if got.verdict != "loads":
                raise WriteError(f"the salvaged file is still not loadable: {why(got)}; nothing put in place",
                                 path=path)

        with atomic_output(path, verify=verify) as out, open(chosen.scratch, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
        if not has_file and rep.aside:  # no file was replaced: give it the unfinished save's owner and mode
            keep_owner_and_mode(path, os.stat(rep.aside[-1]))
        if has_new and os.path.exists(leftover):
            os.unlink(leftover)  # its bytes are kept aside; the broker would overwrite it anyway
        rep.action = "salvaged"
        rep.after = predict(path, version, at=at, conf=conf)
        line(f"put the salvage of {chosen.source} in place as {path}: Mosquitto {rep.broker} loads it "
             f"({summary(rep.after)})")
        return
    for name in (path, leftover):
        if os.path.lexists(name):
            os.unlink(name)  # its bytes are kept aside
    _fsync_dir(os.path.dirname(os.path.abspath(path)))
    rep.action = "emptied"
    line(f"removed {path} (its bytes are kept aside): Mosquitto {rep.broker} starts empty")


__all__ = ["Candidate", "GuardReport", "aside_name", "keep_aside", "run_guard", "stamp", "summary", "why"]
