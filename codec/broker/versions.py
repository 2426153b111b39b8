"""Mosquitto releases the broker model knows, their release lines, and ``--broker auto``.

A version is a ``(major, minor, patch)`` tuple. The model's rules (:mod:`codec.broker.rules`) are keyed
by version ranges; the release lines here only group them the way operators name them (1.4, 1.5,
1.6, 2.0.0–2.0.14, 2.0.15–2.0.18, 2.0.19–2.0.22, 2.1.x) and bound what ``--broker`` accepts: every
release in these lines exists upstream (tags of eclipse-mosquitto/mosquitto; 2.0.21–2.0.23 and 2.1.x
from ChangeLog.txt of the 2.1.2 tarball), anything else is refused rather than guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from codec.errors import CodecError

Version = tuple[int, int, int]


@dataclass(frozen=True)
class Line:
    """A release line: ``first``..``last`` (inclusive), named as operators name it."""

    name: str
    first: Version
    last: Version

    def __contains__(self, v: Version) -> bool:
        return self.first <= v <= self.last


LINES = (
    Line("1.4", (1, 4, 0), (1, 4, 15)),
    Line("1.5", (1, 5, 0), (1, 5, 11)),
    Line("1.6", (1, 6, 0), (1, 6, 15)),
    Line("2.0.0-2.0.14", (2, 0, 0), (2, 0, 14)),
    Line("2.0.15-2.0.18", (2, 0, 15), (2, 0, 18)),
    Line("2.0.19-2.0.23", (2, 0, 19), (2, 0, 23)),
    Line("2.1", (2, 1, 0), (2, 1, 2)),
)

# what `--broker auto` picks for a file: the newest release that writes its db version
# (1.4 and 1.5.0-1.5.5 write v3, 1.5.6+ v4, 1.6.0-1.6.10 v5, 1.6.11+ and 2.x v6); for v6,
# 2.1.2 when the store ids are clock-based (2.1 writes them so), else the newest tested 2.0
AUTO = {2: (1, 4, 15), 3: (1, 5, 5), 4: (1, 5, 11), 5: (1, 6, 10), 6: (2, 0, 22)}
AUTO_CLOCK_IDS = (2, 1, 2)
CLOCK_ID_MIN = 10**15  # 2.1's store ids: microseconds since 2021-11-17 (docs/mosquitto-db-format.md §4)

ACCEPTED = ", ".join(f"{'.'.join(map(str, ln.first))}-{'.'.join(map(str, ln.last))}" for ln in LINES)


class UnknownVersion(CodecError):
    """A --broker value that names no release the model knows."""


def parse_version(text: str) -> Version:
    """``"2.0.18"`` -> ``(2, 0, 18)``; anything that is not a known release raises :class:`UnknownVersion`."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", text.strip())
    if not m:
        raise UnknownVersion(f"--broker {text!r}: not a Mosquitto version (give MAJOR.MINOR.PATCH, e.g. 2.0.18, "
                             f"or auto); known: {ACCEPTED}")
    v = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if line_of(v) is None:
        raise UnknownVersion(f"--broker {text}: not a release the broker model knows ({ACCEPTED})")
    return v


def line_of(v: Version) -> Line | None:
    return next((ln for ln in LINES if v in ln), None)


def text(v: Version) -> str:
    return ".".join(map(str, v))


def auto_version(db_version: int | None, clock_ids: bool = False) -> Version:
    """The release ``--broker auto`` models for a file of ``db_version`` (an empty file: the newest)."""
    if db_version == 6 and clock_ids:
        return AUTO_CLOCK_IDS
    return AUTO.get(db_version or 6, AUTO[6])


__all__ = ["ACCEPTED", "AUTO", "LINES", "Line", "UnknownVersion", "Version", "auto_version", "line_of",
           "parse_version", "text"]
