"""Decode files into comparable records; hashes; the errors `check` finds at a fixed time."""

from __future__ import annotations

import hashlib
from pathlib import Path

from codec import DbFile

from support.clock import WRITTEN_AT


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def records(path: Path) -> list:
    with DbFile(path) as db:
        return [c.record for c in db.stream()]


def by_kind(path: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in records(path):
        out.setdefault(r.kind, []).append(dict(r.values))
    return out


def errors(path: Path, at: float = WRITTEN_AT) -> list[str]:
    from codec.ops.check import check_file

    with DbFile(path) as db:
        return [f"{f.where()}: {f.message}" for f in check_file(db, at=at) if f.severity == "error"]
