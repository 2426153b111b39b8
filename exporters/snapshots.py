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
import shutil
from dataclasses import dataclass
from typing import Any

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
        os.makedirs(self._dir(key), exist_ok=True)
        seq = (seqs[-1] if seqs else 0) + 1
        tmp = self._db(key, seq) + f".{os.getpid()}.tmp"
        st = _link_or_copy(path, tmp)
        if st is None:
            return None
        if last is not None and last["fingerprint"] == fingerprint(st):  # replaced back meanwhile: same file
            os.unlink(tmp)
            return None
        if not _whole(tmp):
            os.unlink(tmp)
            return None
        os.replace(tmp, self._db(key, seq))
        meta = {"source": os.path.abspath(path), "fingerprint": fingerprint(st), "mtime_ns": st.st_mtime_ns,
                "size": st.st_size}
        with open(self._meta(key, seq) + ".tmp", "w", encoding="utf-8") as fh:
            json.dump(meta, fh)
        os.replace(self._meta(key, seq) + ".tmp", self._meta(key, seq))
        return self.version(key, seq)

    def prune(self, key: str, below: int) -> None:
        """Forget the versions of ``key`` numbered below ``below`` (their metadata first)."""
        for seq in self.seqs(key):
            if seq >= below:
                break
            for p in (self._meta(key, seq), self._db(key, seq)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)


def _link_or_copy(path: str, dest: str) -> os.stat_result | None:
    """``dest`` becomes the file ``path`` names now (a hard link, else a copy from one descriptor); its stat."""
    try:
        os.link(path, dest)
        return os.stat(dest)
    except FileNotFoundError:
        return None
    except OSError:  # another file system, or links not allowed: copy what one open descriptor reads
        try:
            src = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            st = os.fstat(src)
            with os.fdopen(os.dup(src), "rb") as fin, open(dest, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            return st
        finally:
            os.close(src)


def _whole(path: str) -> bool:
    """Whether a captured file reads as a complete db (an empty file is a broker with nothing saved)."""
    try:
        with DbFile(path) as db:
            return db.empty or db.index.error is None
    except CodecError:
        return False


__all__ = ["Version", "VersionStore", "fingerprint", "key_of"]
