"""Small db files written with the codec for one point each (the real fixtures are in support.paths)."""

from __future__ import annotations

from pathlib import Path


def not_utf8_db(path: Path) -> Path:
    """A store whose topic, a user-property key and a content type are not UTF-8 (brokers refuse such text)."""
    from codec.engine import Record
    from codec.layouts import ChunkType
    from codec.properties import Property
    from codec.writer import write_records

    bad = b"t/\xff\xfeok".decode("utf-8", "surrogateescape")
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 2}, 6),
            Record(int(ChunkType.MSG_STORE), {"store_id": 1, "expiry_time": 0, "source_mid": 0, "source_id": "ok",
                                              "source_username": None, "source_port": 0, "topic": "fine", "qos": 0,
                                              "retain": 0, "payload": b"a", "properties": None}, 6),
            Record(int(ChunkType.MSG_STORE), {"store_id": 2, "expiry_time": 0, "source_mid": 0, "source_id": "ok",
                                              "source_username": None, "source_port": 0, "topic": bad, "qos": 0,
                                              "retain": 0, "payload": b"x", "properties": [
                                                  Property.make(38, (b"k\xc3".decode("utf-8", "surrogateescape"), "v")),
                                                  Property.make(3, bad)]}, 6),
            Record(int(ChunkType.RETAIN), {"store_id": 2}, 6)]
    write_records(path, 6, recs)
    return path
