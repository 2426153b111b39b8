"""mosqdb codec: read and write Mosquitto persistence files (db versions 2-6), byte-exact."""

from codec.engine import Record, Span, decode_chunk, encode_chunk
from codec.errors import (
    BadHeaderError,
    CodecError,
    FieldError,
    FileChangedError,
    NotADatabaseError,
    PropertyError,
    TruncatedError,
    UnsupportedVersionError,
    WriteError,
)
from codec.layouts import FIELD_NAMES, SUPPORTED_VERSIONS, ChunkType, layout_for
from codec.properties import Property
from codec.reader import Chunk, DbFile, open_db


def __getattr__(name: str) -> object:
    """``open_any`` and ``Storage`` load ``codec.sources`` (sqlite3) only when asked for: start-up time."""
    if name == "open_any":
        from codec.sources import open_any

        return open_any
    if name == "Storage":
        from codec.storage import Storage

        return Storage
    raise AttributeError(f"module 'codec' has no attribute {name!r}")


__all__ = [
    "FIELD_NAMES",
    "SUPPORTED_VERSIONS",
    "Storage",
    "BadHeaderError",
    "Chunk",
    "ChunkType",
    "CodecError",
    "DbFile",
    "FieldError",
    "FileChangedError",
    "NotADatabaseError",
    "Property",
    "PropertyError",
    "Record",
    "Span",
    "TruncatedError",
    "UnsupportedVersionError",
    "WriteError",
    "decode_chunk",
    "encode_chunk",
    "layout_for",
    "open_any",
    "open_db",
]
