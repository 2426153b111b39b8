"""exporters.snapshots: each file a broker saves (write .new, rename over) becomes one numbered version."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from exporters.snapshots import VersionStore, key_of
from exporters.spark.changes import version_rows

from support.paths import V6


def save_like_mosquitto(src: Path, dest: Path) -> None:
    """What a broker does at each autosave: a new file beside the old one, renamed over it."""
    shutil.copyfile(src, f"{dest}.new")
    os.replace(f"{dest}.new", dest)


def test_each_save_is_one_version_kept_as_written(tmp_path: Path) -> None:
    db = tmp_path / "mosquitto.db"
    store = VersionStore(str(tmp_path / "snap"))
    assert store.capture(str(db)) is None  # nothing saved yet
    save_like_mosquitto(V6, db)
    v1 = store.capture(str(db))
    assert v1 is not None and v1.seq == 1 and v1.source == str(db)
    assert os.stat(v1.path).st_ino == os.stat(db).st_ino  # a hard link: no copy
    assert store.capture(str(db)) is None  # the same file: no new version
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    save_like_mosquitto(empty, db)  # the broker lost everything
    v2 = store.capture(str(db))
    assert v2 is not None and v2.seq == 2
    assert Path(v1.path).read_bytes() == V6.read_bytes()  # the old version is untouched by the new save
    assert store.latest() == {key_of(str(db)): 2}
    store.prune(key_of(str(db)), 2)
    assert store.seqs(key_of(str(db))) == [2]
    save_like_mosquitto(V6, db)
    assert store.capture(str(db)).seq == 3  # type: ignore[union-attr]  # numbers never repeat


def test_a_file_cut_short_is_not_a_version_until_it_is_whole(tmp_path: Path) -> None:
    db = tmp_path / "mosquitto.db"
    db.write_bytes(V6.read_bytes()[:5000])  # someone copying over it in place, half way
    store = VersionStore(str(tmp_path / "snap"))
    assert store.capture(str(db)) is None and store.latest() == {}
    save_like_mosquitto(V6, db)
    assert store.capture(str(db)).seq == 1  # type: ignore[union-attr]


def test_rows_of_a_version_against_the_one_before(tmp_path: Path) -> None:
    db = tmp_path / "mosquitto.db"
    store = VersionStore(str(tmp_path / "snap"))
    save_like_mosquitto(V6, db)
    store.capture(str(db))
    first = version_rows(store.root, key_of(str(db)), 0, 1)  # against nothing: everything is added
    assert {(r[4], r[5]) for r in first} == {("retained", "added"), ("session", "added"), ("subscription", "added"),
                                             ("queued", "changed")}
    assert [r[3] for r in first] == list(range(len(first)))  # n: the order of the changes
    save_like_mosquitto(V6, db)  # saved again, unchanged
    store.capture(str(db))
    assert version_rows(store.root, key_of(str(db)), 1, 2) == []
