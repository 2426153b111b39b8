"""Which sessions prune-sessions and drop-client remove: by id pattern and by shape.

Every criterion given must hold (AND). What the file knows about a session, and so what can be asked:

- its id: ``globs`` (shell patterns on the whole id, case-sensitive: ``dev-*``, ``sensor-??``) and
  ``regexes`` (Python regular expressions searched anywhere in the id; anchor with ``^``/``$``);
- ``no_subscriptions``: no SUB chunk names it;
- ``queue_larger_than``: more than N CLIENT_MSG entries (queued, in flight and incoming together);
- ``idle_since``: offline since before a time. The file has no "last seen": a v3/v4 CLIENT carries
  ``disconnect_t`` (when it disconnected, where the writer filled it in); a v5/v6 CLIENT carries
  ``session_expiry_time``, which the broker sets to disconnect time + ``session_expiry_interval`` (or
  save time + interval for a client still connected), so the time it went offline is the difference.
  A session that never expires (interval 0xFFFFFFFF) carries no time at all: it is kept, and counted;
- ``expired``: a v5/v6 session whose ``session_expiry_time`` lies before ``at``.

Live bridge sessions (:mod:`codec.broker.bridges`) are never selected by these criteria unless
``include_bridges``; they are reported as left alone.
"""

from __future__ import annotations

import fnmatch
import re
import time
from dataclasses import dataclass
from typing import Any

from codec.broker.conf import BrokerConf
from codec.errors import CodecError
from codec.values import time_text

_WHEN = "%Y-%m-%d %H:%M:%S UTC"


def check_glob(pattern: str) -> str:
    """A glob must not be empty and its ``[`` sets must close (fnmatch would take them literally)."""
    if not pattern:
        raise CodecError("--client-glob: an empty pattern")
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] in "!^":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            j = pattern.find("]", j)
            if j < 0:
                raise CodecError(f"--client-glob {pattern!r}: '[' at position {i} is never closed")
            i = j
        i += 1
    return pattern


def compile_regex(pattern: str) -> re.Pattern[str]:
    if not pattern:
        raise CodecError("--client-regex: an empty pattern")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise CodecError(f"--client-regex {pattern!r}: {exc}") from None


@dataclass
class SessionCriteria:
    """What a session must meet to be removed (see the module docstring)."""

    globs: tuple[str, ...] = ()
    regexes: tuple[str, ...] = ()
    no_subscriptions: bool = False
    queue_larger_than: int | None = None
    idle_since: float | None = None
    expired: bool = False
    at: float | None = None
    include_bridges: bool = False
    conf: BrokerConf | None = None

    def given(self) -> bool:
        return bool(self.globs or self.regexes or self.no_subscriptions or self.queue_larger_than is not None
                    or self.idle_since is not None or self.expired)

    def check(self) -> None:
        """Bad patterns and values raise :class:`CodecError` (the CLI makes it a usage error)."""
        for g in self.globs:
            check_glob(g)
        for r in self.regexes:
            compile_regex(r)
        if self.queue_larger_than is not None and self.queue_larger_than < 0:
            raise CodecError("--queue-larger-than must be 0 or more")


@dataclass
class Selected:
    victims: dict[str, str]  # client id -> why it goes
    skipped: dict[str, str]  # met the criteria, left alone (bridge sessions) -> why
    unknown_idle: int = 0  # sessions whose file does not say when they went offline


def select_sessions(info: dict, c: SessionCriteria, bridges: dict[str, str]) -> Selected:
    """The sessions of ``info`` (client id -> :class:`codec.ops.surgery.SessionInfo`) meeting every criterion."""
    c.check()
    now = time.time() if c.at is None else c.at
    regexes = [compile_regex(r) for r in c.regexes]
    out = Selected({}, {})
    for cid, s in info.items():
        reasons = []
        if c.globs:
            hit = next((g for g in c.globs if fnmatch.fnmatchcase(cid, g)), None)
            if hit is None:
                continue
            reasons.append(f"matches {hit!r}")
        if regexes:
            rx = next((r for r in regexes if r.search(cid)), None)
            if rx is None:
                continue
            reasons.append(f"matches /{rx.pattern}/")
        if c.expired:
            exp = s.session_expiry_time or 0
            if not (exp and exp < now):
                continue
            reasons.append(f"expired {time_text(exp, _WHEN)}")
        if c.idle_since is not None:
            idle = s.idle_since()
            if idle is None:
                out.unknown_idle += 1
                continue
            if idle >= c.idle_since:
                continue
            reasons.append(f"offline since {time_text(idle, _WHEN)}")
        if c.no_subscriptions:
            if s.subs:
                continue
            reasons.append("no subscriptions")
        if c.queue_larger_than is not None:
            if s.msgs <= c.queue_larger_than:
                continue
            reasons.append(f"{s.msgs:,} queued")
        if cid in bridges and not c.include_bridges:
            out.skipped[cid] = bridges[cid]
            continue
        out.victims[cid] = ", ".join(reasons)
    return out


def note_selection(rem: Any, picked: Selected) -> None:
    """What the removal report ``rem`` says about sessions the criteria met but left alone (a .db or a store)."""
    for cid, why in picked.skipped.items():
        rem.notes.append(f"left alone {cid!r}: {why} (--include-bridges to include it)")
    rem.skipped = dict(picked.skipped)
    if picked.unknown_idle:
        rem.notes.append(f"{picked.unknown_idle} session(s) kept: the file does not say when they went offline "
                         "(v5/v6 sessions that never expire carry no disconnect time)")


__all__ = ["Selected", "SessionCriteria", "check_glob", "compile_regex", "note_selection", "select_sessions"]
