"""The start guard: make sure a broker can start, never losing the bytes it could not load.

Run before the broker starts (systemd ``ExecStartPre=``, a container entrypoint). Two witnesses say
what the release does with the file: the broker model (:mod:`codec.broker.model`, a prediction) and,
where the Mosquitto binary is at hand, a trial (:mod:`codec.broker.trial`: a copy loaded in that very
binary, in a private temp directory). When both speak and disagree, the trial wins and the
difference is said. Then:

- the broker loads it: nothing changes;
- nobody can tell (the model has no rule for what the file holds, and there is no binary to try it
  in, or the trial was inconclusive): nothing changes either, and the guard says so (exit 3): it
  never removes what it cannot show the broker refuses;
- the broker refuses or crashes on it:

  1. the file's bytes are kept under ``FILE.bad-<UTC timestamp>`` beside it (``.1``, ``.2`` ... after
     an existing one, never over it), and a leftover ``FILE.new`` (a save the broker never finished)
     under ``FILE.new.bad-<timestamp>`` (:mod:`codec.safefile`: no links followed, no name reused);
  2. each is salvaged in a private temp directory with ``repair``'s engine, plainly and, where the damage
     cut bytes out of the file, with its retained-message recovery (not otherwise: a store with the retain
     flag and no RETAIN chunk in an intact file is a retained message someone cleared); a chunk the release still refuses is dropped and the rest salvaged
     again (one bad store, not the file), and a db version the release cannot read (a broker rolled
     back) is converted to the one it writes. The candidate that keeps most and that the release
     loads (the model, and the trial where there is a binary) wins; what another option would have
     kept is said;
  3. the winner replaces FILE atomically (owner and mode kept); when nothing loads (or salvage is
     off) FILE is removed and the broker starts empty. The original bytes stay in ``FILE.bad-*``.

A 2.1 sqlite store (``mosquitto.sqlite3``, loaded by the persist-sqlite plugin) is a store, not a
damaged db: it is read as mosqdb reads it, tried in the broker with the plugin, and set aside only
when that broker refuses it.

Each decision is one line for the journal. A dry run salvages in the temp directory and changes
nothing beside FILE.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import codec.safefile as safefile
from codec.broker.conf import BrokerConf
from codec.broker.model import Prediction
from codec.broker.storemodel import predict_any
from codec.broker.trial import Binary, Trial, trial_load
from codec.broker.versions import Version, line_of
from codec.errors import CodecError, WriteError
from codec.store.connect import put_store

HEADER = 23  # the file header: a refusal there is the file's, not a chunk's
MAX_DROPS = 32  # chunks dropped one by one from a salvage the release still refuses, before giving up on it
V21 = (2, 1, 0)


class GuardRefused(CodecError):
    """A file the guard will not act on (not reachable, not for this release): one line, nothing touched."""


@dataclass
class Candidate:
    source: str  # the file salvaged (the kept original or FILE.new)
    recover_retained: bool = False
    scratch: str | None = None
    kept: int = 0
    dropped: int = 0
    retained: int = 0
    prediction: Prediction | None = None
    trial: Trial | None = None
    problem: str | None = None
    report: Any = None
    extra_drops: list[str] = field(default_factory=list)  # chunks dropped because the release refused them
    converted: str | None = None  # "v6 -> v4 (losses ...)"
    convert_only: bool = False  # only converted to the release's db version (refused for that alone)

    @property
    def option(self) -> str:
        if self.convert_only:
            return "convert"
        return "repair --recover-retained" if self.recover_retained else "repair"

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "option": self.option, "kept_chunks": self.kept, "dropped": self.dropped,
                "retained": self.retained, "dropped_for_the_broker": self.extra_drops, "converted": self.converted,
                "verdict": self.prediction.verdict if self.prediction is not None else None,
                "trial": self.trial.result if self.trial is not None else None, "problem": self.problem}


@dataclass
class GuardReport:
    path: str
    broker: str
    before: Prediction | None
    action: str = "none"  # none | salvaged | emptied | left (undecided) (dry run: would-salvage | would-empty)
    aside: list[str] = field(default_factory=list)
    chosen: Candidate | None = None
    candidates: list[Candidate] = field(default_factory=list)
    after: Prediction | None = None
    lines: list[str] = field(default_factory=list)
    dry_run: bool = False
    store: bool = False  # FILE is a 2.1 sqlite store
    model_unknown: str | None = None  # why the model cannot tell (no verdict, or verdict unknown)
    trial: Trial | None = None
    no_trial: str | None = None  # why no trial was made
    verdict: str | None = None  # what the guard acted on: loads / refuses / crashes / unknown
    decided_by: str | None = None  # trial / model

    @property
    def undecided(self) -> bool:
        """Nobody could tell whether the broker loads the file: it was left as it is (exit 3)."""
        return self.verdict == "unknown"


def stamp(now: float | None = None) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))


def aside_name(path: str, suffix: str) -> str:
    """``path.<suffix>``, or ``.1``, ``.2`` ... after it: the name a copy kept aside would get now."""
    for name in safefile.free_names(f"{path}.{suffix}"):
        if not os.path.lexists(name):
            return name
    raise AssertionError("unreachable")


def keep_aside(path: str, suffix: str) -> str:
    """Give ``path``'s bytes a second name that nothing can overwrite; returns it (:func:`codec.safefile.keep_aside`)."""
    return safefile.keep_aside(path, suffix)


def present(path: str, *, regular: bool = False) -> bool:
    """Whether something is at ``path`` (a link counts); a directory that cannot be searched is an error,
    not "nothing there": the broker, running as another user, may well find a file there."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        directory = os.path.dirname(os.path.abspath(path))
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise GuardRefused(f"permission denied: cannot look into {directory} for {os.path.basename(path)} "
                               "(the broker's user may find a file there); run the guard as that user or root; "
                               "nothing touched", path=path) from None
        raise GuardRefused(f"cannot look for it: {exc.strerror}; nothing touched", path=path) from None
    return stat.S_ISREG(st.st_mode) if regular else True


def readable(path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        what = "permission denied" if exc.errno in (errno.EACCES, errno.EPERM) else (exc.strerror or str(exc))
        raise GuardRefused(f"{what}: cannot read it; nothing touched", path=path) from None


def summary(p: Prediction) -> str:
    return (f"{len(p.kept):,} session(s) kept, {len(p.dropped):,} dropped, {sum(p.queued.values()):,} queued "
            f"message(s), {p.retained_count:,} retained topic(s)")


def why(p: Prediction) -> str:
    """One line: the verdict, what the broker logs, and the situation."""
    if p.crash_when:
        return f"Mosquitto {p.broker} would start, then crash {p.crash_when}"
    stop = p.stop
    if stop is None:  # a store the plugin cannot open: what it logs says why
        if p.verdict == "refuses" and p.log:
            return f"Mosquitto {p.broker} would refuse the file logging {' / '.join(p.log)!r}"
        return f"Mosquitto {p.broker}: {p.verdict}"
    from codec.broker.rules import BY_ID

    rule = BY_ID.get(stop.rule)
    where = f" at offset {stop.offset:,}" if stop.offset is not None else ""
    said = f" logging {' / '.join(stop.log)!r}" if stop.log else " (it logs nothing about it)"
    verb = "refuse the file" if p.verdict == "refuses" else "crash while loading"
    what = rule.situation if rule else stop.note or stop.rule  # a store's stops are not .db rules: their note says it
    return f"Mosquitto {p.broker} would {verb}{said}: {what}{where}"


def unknown_reason(p: Prediction) -> str:
    """Why the model has no verdict for ``p`` (its ``unknown`` verdict's reason and offset)."""
    u = p.unknown
    if u is None:
        return "a situation the model has no rule for"
    return f"{u.reason}{f' at offset {u.offset:,}' if u.offset is not None else ''}"


def model(path: str, version: Version, *, at: float, conf: BrokerConf | None,
          topics: bool = False) -> tuple[Prediction | None, str | None]:
    """(the prediction, why the model cannot tell or None). A file the model cannot follow is a
    prediction of ``unknown``, never an error or a default "loads"."""
    if line_of(version) is None:
        return None, "the broker model does not know this release"
    try:
        p = predict_any(path, version, at=at, conf=conf, topics=topics)
    except CodecError as exc:
        where = f" at offset {exc.offset:,}" if exc.offset is not None else ""
        return None, f"{exc.reason}{where}"
    if p.verdict == "unknown":
        return p, unknown_reason(p)
    return p, None


def _decide(rep: GuardReport, line: Callable[[str], None]) -> None:
    """Set ``rep.verdict`` and ``rep.decided_by`` from the model's prediction and the trial's result."""
    p, t = rep.before, rep.trial
    said = rep.model_unknown is None and p is not None
    model_verdict = (p.verdict if said and p is not None else "unknown")
    later_crash = said and p is not None and p.crash_when is not None
    if t is not None and t.conclusive:
        rep.decided_by = "trial"
        rep.verdict = "crashes" if (t.result == "loads" and later_crash) else t.result
        model_starts = p.starts if said and p is not None else None
        if model_starts is not None and model_starts != t.starts:
            line(f"the model predicted that Mosquitto {rep.broker} {model_verdict} it, but the broker itself "
                 f"{t.result} it: the trial decides")
        elif model_starts is None and rep.model_unknown:
            line(f"the model cannot tell ({rep.model_unknown}); the broker itself decides")
        return
    rep.decided_by = "model"
    rep.verdict = model_verdict


def run_guard(path: str, version: Version, *, conf: BrokerConf | None = None, at: float | None = None,
              salvage: bool = True, dry_run: bool = False, say: Callable[[str], None] = lambda line: None,
              now: float | None = None, topics: bool = False, binary: Binary | None = None,
              no_trial: str | None = None, trial_timeout: float | None = None) -> GuardReport:
    """Check ``path`` for ``version`` and, if the broker would not start with it, set it aside and salvage it.

    ``binary``: the Mosquitto to trial-load the file in (None: the model alone; ``no_trial`` says why).
    ``topics``: also list the retained topics of the file as found (``before.retained``; costs time on
    big files). Raises :class:`GuardRefused` (nothing touched) for a file it cannot reach or must not act on.
    """
    from codec.broker.versions import text as version_text
    from codec.sources import is_sqlite_file

    at = time.time() if at is None else at
    rep = GuardReport(path, version_text(version), None, dry_run=dry_run, no_trial=no_trial)

    def line(text: str) -> None:
        rep.lines.append(text)
        say(text)

    leftover = f"{path}.new"
    has_file, has_new = present(path), present(leftover, regular=True)
    if not has_file and not has_new:
        line(f"no file: Mosquitto {rep.broker} starts empty; nothing to do")
        return rep
    if has_file:
        readable(path)
        rep.store = is_sqlite_file(path)
        if rep.store and version < V21:
            raise GuardRefused(f"is a Mosquitto 2.1 sqlite store (the persist-sqlite plugin's); Mosquitto "
                               f"{rep.broker} has no such plugin and reads a mosquitto.db: not guarded, nothing "
                               "touched", path=path)
        # the broker's file is ignored whole (persistence off, a symlink on 2.1): nothing for a trial to load
        ignored = not rep.store and ((conf is not None and not conf.persistence)
                                     or (version >= V21 and os.path.islink(path)))
        trial = None
        if binary is not None and not ignored:  # the trial runs in the broker's process while the model reads
            pool = ThreadPoolExecutor(max_workers=1)
            trial = pool.submit(trial_load, binary, path, conf=conf, store=rep.store, timeout=trial_timeout)
            pool.shutdown(wait=False)
        try:
            if rep.store:
                line("a Mosquitto 2.1 sqlite store (the persist-sqlite plugin's)")
            rep.before, rep.model_unknown = model(path, version, at=at, conf=conf, topics=topics)
            if rep.model_unknown:
                line(f"the model cannot tell what Mosquitto {rep.broker} does with it: {rep.model_unknown}")
        finally:
            if trial is not None:
                rep.trial = trial.result()
        if rep.trial is not None and binary is not None:
            if rep.before is not None and not rep.model_unknown:
                line("the model predicts: " + (f"Mosquitto {rep.broker} loads it ({summary(rep.before)})"
                                               if rep.before.verdict == "loads" else why(rep.before)))
            line(f"trial in {binary.path}: {rep.trial.detail} ({rep.trial.seconds:.2f} s)")
        elif rep.no_trial:  # why there is no trial, and what decides instead
            line(rep.no_trial + ": the broker model alone decides")
        _decide(rep, line)
        if rep.verdict == "loads":
            said = summary(rep.before) if rep.before is not None else None
            loads = f"Mosquitto {rep.broker} loads it{f' ({said})' if said else ''}"
            line(f"{loads}; nothing to do" + (f"; {leftover} (an unfinished save) left as it is" if has_new else ""))
            return rep
        if rep.verdict == "unknown":
            rep.action = "left"
            line(f"cannot tell whether Mosquitto {rep.broker} loads it, and "
                 + (f"the trial was inconclusive ({rep.trial.detail})" if rep.trial is not None else
                    f"there is no Mosquitto {rep.broker} binary to try it in (--mosquitto PATH)")
                 + ": left as it is (the guard never removes what it cannot show the broker refuses)")
            return rep
        if rep.decided_by == "model" and rep.before is not None:
            line(why(rep.before))
    else:
        rep.verdict = "empty"
        line(f"no file, but {leftover} is there (the broker stopped while saving): Mosquitto {rep.broker} would "
             "start empty and overwrite it at its next save")
    if rep.store:
        _set_store_aside(rep, path, now, line, salvage=salvage, version=version, conf=conf, at=at, binary=binary,
                         trial_timeout=trial_timeout)
        return rep
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
    work = safefile.new_private_dir("mosqdb-guard-")  # 0700: the salvage is made here, never beside FILE
    try:
        chosen = None
        if salvage:
            chosen = _salvage(rep, sources[::-1], version, conf, at, work, binary, trial_timeout, line)
        else:
            line("--no-salvage: the broker starts empty")
        _put(rep, chosen, path, leftover, has_file, has_new, version, conf, at, line)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rep


def _set_store_aside(rep: GuardReport, path: str, now: float | None, line: Callable[[str], None], *,
                     salvage: bool = True, version: Version = V21, conf: BrokerConf | None = None,
                     at: float | None = None, binary: Binary | None = None,
                     trial_timeout: float | None = None) -> None:
    """A store the broker refused (the model or the trial showed it): kept aside with its -wal, and its salvage
    (the rows sqlite still reads, :mod:`codec.store.salvage`) put in its place when the release loads that (tried
    in the broker where there is one, else the model's word); else the broker starts empty."""
    tag = f"bad-{stamp(now)}"
    names = [n for n in (path, f"{path}-wal") if os.path.isfile(n)]
    work = safefile.new_private_dir("mosqdb-guard-")  # 0700: the salvage is made here, never beside FILE
    try:
        salvaged = _salvage_store(path, work, version, conf, at, binary, trial_timeout, line) if salvage else None
        if not salvage:
            line("--no-salvage: the broker starts empty")
        if rep.dry_run:
            for n in names:
                line(f"would keep {n} as {aside_name(n, tag)} and remove it")
            if salvaged is not None:
                rep.action = "would-salvage"
                line(f"would put the salvage in place as {path} (atomic rename)")
            else:
                rep.action = "would-empty"
                line("the broker would start empty")
            line("dry run: nothing changed")
            return
        like = os.lstat(path) if os.path.isfile(path) else None
        for n in names:
            kept = keep_aside(n, tag)
            rep.aside.append(kept)
            line(f"kept {n} as {kept} ({os.path.getsize(kept):,} bytes)")
        if salvaged is None:
            for n in (path, f"{path}-wal", f"{path}-shm"):
                if os.path.lexists(n):
                    safefile.remove(n)
            rep.action = "emptied"
            line(f"removed {path} (its bytes are kept aside): Mosquitto {rep.broker} starts empty")
            return
        # renamed over the store (owner and mode kept), its -wal and -shm removed just before: never no store at all
        put_store(salvaged, path, like=like, replaces=path)
        rep.action = "salvaged"
        rep.after, _ = model(path, version, at=at, conf=conf, topics=True)
        said = f" ({summary(rep.after)})" if rep.after is not None and rep.after.verdict == "loads" else ""
        line(f"put the salvage in place as {path}: Mosquitto {rep.broker} loads it{said}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _salvage_store(path: str, work: str, version: Version, conf: BrokerConf | None, at: float | None,
                   binary: Binary | None, trial_timeout: float | None, line: Callable[[str], None]) -> str | None:
    """The salvage of the store ``path`` in ``work`` when the release loads it (its path), else None (said why)."""
    from codec.store.salvage import salvage_store

    out = os.path.join(work, "salvaged.sqlite3")
    try:
        report = salvage_store(path, out)
    except CodecError as exc:
        line(f"no salvage: {exc}")
        return None
    lost = f"; {len(report.lost):,} damaged stretch(es) of rows lost (first: {report.lost[0]})" if report.lost else ""
    kept = ", ".join(f"{k} {n:,}" for k, n in report.kept.items() if n)
    line(f"salvaged {path}: kept {sum(report.kept.values()):,} row(s) ({kept or 'none'}){lost}")
    if binary is not None:
        trial = trial_load(binary, out, conf=conf, store=True, timeout=trial_timeout)
        if not trial.starts:
            line(f"the salvage tried in {binary.path}: the broker does not start with it: {trial.detail}")
            return None
        line(f"the trial started Mosquitto {binary.text} with the salvage")
        return out
    got, unknown = model(out, version, at=at, conf=conf)
    if unknown or got is None or got.verdict != "loads":
        line(f"the salvage is not loadable either: {unknown or why(got)}")
        return None
    return out


# ---------------------------------------------------------------- salvage
def _salvage(rep: GuardReport, sources: list[str], version: Version, conf: BrokerConf | None, at: float, work: str,
             binary: Binary | None, trial_timeout: float | None, line: Callable[[str], None]) -> Candidate | None:
    """Every candidate (each source, with and without retained recovery), made loadable for the release;
    the one that keeps most and that the release loads. FILE.new first: on a tie it is the newer state.

    A file refused only for its db version (a rolled-back broker) is first converted as it is: no repair
    (a repair reads and rewrites the whole file; on a big one that is minutes)."""
    n = 0
    stop = rep.before.stop if rep.before is not None else None
    if stop is not None and stop.rule == "unsupported-version":
        for src in sources:
            n += 1
            cand = Candidate(src, convert_only=True)
            if _convert_only(cand, os.path.join(work, f"salvage-{n}.db"), version, conf, at):
                rep.candidates.append(cand)
                if _accepted(cand, binary, conf, trial_timeout, line):
                    return _chosen(rep, cand, line)
    for src in sources:
        plain = Candidate(src)
        n += 1
        made = _make(plain, os.path.join(work, f"salvage-{n}.db"), version, conf, at)
        rep.candidates.append(plain)
        if not made:
            line(f"salvage of {src}: {plain.problem}")
            continue
        if not any(_lost(d) for d in plain.report.dropped):
            continue  # nothing was cut out: a store without its RETAIN is a retained message someone cleared
        n += 1
        recovered = Candidate(src, recover_retained=True)
        if _make(recovered, os.path.join(work, f"salvage-{n}.db"), version, conf, at) and any(
                "recreated" in f for f in recovered.report.fixes):
            rep.candidates.append(recovered)
    # the model's loadable ones first; where there is a broker, the others are tried too (the model may be wrong)
    ranked = sorted((c for c in rep.candidates if c.scratch is not None and c.trial is None and not c.convert_only
                     and (c.problem is None or binary is not None)),
                    key=lambda c: (c.problem is not None, -c.kept, c.recover_retained, sources.index(c.source)))
    best = next((c for c in ranked if _accepted(c, binary, conf, trial_timeout, line)), None)
    for cand in rep.candidates:
        if cand.problem and cand.scratch is not None and cand.trial is None:
            line(f"salvage of {cand.source} ({cand.option}) is not loadable either: {cand.problem}")
    return None if best is None else _chosen(rep, best, line)


def _accepted(cand: Candidate, binary: Binary | None, conf: BrokerConf | None, trial_timeout: float | None,
              line: Callable[[str], None]) -> bool:
    """Whether the release loads the candidate: tried in the broker where there is one, else the model's word."""
    assert cand.scratch is not None
    if binary is not None:
        cand.trial = trial_load(binary, cand.scratch, conf=conf, timeout=trial_timeout)
        if not cand.trial.starts:
            cand.problem = f"the broker does not start with it: {cand.trial.detail}"
            line(f"salvage of {cand.source} ({cand.option}) tried in {binary.path}: {cand.problem}")
            return False
        cand.problem = None  # whatever the model said: the broker loads it
        return True
    if cand.prediction is None or cand.prediction.verdict != "loads":
        cand.problem = cand.problem or "the model cannot tell whether the broker loads it, and there is no broker to " \
                                       "try it in"
        return False
    return True


def _chosen(rep: GuardReport, best: Candidate, line: Callable[[str], None]) -> Candidate:
    report = best.report
    first = report.dropped[0] if report is not None and report.dropped else None
    detail = f"; first dropped: {first.kind} at offset {first.offset:,}: {first.reason}" if first else ""
    seen = f"; the trial started Mosquitto {best.trial.binary.text} with it" if best.trial is not None else ""
    said = f" ({summary(best.prediction)})" if best.prediction is not None and best.prediction.verdict == "loads" else ""
    line(f"salvaged {best.source} ({best.option}): kept {best.kept:,} chunk(s), dropped {best.dropped:,} chunk(s) "
         f"or region(s){detail}; Mosquitto {rep.broker} loads it{said}{seen}")
    for drop in best.extra_drops:
        line(f"dropped for Mosquitto {rep.broker}: {drop}")
    if best.converted:
        line(f"converted {best.converted}: the db version Mosquitto {rep.broker} reads")
    if not best.convert_only:
        _compare_options(best, rep.candidates, line)
    rep.chosen = best
    return best


def _convert_only(cand: Candidate, scratch: str, version: Version, conf: BrokerConf | None, at: float) -> bool:
    """``cand.source`` converted to the db version the release writes, its expired stored messages dropped
    first; False (``cand.problem``) when the file cannot be converted as it is (damage: it is repaired then)."""
    from codec.broker.rules import native_db_version
    from codec.ops.convert import convert
    from codec.reader import DbFile

    target = native_db_version(version)
    src = cand.source
    try:
        cand.dropped = _drop_expired(src, f"{scratch}.live", at)
        if cand.dropped:
            src = f"{scratch}.live"
            cand.extra_drops.append(_EXPIRED.format(version=".".join(map(str, version))))
        with DbFile(src) as db:
            source_version = db.version
            rep = convert(db, scratch, target, force=True, now=at)
    except CodecError as exc:
        cand.problem = f"cannot be converted as it is: {exc.reason}"
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(f"{scratch}.live")
    lost = ", ".join(f"{lo.kind}.{lo.field} x{lo.count}" for lo in rep.losses.values() if lo.count)
    cand.converted = f"v{source_version} -> v{target}" + (f" (lost: {lost})" if lost else " (nothing lost)")
    cand.scratch = scratch
    cand.prediction, unknown = model(scratch, version, at=at, conf=conf)
    if unknown or cand.prediction is None or cand.prediction.verdict != "loads":
        cand.problem = unknown or (why(cand.prediction) if cand.prediction is not None else "no verdict")
    cand.kept = _chunks(scratch)
    cand.retained = cand.prediction.retained_count if cand.prediction is not None else 0
    return True


_EXPIRED = ("the stored messages whose expiry time had passed (Mosquitto {version} keeps no expiry: it would serve "
            "them for ever)")


def _lost(d: Any) -> bool:
    """Whether a salvage drop cut bytes out of the file (damage: a RETAIN chunk may have gone with them),
    rather than a whole chunk the rules drop (unreferenced, superseded, dangling)."""
    return d.kind == "bytes" or any(
        w in d.reason for w in ("truncated", "resynchronised", "does not decode", "cut short", "NUL bytes", "garbage"))


def _compare_options(best: Candidate, candidates: list[Candidate], line: Callable[[str], None]) -> None:
    """Say what the other salvage option of the same source kept (or would have)."""
    other = next((c for c in candidates if c.source == best.source and c.recover_retained != best.recover_retained
                  and c.scratch is not None), None)
    if best.recover_retained:
        plain = other.kept if other is not None else None
        recreated = sum(1 for f in best.report.fixes if "recreated" in f)
        line(f"recovered {recreated:,} retained message(s) whose RETAIN chunk was lost (as repair --recover-retained)"
             + (f"; a plain repair would have kept {plain:,} chunk(s)" if plain is not None else ""))
    elif other is not None and other.kept > best.kept:
        line(f"repair --recover-retained would have kept {other.kept - best.kept:,} more chunk(s) "
             f"({other.retained:,} retained topic(s)), but {other.problem or 'it was not chosen'}")


def _make(cand: Candidate, scratch: str, version: Version, conf: BrokerConf | None, at: float) -> bool:
    """Salvage ``cand.source`` into ``scratch`` and make it loadable for ``version``: convert a db version the
    release cannot read, drop each chunk the release still refuses (and salvage again). False when nothing
    salvageable came out (``cand.problem`` says why)."""
    report = _repaired(cand, cand.source, scratch, version, at, conf, recover=cand.recover_retained)
    if report is None:
        return False
    cand.report = report
    cand.scratch = scratch
    for step in range(MAX_DROPS):
        pred, unknown = model(scratch, version, at=at, conf=conf)
        cand.prediction = pred
        if unknown or pred is None or pred.verdict == "loads" or (pred.stop is None and not pred.crash_when):
            break
        fixed = _fix(cand, pred, scratch, f"{scratch}.{step}", version, at, conf)
        if fixed is None:
            cand.problem = why(pred)
            break
        scratch = cand.scratch = fixed
    else:
        cand.problem = f"still not loadable after dropping {MAX_DROPS} chunks"
    cand.kept = _chunks(scratch)
    cand.dropped = len(cand.report.dropped) + len(cand.extra_drops)
    cand.retained = cand.prediction.retained_count if cand.prediction is not None else 0
    return True


def _repaired(cand: Candidate, src: str, out: str, version: Version, at: float, conf: BrokerConf | None, *,
              recover: bool = False) -> Any:
    """``repair`` of ``src`` into ``out``; where it cannot make a valid file because of one chunk (a property
    the loader refuses, say), that chunk is dropped from a copy and the copy repaired: one bad store costs one
    store, not the file. None when nothing salvageable came out."""
    from codec.ops.repair import repair

    copies: list[str] = []
    try:
        for attempt in range(MAX_DROPS):
            try:
                return repair(src, out, at=at, recover_retained=recover)
            except CodecError as exc:
                problem = f"nothing salvageable: {exc.reason}"
                found = _offender(src, version, at, conf) if "valid file" in exc.reason else None
                span = _chunk_at(src, found[0]) if found is not None else None
                if found is None or span is None:
                    cand.problem = problem
                    return None
            start, end, label = span
            nxt = f"{out}.src{attempt}"
            _without(src, nxt, start, end)
            copies.append(nxt)
            cand.extra_drops.append(f"{label}: {found[1]}")
            src = nxt
        cand.problem = f"nothing salvageable after dropping {MAX_DROPS} chunks"
        return None
    finally:
        for name in copies:
            with contextlib.suppress(OSError):
                os.unlink(name)


def _offender(path: str, version: Version, at: float, conf: BrokerConf | None) -> tuple[int, str] | None:
    """(offset, why) of the first chunk a valid file cannot hold: the plain checker's first error, else where
    the model says the release stops."""
    from codec.ops.check import check_file
    from codec.reader import DbFile

    try:
        with DbFile(path) as db:
            for f in check_file(db, at=at):
                if f.severity == "error" and f.offset is not None and f.offset >= HEADER:
                    return f.offset, f.message
    except CodecError:
        pass
    pred, _unknown = model(path, version, at=at, conf=conf)
    stop = pred.stop if pred is not None else None
    if stop is not None and stop.offset is not None and stop.offset >= HEADER:
        return stop.offset, _situation(stop.rule)
    return None


def _situation(rule_id: str) -> str:
    from codec.broker.rules import BY_ID

    rule = BY_ID.get(rule_id)
    return rule.situation if rule else rule_id


def _drop_expired(src: str, out: str, at: float) -> int:
    """Write ``src`` without its stored messages whose expiry time passed before ``at`` (and the client messages
    and retains that refer to them) to ``out``; how many chunks that drops."""
    import numpy as np

    from codec.columnar import iter_columns
    from codec.layouts import ChunkType
    from codec.reader import DbFile
    from codec.writer import save_masked

    with DbFile(src) as db:
        if db.empty or (db.version or 0) < 5:
            return 0
        drop = np.zeros(len(db.index), dtype=bool)
        gone: list[np.ndarray] = []
        for c in iter_columns(db, ChunkType.MSG_STORE):
            expiry = c.ints["expiry_time"].astype(np.int64)
            dead = (expiry > 0) & (expiry < int(at))
            drop[c.index[dead]] = True
            gone.append(c.ints["store_id"][dead].astype(np.uint64))
        n = int(drop.sum())
        if n:  # what refers to them goes too, as the broker that wrote the file drops it at load
            ids = np.unique(np.concatenate(gone))
            for kind in (ChunkType.CLIENT_MSG, ChunkType.RETAIN):
                for c in iter_columns(db, kind):
                    drop[c.index[np.isin(c.ints["store_id"].astype(np.uint64), ids)]] = True
            save_masked(db, out, drop)
        return int(drop.sum())


def _without(src: str, out: str, start: int, end: int) -> None:
    """A copy of ``src`` without its bytes ``[start, end)`` (one chunk), in the private directory."""
    with open(src, "rb") as inp, safefile.create_private(out) as dst:
        dst.write(inp.read(start))
        inp.seek(end)
        shutil.copyfileobj(inp, dst, 1 << 20)


def _chunks(path: str) -> int:
    from codec.reader import DbFile

    try:
        with DbFile(path) as db:
            return 0 if db.empty else len(db.index)
    except CodecError:
        return 0


def _fix(cand: Candidate, pred: Prediction, scratch: str, tmp: str, version: Version, at: float,
         conf: BrokerConf | None) -> str | None:
    """One step towards a file the release loads: the file it made (``tmp``, or a name after it); None when there
    is no step to take."""
    from codec.broker.rules import native_db_version
    from codec.ops.convert import convert
    from codec.reader import DbFile

    stop = pred.stop
    if stop is not None and stop.rule == "unsupported-version":
        target = native_db_version(version)
        if _drop_expired(scratch, f"{tmp}.live", at):  # a release without expiry would serve them for ever
            if _repaired(cand, f"{tmp}.live", f"{tmp}.kept", version, at, None) is None:
                return None
            cand.extra_drops.append(_EXPIRED.format(version=".".join(map(str, version))))
            scratch = f"{tmp}.kept"
        with DbFile(scratch) as db:
            source_version = db.version
            rep = convert(db, tmp, target, force=True, now=at)
        lost = ", ".join(f"{lo.kind}.{lo.field} x{lo.count}" for lo in rep.losses.values() if lo.count)
        cand.converted = f"v{source_version} -> v{target}" + (f" (lost: {lost})" if lost else " (nothing lost)")
        return tmp
    offset = stop.offset if stop is not None else None
    span = _chunk_at(scratch, offset) if offset is not None else None
    if span is None:
        return None
    start, end, label = span
    _without(scratch, f"{tmp}.cut", start, end)
    cand.extra_drops.append(f"{label}: {_situation(stop.rule) if stop is not None else pred.verdict}")
    again = _repaired(cand, f"{tmp}.cut", tmp, version, at, conf)  # references to what was dropped go too
    if again is None:
        return None
    cand.extra_drops.extend(f"{d.kind} at offset {d.offset:,}: {d.reason}" for d in again.dropped)
    return tmp


def _chunk_at(path: str, offset: int) -> tuple[int, int, str] | None:
    """(start, end, a description) of the chunk holding byte ``offset`` of ``path``; None for the header."""
    from codec.reader import DbFile

    try:
        with DbFile(path) as db:
            offsets, types, ends = db.index.arrays()
            import numpy as np

            k = int(np.searchsorted(np.asarray(offsets), offset, side="right")) - 1
            if k < 0 or offset >= int(ends[k]):
                return None
            start, end = int(offsets[k]), int(ends[k])
            try:
                rec = db.chunk(k).record
                key = {"msg_store": ("store_id", "topic"), "client": ("client_id",), "sub": ("client_id", "topic"),
                       "client_msg": ("client_id", "store_id"), "retain": ("store_id",)}.get(rec.kind, ())
                label = rec.kind + "".join(f" {k2}={rec.get(k2)!r}" for k2 in key)
            except CodecError:
                label = f"chunk of type {int(types[k])}"
            return start, end, label
    except CodecError:
        return None


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
        like = os.lstat(rep.aside[0]) if rep.aside else None  # the original's (or FILE.new's) owner and mode

        def verify(tmp: str) -> None:
            got, unknown = model(tmp, version, at=at, conf=conf)
            if chosen.trial is None and (unknown or got is None or got.verdict != "loads"):
                raise WriteError(f"the salvaged file is still not loadable: {unknown or why(got)}; nothing put in "
                                 "place", path=path)
            with open(tmp, "rb") as a, open(chosen.scratch, "rb") as b:
                if not _same(a, b):
                    raise WriteError("the salvage changed while it was put in place; nothing put in place", path=path)

        with safefile.atomic_replace(path, like=like, verify=verify, replaces=path) as out:
            src = os.open(chosen.scratch, os.O_RDONLY)
            try:
                safefile.copy_fd(src, out.fd)
            finally:
                os.close(src)
        if has_new and os.path.lexists(leftover):
            safefile.remove(leftover)  # its bytes are kept aside; the broker would overwrite it anyway
        rep.action = "salvaged"
        rep.after, _ = model(path, version, at=at, conf=conf, topics=True)
        said = f" ({summary(rep.after)})" if rep.after is not None and rep.after.verdict == "loads" else ""
        line(f"put the salvage of {chosen.source} in place as {path}: Mosquitto {rep.broker} loads it{said}")
        return
    for name in (path, leftover):
        if os.path.lexists(name):
            safefile.remove(name)  # its bytes are kept aside
    rep.action = "emptied"
    line(f"removed {path} (its bytes are kept aside): Mosquitto {rep.broker} starts empty")


def _same(a: Any, b: Any) -> bool:
    while True:
        x, y = a.read(1 << 20), b.read(1 << 20)
        if x != y:
            return False
        if not x:
            return True


__all__ = ["Candidate", "GuardRefused", "GuardReport", "aside_name", "keep_aside", "model", "present", "run_guard",
           "stamp", "summary", "why"]
