"""Numbered versions of db files a broker keeps rewriting (autosaves), kept until they are consumed.

Mosquitto saves by writing ``mosquitto.db.new`` and renaming it over ``mosquitto.db``: every save
is a new file (a new inode), and the previous one is gone from the directory. To compare one
save with the next, each new version is captured as ``ROOT/<key>/<seq>.db`` — a hard link to
the very inode the broker wrote when the store is on the same file system (no copy, and a
later save cannot change it), else a copy read from one open descriptor — and its fingerprint
(device, inode, size, modification time) in ``<seq>.json``, written last: a version exists once its
``.json`` does. Sequence numbers start at 1 per watched file and never repeat; a captured file
that does not read as a whole db (copied while someone wrote it in place) is dropped and
taken again at the next look. :meth:`VersionStore.prune` removes the versions a consumer is
done with (the last one stays: the next diff starts from it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from codec import safefile
from codec.errors import CodecError
from codec.reader import DbFile

_SEQ = re.compile(r"^(\d{12})\.json$")


@dataclass(frozen=True)
class Version:
    key: str
    seq: int
    path: str  # the captured db
    source: str  # the watched file it was taken from
    mtime_ns: int  # when the broker wrote it
    size: int


def fingerprint(st: os.stat_result) -> list[int]:
    """What tells one saved file from the next (not the change time: our own hard link moves it)."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def key_of(path: str) -> str:
    """The directory name for one watched file: its name and a hash of its absolute path."""
    full = os.path.abspath(path)
    return f"{os.path.basename(full)}-{hashlib.sha256(full.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"


class VersionStore:
    """Captured versions under ``root`` (one directory per watched file)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)

    def _dir(self, key: str) -> str:
        return os.path.join(self.root, key)

    def _db(self, key: str, seq: int) -> str:
        return os.path.join(self._dir(key), f"{seq:012d}.db")

    def _meta(self, key: str, seq: int) -> str:
        return os.path.join(self._dir(key), f"{seq:012d}.json")

    def seqs(self, key: str) -> list[int]:
        """The captured versions of ``key``, ascending."""
        try:
            names = os.listdir(self._dir(key))
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_SEQ.match, names) if m)

    def keys(self) -> list[str]:
        try:
            return sorted(d for d in os.listdir(self.root) if os.path.isdir(self._dir(d)))
        except FileNotFoundError:
            return []

    def latest(self) -> dict[str, int]:
        """The newest captured version of every watched file."""
        out = {}
        for key in self.keys():
            seqs = self.seqs(key)
            if seqs:
                out[key] = seqs[-1]
        return out

    def version(self, key: str, seq: int) -> Version:
        try:
            with open(self._meta(key, seq), encoding="utf-8") as fh:
                meta = json.load(fh)
        except FileNotFoundError:
            raise CodecError(f"version {seq} of {key} is no longer kept (the snapshot directory was pruned or "
                             "shared with another query)", path=self._dir(key)) from None
        return Version(key, seq, self._db(key, seq), meta["source"], meta["mtime_ns"], meta["size"])

    def _meta_of(self, key: str, seq: int) -> dict[str, Any]:
        with open(self._meta(key, seq), encoding="utf-8") as fh:
            return dict(json.load(fh))

    def capture(self, path: str) -> Version | None:
        """Take the current content of ``path`` as a new version if it is not the last one taken;
        the new version, or None (unchanged, missing, or not whole yet)."""
        key = key_of(path)
        seqs = self.seqs(key)
        last = self._meta_of(key, seqs[-1]) if seqs else None
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        if last is not None and last["fingerprint"] == fingerprint(st):
            return None
        safefile.make_dirs(self._dir(key))
        seq = (seqs[-1] if seqs else 0) + 1

        def accept(tmp: str, st: os.stat_result) -> bool:
            if last is not None and last["fingerprint"] == fingerprint(st):  # replaced back meanwhile: same file
                return False
            return _whole(tmp)

        st = safefile.capture(path, self._db(key, seq), accept=accept)
        if st is None:
            return None
        meta = {"source": os.path.abspath(path), "fingerprint": fingerprint(st), "mtime_ns": st.st_mtime_ns,
                "size": st.st_size}
        with safefile.atomic_replace(self._meta(key, seq)) as rep:
            rep.file.write(json.dumps(meta).encode("utf-8"))
        return self.version(key, seq)

    def prune(self, key: str, below: int) -> None:
        """Forget the versions of ``key`` numbered below ``below`` (their metadata first)."""
        for seq in self.seqs(key):
            if seq >= below:
                break
            for p in (self._meta(key, seq), self._db(key, seq)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)


def _whole(path: str) -> bool:
    """Whether a captured file reads as a complete db (an empty file is a broker with nothing saved)."""
    try:
        with DbFile(path) as db:
            return db.empty or db.index.error is None
    except CodecError:
        return False


__all__ = ["Version", "VersionStore", "fingerprint", "key_of"]
