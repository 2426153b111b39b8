"""The layout table seen as the tools see it: one body type per (chunk type, versions), the ABI
variants folded into it, and every size or position as a sum a target language can write.

A Kaitai spec or an ImHex pattern cannot try one layout and fall back on another as
:func:`codec.engine.choose_layout` does; but the table's ABI variants differ only in padding, so
each becomes one body whose padding width is chosen by the stored chunk length.
"""

from __future__ import annotations

from dataclasses import dataclass

from codec.layouts import ALL_LAYOUTS, VERSIONS, ChunkType, Field, Layout

HOST_ORDERS = ("little", "big")
# words target languages reserve (neither Kaitai nor ImHex renames them): an enum holding one gets its
# name as prefix (``direction_in``)
_RESERVED = {"in", "out", "is", "if", "for", "class", "def", "default", "not", "and", "or", "new", "delete", "null"}


def enum_names(name: str, values: dict[int, str]) -> dict[int, str]:
    """An enum's value names as a tool declares them."""
    if any(v in _RESERVED for v in values.values()):
        return {k: f"{name}_{v}" for k, v in values.items()}
    return dict(values)


@dataclass(frozen=True)
class Sum:
    """A byte count: a constant plus the values of some length fields (``3 + topic_len``)."""

    const: int = 0
    terms: tuple[str, ...] = ()

    def plus(self, other: int | str) -> Sum:
        if isinstance(other, int):
            return Sum(self.const + other, self.terms)
        return Sum(self.const, self.terms + (other,))

    def text(self, prefix: str = "") -> str:
        """The sum as a C-like expression (both Kaitai and ImHex read it); ``prefix`` names the terms' owner."""
        parts = [str(self.const)] if self.const or not self.terms else []
        parts += [prefix + t for t in self.terms]
        return " + ".join(parts)


@dataclass(frozen=True)
class PadChoice:
    """A padding whose width depends on the ABI that wrote the chunk (the stored length tells)."""

    default: int
    alternate: int
    abi: str
    default_size: Sum  # exact body size with the default padding
    alternate_size: Sum  # exact body size with the alternate padding


@dataclass(frozen=True)
class Element:
    """One field of a body type, with where it starts (when a later field or the tail needs it)."""

    field: Field
    start: Sum
    pad: PadChoice | None = None  # for a pad whose width depends on the ABI

    @property
    def name(self) -> str:
        return self.field.name


@dataclass(frozen=True)
class BodyType:
    """The body of one chunk type in some db versions."""

    chunk_type: ChunkType
    versions: tuple[int, ...]
    elements: tuple[Element, ...]
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``msg_store_v5_6``: the chunk type and its versions (a range when they follow each other)."""
        vs = self.versions
        if len(vs) == 1:
            tail = f"v{vs[0]}"
        elif list(vs) == list(range(vs[0], vs[-1] + 1)):
            tail = f"v{vs[0]}_{vs[-1]}"
        else:
            tail = "v" + "_".join(map(str, vs))
        return f"{self.chunk_type.label}_{tail}"

    @property
    def title(self) -> str:
        vs = self.versions
        return f"{self.chunk_type.name}, db version{'s' if len(vs) > 1 else ''} {_versions_text(vs)}"


def _versions_text(vs: tuple[int, ...]) -> str:
    if len(vs) > 2 and list(vs) == list(range(vs[0], vs[-1] + 1)):
        return f"{vs[0]}-{vs[-1]}"
    return ", ".join(map(str, vs[:-1])) + (" and " if len(vs) > 1 else "") + str(vs[-1])


def _exact_size(fields: tuple[Field, ...]) -> Sum:
    """Body size of a layout without a tail, from its fixed widths and length fields."""
    total = Sum()
    for f in fields:
        if f.kind in ("str", "bytes"):
            total = total.plus(f"{f.name}_len")
        elif f.kind in ("props", "time_t"):
            raise ValueError(f"{f.name}: an ABI variant with a {f.kind} field cannot be told apart by its length")
        else:
            total = total.plus(f.width)
    return total


def _fold(default: Layout, alternate: Layout) -> dict[int, PadChoice]:
    """Where the alternate ABI's padding differs from the default's: pad element index -> choice."""
    plain = [f for f in default.fields if f.kind != "pad"]
    if plain != [f for f in alternate.fields if f.kind != "pad"]:
        raise ValueError(f"{default.type.name} v{default.versions}: ABI variants differ beyond their padding")

    def gaps(layout: Layout) -> list[int]:
        widths, k = [0] * (len(plain) + 1), 0
        for f in layout.fields:
            if f.kind == "pad":
                widths[k] += f.size
            else:
                k += 1
        return widths

    a, b = gaps(default), gaps(alternate)
    choices: dict[int, PadChoice] = {}
    k = 0
    for i, f in enumerate(default.fields):
        if f.kind == "pad":
            if a[k] != b[k]:
                choices[i] = PadChoice(f.size, b[k], alternate.abi, _exact_size(default.fields),
                                       _exact_size(alternate.fields))
        else:
            k += 1
    if any(a[g] != b[g] for g in range(len(a))) and not choices:
        raise ValueError(f"{default.type.name}: the alternate ABI pads where the default does not")
    for i, choice in choices.items():  # the lengths that decide must be read before the padding
        before = {f.name for f in default.fields[:i] if f.kind in ("len16", "len32")}
        needed = set(choice.default_size.terms) | set(choice.alternate_size.terms)
        if not needed <= before:
            raise ValueError(f"{default.type.name}: lengths {sorted(needed - before)} come after the padding")
    return choices


def body_types() -> list[BodyType]:
    """Every body type, in the table's order (chunk type, then versions)."""
    groups: dict[tuple[ChunkType, tuple[int, ...]], list[Layout]] = {}
    for layout in ALL_LAYOUTS:
        groups.setdefault((layout.type, layout.versions), []).append(layout)
    out = []
    for (chunk_type, versions), layouts in groups.items():
        default, *alternates = layouts
        if len(alternates) > 1:
            raise ValueError(f"{chunk_type.name}: more than one alternate ABI")
        choices = _fold(default, alternates[0]) if alternates else {}
        elements, pos = [], Sum()
        for i, f in enumerate(default.fields):
            elements.append(Element(f, pos, choices.get(i)))
            if f.kind in ("str", "bytes"):
                pos = pos.plus(f"{f.name}_len")
            elif f.kind not in ("props", "time_t"):
                pos = pos.plus(f.width if i not in choices else 0)
            if i in choices:
                pos = pos.plus(f"{f.name}_size")
        notes = tuple(f"{a.abi}: {a.notes}" for a in alternates if a.notes)
        out.append(BodyType(chunk_type, versions, tuple(elements), notes))
    out.sort(key=lambda b: (int(b.chunk_type), b.versions))
    return out


def body_for(chunk_type: ChunkType, version: int) -> BodyType | None:
    for body in body_types():
        if body.chunk_type == chunk_type and version in body.versions:
            return body
    return None


def header_groups() -> list[tuple[tuple[int, ...], str]]:
    """Versions grouped by chunk header format, in version order: [((2, 3, 4), '>HI'), ((5, 6), '>II')]."""
    groups: dict[str, list[int]] = {}
    for v, row in VERSIONS.items():
        groups.setdefault(row.header_format, []).append(v)
    return [(tuple(vs), fmt) for fmt, vs in groups.items()]


def field_doc(f: Field, host_order: str) -> str:
    """What a field is, for a tool's tooltip (the layout kind in words)."""
    kind = f.kind
    if kind in ("u64h", "i64h"):
        sign = "signed " if kind == "i64h" else ""
        return (f"{sign}64-bit in the writing host's byte order (never converted by Mosquitto); "
                f"read as {host_order}-endian")
    if kind == "time_t":
        return (f"time_t in host order ({host_order}-endian): 4 or 8 bytes, as the chunk length says "
                "(8 when it says neither); read and dropped by Mosquitto 2.0")
    if kind in ("len16", "len32"):
        return f"length in bytes of {f.target}"
    if kind == "str":
        return "UTF-8 text, not NUL-terminated" + ("; empty means absent" if f.nullable else "")
    if kind == "bytes":
        return "raw bytes"
    if kind == "pad":
        return "C struct padding: written as zeros, never checked"
    if kind == "props":
        return "MQTT v5 PUBLISH properties: what the chunk length leaves after the other fields (absent when nothing)"
    if kind == "nibbles":
        return f"{f.names[0]} in the high nibble, {f.names[1]} in the low one"
    doc = {"u8": "one byte", "u16": "big-endian u16", "u32": "big-endian u32"}[kind]
    if f.must is not None:
        doc += f"; Mosquitto refuses any value but {f.must}"
    if f.discarded:
        doc += "; read and dropped by every Mosquitto loader"
    return doc
