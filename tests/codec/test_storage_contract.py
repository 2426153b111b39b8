"""Both storage formats implement the one contract every face reads, and one opener chooses between them."""

from __future__ import annotations

import codec
from codec.reader import DbFile
from codec.storage import Storage
from codec.store.read import StoreFile

from support.paths import REAL_FILES, SQLITE_STORES


def test_open_any_gives_the_contract_for_both_formats() -> None:
    assert SQLITE_STORES and REAL_FILES
    for path, kind in ((REAL_FILES[0], DbFile), (SQLITE_STORES[0], StoreFile)):
        with codec.open_any(path) as db:
            assert isinstance(db, kind) and isinstance(db, Storage)
            assert db.is_store is (kind is StoreFile)
            assert len(db) > 0 and db.source_path == str(path)
            first = db.chunk(0)
            assert [c.index for c in db.chunks_at([0])] == [first.index]
            assert sum(1 for _ in db.stream()) == len(db)


def test_the_contract_is_exported_by_the_codec_package() -> None:
    assert codec.Storage is Storage and "open_any" in codec.__all__ and "Storage" in codec.__all__


def test_a_stores_temporary_image_is_removed_when_closed() -> None:
    """A store read as .db records (codec.sources.as_db) leaves no directory behind once closed: a long-lived
    process (the TUI, a fuzzer) would otherwise keep one per opening until it exits."""
    import os

    from codec.sources import as_db

    image = as_db(codec.open_any(SQLITE_STORES[0]))
    folder = os.path.dirname(image.path)
    assert os.path.isdir(folder) and len(image) > 0 and image.source_path == str(SQLITE_STORES[0])
    image.close()
    assert not os.path.exists(folder)
