"""The mosquitto.db format, declared once: one field table per (db version, chunk type).

Nothing else in mosqdb knows field order, widths, byte order or padding. The engine walks
these tables to decode, encode, report byte spans and validate; the columnar decoder walks
the same tables with vectors. Field kinds:

==========  ===========================================================================
``u8``      one byte
``u16/u32`` big-endian unsigned (Mosquitto converts with htons/htonl)
``u64h``    unsigned 64-bit in *host* order (never converted by the broker; LE by default)
``i64h``    signed 64-bit, host order (absolute Unix times)
``time_t``  signed, host order, 4 or 8 bytes: v3/v4 CLIENT ``disconnect_t`` (size from length)
``len16``   big-endian u16 length of the variable field named by ``target``
``len32``   big-endian u32 length of the variable field named by ``target``
``str``     UTF-8 text whose length is its ``len`` field (kept byte-exact via surrogateescape)
``bytes``   raw bytes whose length is its ``len`` field
``nibbles`` one byte holding two values: high nibble ``names[0]``, low nibble ``names[1]``
``pad``     C struct padding, written as zeros
``props``   MQTT v5 property tail: whatever the chunk length leaves after everything else
==========  ===========================================================================
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import mmap


class ChunkType(IntEnum):
    CFG = 1
    MSG_STORE = 2
    CLIENT_MSG = 3
    RETAIN = 4
    SUB = 5
    CLIENT = 6

    @property
    def label(self) -> str:
        return self.name.lower()


TYPE_BY_LABEL = {t.label: t for t in ChunkType}

# the names of the values a field can hold (Mosquitto's mosq_ms_* and mosq_md_*, MQTT's QoS levels)
ENUMS: dict[str, dict[int, str]] = {
    "message_state": {
        0: "invalid", 1: "publish_qos0", 2: "publish_qos1", 3: "wait_for_puback", 4: "publish_qos2",
        5: "wait_for_pubrec", 6: "resend_pubrel", 7: "wait_for_pubrel", 8: "resend_pubcomp",
        9: "wait_for_pubcomp", 10: "send_pubrec", 11: "queued",
    },
    "direction": {0: "in", 1: "out"},
    "qos": {0: "at_most_once", 1: "at_least_once", 2: "exactly_once"},
}
# the chunk type ids as plain ints: hot loops and numpy comparisons (an IntEnum member costs a lookup)
CFG, MSG_STORE, CLIENT_MSG, RETAIN, SUB, CLIENT = (int(t) for t in ChunkType)


@dataclass(frozen=True)
class DbVersion:
    """One db version's framing: how its chunk headers are packed, whether stored lengths are exact,
    whether mosqdb writes it, and which Mosquitto releases write it. The one place a version is
    described; every reader, writer and scanner asks here (a new version is one row plus its layouts)."""

    number: int
    header_format: str  # struct format of a chunk header: (type, length), big-endian
    native_framing: bool  # fixed C structs written raw: stored lengths are exact (the C walk follows them)
    writable: bool  # mosqdb writes it (convert, migrate)
    written_by: str  # the Mosquitto releases that write it
    chunk_types: tuple[ChunkType, ...] = tuple(ChunkType)  # the chunk type ids it knows

    @property
    def header_size(self) -> int:
        """Bytes of a chunk header (type + length)."""
        return struct.calcsize(self.header_format)

    @cached_property
    def header(self) -> struct.Struct:
        """The chunk header's struct: ``header.unpack_from(buf, pos)`` gives (type, length)."""
        return struct.Struct(self.header_format)

    @property
    def type_size(self) -> int:
        """Bytes of the chunk type in a chunk header (2 or 4)."""
        return struct.calcsize(">" + self.header_format[1])


VERSIONS: dict[int, DbVersion] = {row.number: row for row in (
    DbVersion(2, ">HI", native_framing=False, writable=False, written_by="1.3 and older"),
    DbVersion(3, ">HI", native_framing=False, writable=True, written_by="1.4.x, 1.5.0-1.5.5"),
    DbVersion(4, ">HI", native_framing=False, writable=True, written_by="1.5.6-1.5.11"),
    DbVersion(5, ">II", native_framing=True, writable=True, written_by="1.6.0-1.6.10"),
    DbVersion(6, ">II", native_framing=True, writable=True, written_by="1.6.11 and later, 2.0.x, 2.1.x"),
)}
SUPPORTED_VERSIONS = tuple(VERSIONS)
VERSION_RANGE = f"{min(VERSIONS)}-{max(VERSIONS)}"  # "2-6", as messages name the versions that exist
WRITABLE_VERSIONS = tuple(v for v, row in VERSIONS.items() if row.writable)
MAGIC = b"\x00\xb5\x00mosquitto db"
# the file header, the same in every version: the magic, a CRC (written 0, never checked), the db version
HEADER_FIELD = struct.Struct(">I")  # the CRC and the db version: big-endian u32
CRC_OFFSET = len(MAGIC)  # 15
VERSION_OFFSET = CRC_OFFSET + HEADER_FIELD.size  # 19
FILE_HEADER_SIZE = VERSION_OFFSET + HEADER_FIELD.size  # 23
PAYLOAD_MAX = 268_435_455

FIXED_SIZES = {"u8": 1, "u16": 2, "u32": 4, "u64h": 8, "i64h": 8, "len16": 2, "len32": 4, "nibbles": 1}
VARIABLE_KINDS = ("str", "bytes")
# kinds whose width is not known from the table alone: a stored length field, or the chunk length, says
_UNPLACED_AFTER = VARIABLE_KINDS + ("props", "time_t")


@dataclass(frozen=True)
class Field:
    """One element of a chunk body."""

    name: str
    kind: str
    size: int = 0  # fixed width, for pad and numeric kinds
    target: str | None = None  # for len16/len32: the variable field measured
    nullable: bool = False  # for str: an empty value is "absent" (None)
    names: tuple[str, ...] = ()  # for nibbles: the two values packed in one byte
    must: int | None = None  # the only value a loader accepts (decoding anything else fails)
    discarded: bool = False  # every loader reads and drops it: not information a conversion can lose
    enum: str | None = None  # for u8: the ENUMS table naming its values

    @property
    def width(self) -> int:
        """Bytes the element takes when the table alone says (0 for str, bytes and props; 8 for time_t)."""
        return FIXED_SIZES.get(self.kind, self.size)

    @property
    def values(self) -> tuple[str, ...]:
        """The record keys this element fills (none for lengths and padding)."""
        if self.kind == "nibbles":
            return self.names
        if self.kind in ("pad", "len16", "len32"):
            return ()
        return (self.name,)


def U8(name: str, must: int | None = None, enum: str | None = None) -> Field:
    return Field(name, "u8", 1, must=must, enum=enum)


def U16(name: str, discarded: bool = False) -> Field:
    return Field(name, "u16", 2, discarded=discarded)


def U32(name: str) -> Field:
    return Field(name, "u32", 4)


def U64H(name: str) -> Field:
    return Field(name, "u64h", 8)


def I64H(name: str) -> Field:
    return Field(name, "i64h", 8)


def TimeT(name: str) -> Field:
    return Field(name, "time_t", 8, discarded=True)  # 2.0 reads and drops disconnect_t


def Len16(target: str) -> Field:
    return Field(f"{target}_len", "len16", 2, target=target)


def Len32(target: str) -> Field:
    return Field(f"{target}_len", "len32", 4, target=target)


def Str(name: str, nullable: bool = False) -> Field:
    return Field(name, "str", nullable=nullable)


def Bytes(name: str) -> Field:
    return Field(name, "bytes")


def Pad(size: int) -> Field:
    return Field("padding", "pad", size)


def Nibbles(high: str, low: str) -> Field:
    return Field(f"{high}_{low}", "nibbles", 1, names=(high, low))


def Props(name: str = "properties") -> Field:
    return Field(name, "props")


@dataclass(frozen=True)
class Layout:
    """The body of one chunk type in one db version (one ABI variant)."""

    type: ChunkType
    versions: tuple[int, ...]
    fields: tuple[Field, ...]
    abi: str = "lp64"
    notes: str = ""
    value_names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        names = tuple(v for f in self.fields for v in f.values)
        object.__setattr__(self, "value_names", names)

    @cached_property
    def fixed_fields(self) -> tuple[tuple[Field, int], ...]:
        """Every field before the first variable-size one, with its offset in the body.

        The one walk that says where a field lies without reading a stored length: in v5/v6
        this is the whole C struct (every number and length), in v2-v4 the fields before the
        first string. Scans, column gathers and filters ask here instead of adding up widths.
        """
        out, pos = [], 0
        for f in self.fields:
            if f.kind in _UNPLACED_AFTER:
                break
            out.append((f, pos))
            pos += f.width
        return tuple(out)

    @property
    def fixed_prefix_size(self) -> int:
        """Bytes before the first variable-size field (the C struct in v5/v6)."""
        if not self.fixed_fields:
            return 0
        f, pos = self.fixed_fields[-1]
        return pos + f.width

    def offset_of(self, name: str) -> int | None:
        """Where field or value ``name`` starts in the body, if no stored length decides it (else None)."""
        for f, pos in self.fixed_fields:
            if name == f.name or name in f.values:
                return pos
        return None

    @cached_property
    def length_free_values(self) -> frozenset[str]:
        """Values that can be read without the stored chunk length: every one before a ``time_t``
        or property tail (strings included: their own length fields place them)."""
        names: set[str] = set()
        for f in self.fields:
            if f.kind in ("time_t", "props"):
                break
            names.update(f.values)
        return frozenset(names)

    @cached_property
    def after_last_variable(self) -> tuple[str | None, int]:
        """(last str/bytes/props field, bytes of fixed fields after it): where a body ends once
        that field's span is known; (None, body size) for a layout without variable fields."""
        last, fixed = None, 0
        for f in self.fields:
            if f.kind in VARIABLE_KINDS or f.kind == "props":
                last, fixed = f.name, 0
            else:
                fixed += f.width
        return last, fixed

    @property
    def has_tail(self) -> bool:
        return any(f.kind == "props" for f in self.fields)

    def blank(self) -> dict[str, object]:
        """Values of a new chunk of this type: numbers 0 (or the one value a loader accepts),
        empty text and payloads, absent optional text and properties (to be edited)."""
        values: dict[str, object] = {}
        for f in self.fields:
            for name in f.values:
                if f.kind == "str":
                    values[name] = None if f.nullable else ""
                elif f.kind == "bytes":
                    values[name] = b""
                elif f.kind == "props":
                    values[name] = None
                else:
                    values[name] = 0 if f.must is None else f.must
        return values


# ---------------------------------------------------------------- the tables

# Every released broker refuses dbid_size != 8 ("Incompatible database configuration").
_CFG_V2_4 = (U8("shutdown"), U8("dbid_size", must=8), U64H("last_db_id"))
_CFG_V5_6 = (U64H("last_db_id"), U8("shutdown"), U8("dbid_size", must=8), Pad(6))

_MSG_STORE_V2_3 = (
    U64H("store_id"),
    Len16("source_id"), Str("source_id", nullable=True),
    U16("source_mid"),
    U16("mid", discarded=True),  # legacy: read and dropped by every loader
    Len16("topic"), Str("topic"),
    U8("qos", enum="qos"), U8("retain"),
    Len32("payload"), Bytes("payload"),
)
_MSG_STORE_V4 = (
    U64H("store_id"),
    Len16("source_id"), Str("source_id", nullable=True),
    Len16("source_username"), Str("source_username", nullable=True),
    U16("source_port"),
    U16("source_mid"),
    U16("mid", discarded=True),  # legacy: read and dropped by every loader
    Len16("topic"), Str("topic"),
    U8("qos", enum="qos"), U8("retain"),
    Len32("payload"), Bytes("payload"),
)
_MSG_STORE_V5_6 = (
    U64H("store_id"),
    I64H("expiry_time"),
    Len32("payload"),
    U16("source_mid"),
    Len16("source_id"),
    Len16("source_username"),
    Len16("topic"),
    U16("source_port"),
    U8("qos", enum="qos"), U8("retain"),
    Str("source_id", nullable=True),
    Str("source_username", nullable=True),
    Str("topic"),
    Bytes("payload"),
    Props(),
)

_CLIENT_MSG_V2_4 = (
    Len16("client_id"), Str("client_id"),
    U64H("store_id"),
    U16("mid"),
    U8("qos", enum="qos"), U8("retain"), U8("direction", enum="direction"), U8("state", enum="message_state"), U8("dup"),
)
_CLIENT_MSG_V5_6 = (
    U64H("store_id"),
    U16("mid"),
    Len16("client_id"),
    U8("qos", enum="qos"), U8("state", enum="message_state"), Nibbles("retain", "dup"), U8("direction", enum="direction"),
    Str("client_id"),
    Props(),
)

_RETAIN = (U64H("store_id"),)

_SUB_V2_4 = (Len16("client_id"), Str("client_id"), Len16("topic"), Str("topic"), U8("qos", enum="qos"))
_SUB_V5_6 = (
    U32("identifier"),
    Len16("client_id"), Len16("topic"),
    U8("qos", enum="qos"), U8("options"), Pad(2),
    Str("client_id"), Str("topic"),
)

# SUB `options` (v5, v6): the MQTT v5 SUBSCRIBE option bits with the QoS bits left out (format doc, SUB).
SUB_OPTION_BITS = {"no_local": 0x04, "retain_as_published": 0x08, "retain_handling": 0x30}
SUB_OPTIONS_VALID = 0x3C  # bits 2-5; bits 0-1 and 6-7 are never written
# what each broker line persists of them: up to 2.0 no-local and retain-as-published only (2.0.22
# persist_write.c: no_local<<2 | retain_as_published<<3), 2.1 `options & 0xFC` (retain handling too)
SUB_OPTIONS_PERSISTED = {(1, 6): 0x0C, (2, 0): 0x0C, (2, 1): 0x3C}


def sub_options(no_local: bool = False, retain_as_published: bool = False, retain_handling: int = 0,
                persisted: int = SUB_OPTIONS_VALID) -> int:
    """The SUB chunk's options byte for these MQTT v5 subscription options, as a writer persisting `persisted`."""
    full = ((SUB_OPTION_BITS["no_local"] if no_local else 0)
            | (SUB_OPTION_BITS["retain_as_published"] if retain_as_published else 0)
            | (retain_handling << 4) & SUB_OPTION_BITS["retain_handling"])
    return full & persisted


_CLIENT_V2 = (Len16("client_id"), Str("client_id"), U16("last_mid"))
_CLIENT_V3_4 = _CLIENT_V2 + (TimeT("disconnect_t"),)
_CLIENT_V5 = (
    I64H("session_expiry_time"), U32("session_expiry_interval"), U16("last_mid"),
    Len16("client_id"), Str("client_id"),
)
_CLIENT_V6_HEAD = (
    I64H("session_expiry_time"), U32("session_expiry_interval"), U16("last_mid"),
    Len16("client_id"), U16("listener_port"), Len16("username"),
)
_CLIENT_V6_TAIL = (Str("client_id"), Str("username", nullable=True))

T = ChunkType
ALL_LAYOUTS: tuple[Layout, ...] = (
    Layout(T.CFG, (2, 3, 4), _CFG_V2_4),
    Layout(T.CFG, (5, 6), _CFG_V5_6),
    Layout(T.CFG, (5, 6), _CFG_V5_6[:3] + (Pad(2),), abi="i386", notes="PF_cfg is 12 bytes on 32-bit x86"),
    Layout(T.MSG_STORE, (2, 3), _MSG_STORE_V2_3),
    Layout(T.MSG_STORE, (4,), _MSG_STORE_V4),
    Layout(T.MSG_STORE, (5, 6), _MSG_STORE_V5_6),
    Layout(T.CLIENT_MSG, (2, 3, 4), _CLIENT_MSG_V2_4),
    Layout(T.CLIENT_MSG, (5, 6), _CLIENT_MSG_V5_6),
    Layout(T.RETAIN, (2, 3, 4, 5, 6), _RETAIN),
    Layout(T.SUB, (2, 3, 4), _SUB_V2_4),
    Layout(T.SUB, (5, 6), _SUB_V5_6),
    Layout(T.CLIENT, (2,), _CLIENT_V2),
    Layout(T.CLIENT, (3, 4), _CLIENT_V3_4),
    Layout(T.CLIENT, (5,), _CLIENT_V5),
    Layout(T.CLIENT, (6,), _CLIENT_V6_HEAD + (Pad(4),) + _CLIENT_V6_TAIL),
    Layout(T.CLIENT, (6,), _CLIENT_V6_HEAD + _CLIENT_V6_TAIL, abi="i386", notes="PF_client is 20 bytes on 32-bit x86"),
)

# (version, type) -> [default layout, *ABI alternates]
LAYOUTS: dict[tuple[int, ChunkType], list[Layout]] = {}
for _layout in ALL_LAYOUTS:
    for _v in _layout.versions:
        LAYOUTS.setdefault((_v, _layout.type), []).append(_layout)

# Every value name a chunk type can have in any version, in a stable order (for dump/export).
FIELD_NAMES: dict[ChunkType, tuple[str, ...]] = {}
for _layout in ALL_LAYOUTS:
    known = list(FIELD_NAMES.get(_layout.type, ()))
    known += [n for n in _layout.value_names if n not in known]
    FIELD_NAMES[_layout.type] = tuple(known)


def version_row(version: int) -> DbVersion:
    """The version table's row (a version no row describes: the newest one before it, so the
    framing of a file without a version, an empty one, is still defined)."""
    row = VERSIONS.get(version)
    if row is not None:
        return row
    older = [v for v in VERSIONS if v <= version]
    return VERSIONS[max(older)] if older else VERSIONS[min(VERSIONS)]


def header_size(version: int) -> int:
    """Chunk header: u16 type + u32 length in v2-v4, u32 + u32 in v5/v6 (the version table says)."""
    return version_row(version).header_size


def native_framing(version: int) -> bool:
    """Stored chunk lengths are exact (v5/v6): the scan may follow them."""
    return version_row(version).native_framing


def stored_version(head: bytes | bytearray | memoryview | mmap.mmap) -> int:
    """The db version a file header (at least :data:`FILE_HEADER_SIZE` bytes) says, whatever it is."""
    return HEADER_FIELD.unpack_from(head, VERSION_OFFSET)[0]


def layout_for(version: int, chunk_type: int, abi: str = "lp64") -> Layout | None:
    """The table for a chunk type in a version (None for unknown chunk types)."""
    try:
        options = LAYOUTS[(version, ChunkType(chunk_type))]
    except (KeyError, ValueError):
        return None
    for layout in options:
        if layout.abi == abi:
            return layout
    return options[0]
