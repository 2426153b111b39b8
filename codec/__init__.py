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

__all__ = [
    "FIELD_NAMES",
    "SUPPORTED_VERSIONS",
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
    "open_db",
]
