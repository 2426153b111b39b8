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


# ---------------------------------------------------------------- what a face asks, answered by both formats


def twins() -> tuple[StoreFile, DbFile]:
    """The 2.1.2 plugin's store and the .db of its v6 records (codec.sources.as_db): the same state."""
    from codec.sources import as_db

    return codec.open_any(SQLITE_STORES[0]), as_db(codec.open_any(SQLITE_STORES[0]))


def without_cfg(counts: dict) -> dict[int, int]:
    """Chunks per type but the cfg (a store has no row for the .db header chunk its image starts with)."""
    from codec.layouts import ChunkType

    return {int(t): n for t, n in counts.items() if int(t) != ChunkType.CFG and n}


def test_both_formats_declare_what_they_can_do() -> None:
    """Capabilities, not the kind: the faces ask these (tests/test_faces_storage_blind.py)."""
    from codec.sources import format_of

    store, image = twins()
    with store, image:
        for db in (store, image):
            assert isinstance(db, Storage)
            assert type(db) is format_of(db.path if db is store else REAL_FILES[0])
        assert (image.chunk_bytes, image.broker_model, image.format_name, image.format_key) == \
            (True, True, "mosquitto.db", "db")
        # a store's rows, not bytes at offsets; the broker model predicts it too (codec.broker.storemodel)
        assert (store.chunk_bytes, store.broker_model, store.format_name, store.format_key) == \
            (False, True, "Mosquitto 2.1 sqlite store", "sqlite")


def test_both_formats_give_equal_types_and_columns() -> None:
    import numpy as np

    from codec.sources import columns_of, known_refusals

    store, image = twins()
    with store, image:
        for db in (store, image):
            db.scan()
            assert db.damage is None
            types = db.types_array()
            assert types.dtype == np.uint32 and len(types) == len(db)
        count = lambda db: without_cfg(dict(zip(*np.unique(db.types_array(), return_counts=True), strict=True)))  # noqa: E731
        assert count(store) == count(image) == without_cfg(store.counts()) == without_cfg(image.counts())
        assert without_cfg(columns_of(store).type_counts()) == without_cfg(columns_of(image).type_counts())
        assert len(known_refusals(store)) == 0 and known_refusals(image) is None  # a .db's are found on the way


def test_both_formats_select_the_same_records() -> None:
    """A selection decided on either file's columns (codec.views.select.pick) keeps the same records."""
    from codec.sources import columns_of, known_refusals
    from codec.views.query import Selection
    from codec.views.select import pick

    store, image = twins()
    with store, image:
        for sel in (Selection(topics=["corp/retained/#"]), Selection(clients={"a-sub-q1"}),
                    Selection(kinds={"retain", "sub"})):
            kept = []
            for db in (store, image):
                rows = pick(db, sel, bad=known_refusals(db), source=columns_of(db)).rows
                kept.append(sorted(repr(sorted(c.record.values.items())) for c in db.chunks_at(rows.tolist())
                                   if c.kind != "cfg"))
            assert kept[0] == kept[1] and kept[0], sel


def test_both_formats_give_the_same_info_and_expiries() -> None:
    from codec.layouts import ChunkType
    from codec.sources import expiries, info_data

    store, image = twins()
    with store, image:
        at = 1_795_400_000.0  # between the fixture's message expiry times
        a, b = info_data(store, at), info_data(image, at)
        assert a["expiry"] == b["expiry"] and a["at"] == b["at"]
        assert {k: n for k, n in a["chunks"].items() if k != "cfg"} == {k: n for k, n in b["chunks"].items() if k != "cfg"}
        assert a["format"] == store.format_key and "format" not in b  # (info --json's keys, as they were)
        known = expiries(store)
        assert known and expiries(image) is None  # a .db's expiry sources are found among the chunks selected
        assert known == {c.record["store_id"]: c.record["expiry_time"] for c in image.stream(types=[ChunkType.MSG_STORE])
                         if c.record["expiry_time"] > 0}


def test_each_format_heads_its_text_dump_with_what_it_is() -> None:
    store, image = twins()
    with store, image:
        assert store.dump_heading().startswith("Mosquitto persist-sqlite store dump\nFile: ")
        assert store.dump_heading().endswith("Schema version: 1.1.0\n")
        assert image.dump_heading().startswith("Mosquitto DB dump\nFile: ")
        assert image.dump_heading().endswith("CRC: 0\nDB version: 6\n")
