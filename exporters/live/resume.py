"""The state of a replay, written atomically as it goes, so an interrupted run continues without duplicates.

Items are named by phase and chunk: ``r<row>`` a retained message, ``s<row>`` a session, ``q<row>`` a
queued message (rows of the msg_store / client chunk they came from), stable for the same file
whatever ``--at`` leaves out. The file holds:

* ``done``: items the target acknowledged (QoS 1/2), confirmed by a round trip behind them (QoS 0),
  or sessions fully recreated;
* ``reserved``: items that may have been sent since. Nothing is published before it is reserved on
  disk, so after a crash (even ``kill -9``) ``reserved - done`` is exactly the set whose fate is
  unknown: retained ones are compared with the target, sessions are recreated again (harmless),
  queued ones are reported and only resent with ``--resend-unconfirmed`` (the target may hold them).

Row sets are stored as ranges, so a state stays small for millions of items; every write is a temp
file, fsync, rename (codec.writer.atomic_output), so a state on disk is always a whole one.
"""

from __future__ import annotations

import bisect
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from codec.errors import CodecError
from codec.reader import Fingerprint
from codec.writer import atomic_output

FORMAT = "mosqdb-replay-state"
VERSION = 1
PHASES = ("r", "s", "q")


class StateError(CodecError):
    """A state file that is not one, or belongs to another file, target or set of options."""


class Rows:
    """A set of row numbers kept as sorted disjoint ranges: adding one is a binary search, and a
    state of a million items sent in order is one range, not a million numbers."""

    def __init__(self, ranges: Any = ()) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        for a, b in sorted((int(a), int(b)) for a, b in ranges):
            if b < a:
                raise ValueError(f"range {a}-{b} runs backwards")
            if self.ends and a <= self.ends[-1] + 1:
                self.ends[-1] = max(self.ends[-1], b)
            else:
                self.starts.append(a)
                self.ends.append(b)

    def __contains__(self, r: int) -> bool:
        i = bisect.bisect_right(self.starts, r) - 1
        return i >= 0 and self.ends[i] >= r

    def __len__(self) -> int:
        return sum(e - s + 1 for s, e in zip(self.starts, self.ends))

    def add(self, r: int) -> None:
        i = bisect.bisect_right(self.starts, r) - 1
        if i >= 0 and self.ends[i] >= r:
            return
        if i >= 0 and self.ends[i] == r - 1:
            self.ends[i] = r
            self._merge_right(i)
        elif i + 1 < len(self.starts) and self.starts[i + 1] == r + 1:
            self.starts[i + 1] = r
        else:
            self.starts.insert(i + 1, r)
            self.ends.insert(i + 1, r)

    def _merge_right(self, i: int) -> None:
        while i + 1 < len(self.starts) and self.starts[i + 1] <= self.ends[i] + 1:
            self.ends[i] = max(self.ends[i], self.ends[i + 1])
            del self.starts[i + 1], self.ends[i + 1]

    def ranges(self) -> list[list[int]]:
        return [[s, e] for s, e in zip(self.starts, self.ends)]


def to_ranges(rows: set[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for r in sorted(rows):
        if out and out[-1][1] == r - 1:
            out[-1][1] = r
        else:
            out.append([r, r])
    return out


def from_ranges(ranges: Any) -> set[int]:
    out: set[int] = set()
    for a, b in ranges:
        out.update(range(int(a), int(b) + 1))
    return out


def split_key(key: str) -> tuple[str, int]:
    return key[0], int(key[1:])


@dataclass
class State:
    path: str
    file: dict[str, Any]
    target: str
    options: dict[str, Any]
    done: dict[str, Rows] = field(default_factory=lambda: {p: Rows() for p in PHASES})
    reserved: dict[str, set[int]] = field(default_factory=lambda: {p: set() for p in PHASES})
    finished: bool = False
    runs: int = 0
    _saved: float = 0.0

    # ------------------------------------------------------------ items
    def is_done(self, key: str) -> bool:
        p, row = split_key(key)
        return row in self.done[p]

    def unconfirmed(self, phase: str) -> set[int]:
        """Rows reserved by an earlier run and never confirmed: sent or not, nobody knows."""
        done = self.done[phase]
        return {r for r in self.reserved[phase] if r not in done}

    def reserve(self, keys: list[str]) -> None:
        """Note ``keys`` as possibly sent, on disk, before any of them is sent."""
        for k in keys:
            p, row = split_key(k)
            self.reserved[p].add(row)
        self.save()

    def unreserve(self, keys: Iterable[str]) -> None:
        """Take back reservations of items never sent (a run that stops before it reaches them)."""
        for k in keys:
            p, row = split_key(k)
            if row not in self.done[p]:
                self.reserved[p].discard(row)

    def mark_done(self, key: str) -> None:
        p, row = split_key(key)
        self.done[p].add(row)
        self.reserved[p].discard(row)

    # ------------------------------------------------------------ disk
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "file": self.file, "target": self.target,
                "options": self.options, "finished": self.finished, "runs": self.runs,
                "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "done": {p: self.done[p].ranges() for p in PHASES},
                "reserved": {p: to_ranges(self.unconfirmed(p)) for p in PHASES}}

    def save(self) -> None:
        data = json.dumps(self.to_json(), separators=(",", ":")).encode()
        with atomic_output(self.path) as out:
            out.write(data)
        self._saved = time.monotonic()

    def save_every(self, seconds: float = 1.0) -> None:
        """Save unless a save happened within ``seconds`` (progress between reservations)."""
        if time.monotonic() - self._saved >= seconds:
            self.save()


def file_identity(path: str) -> dict[str, Any]:
    """What names the input: size and a digest of its first and last 64 KiB (not its mtime: a copy moves it)."""
    fp = Fingerprint.of(path)
    return {"path": os.path.abspath(path), "size": fp.size, "digest": fp.digest}


def open_state(path: str, *, source: str, target: str, options: dict[str, Any]) -> tuple[State, bool]:
    """The state at ``path`` (continued) or a new one (not yet written); True when it continues a run."""
    ident = file_identity(source)
    if not os.path.exists(path):
        return State(path, ident, target, options), False
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError) as exc:
        raise StateError(f"cannot read the resume state ({exc})", path=path) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StateError("not a mosqdb replay state file (refused, not overwritten)", path=path)
    if data.get("version") != VERSION:
        raise StateError(f"replay state version {data.get('version')} is not {VERSION}", path=path)
    f0 = data.get("file") or {}
    if (f0.get("size"), f0.get("digest")) != (ident["size"], ident["digest"]):
        raise StateError(f"was written for another file ({f0.get('path')}, {f0.get('size')} bytes), "
                         f"not {source}", path=path)
    if data.get("target") != target:
        raise StateError(f"was written for {data.get('target')}, not {target}", path=path)
    old = data.get("options") or {}
    diff = [k for k in sorted(set(old) | set(options)) if old.get(k) != options.get(k)]
    if diff:
        raise StateError("was written with other options ("
                         + ", ".join(f"{k}: {old.get(k)!r} then, {options.get(k)!r} now" for k in diff)
                         + "); run with the same ones", path=path)
    try:
        st = State(path, ident, target, options,
                   done={p: Rows(data["done"].get(p, [])) for p in PHASES},
                   finished=bool(data.get("finished")),
                   runs=int(data.get("runs") or 0))
        st.reserved = {p: from_ranges(data["reserved"].get(p, [])) for p in PHASES}
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"damaged replay state ({exc})", path=path) from None
    return st, True
