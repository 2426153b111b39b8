"""Fast decoders generated from the layout tables (the happy path only).

For each layout the table is turned into straight-line Python: runs of fixed-size fields
become one ``struct.unpack_from``, variable fields become slices. Anything unusual (a
bounds failure, a ``must`` violation, a property tail, ``time_t``) makes the generated
function return None, and the caller uses the generic interpreter in ``engine``, which
is the reference and produces the precise error and the byte spans. Tests check that
both give the same records on every file we have.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from codec.errors import PropertyError
from codec.layouts import Layout
from codec.properties import decode_properties

_FMT = {"u8": "B", "u16": "H", "u32": "I", "len16": "H", "len32": "I", "nibbles": "B"}
Decoder = Callable[[Any, int, int, int], "tuple[dict[str, Any], int, bytes | None] | None"]


def _groups(layout: Layout, endian: str) -> list[tuple[str, list]]:
    """Split the field list into struct runs (same byte order) and single variable steps."""
    host = "<" if endian == "little" else ">"
    steps: list[tuple[str, list]] = []
    for f in layout.fields:
        if f.kind in _FMT or f.kind in ("u64h", "i64h") or f.kind == "pad":
            order = host if f.kind in ("u64h", "i64h") else ">"
            code = {"u64h": "Q", "i64h": "q"}.get(f.kind) or (f"{f.size}s" if f.kind == "pad" else _FMT[f.kind])
            if steps and steps[-1][0] == "struct" and steps[-1][1][0] == order:
                steps[-1][1][1].append((code, f))
            else:
                steps.append(("struct", [order, [(code, f)]]))
        else:
            steps.append((f.kind, [f]))
    return steps


def compile_layout(layout: Layout, endian: str) -> Decoder | None:
    """Generate ``decode(buf, pos, limit, length) -> (values, end, padding) | None``."""
    if any(f.kind == "time_t" for f in layout.fields):
        return None  # width depends on the stored length: leave it to the interpreter
    env: dict[str, Any] = {"decode_properties": decode_properties, "PropertyError": PropertyError}
    lines = ["def decode(buf, pos, limit, length):", "    start = pos", "    pad = b''"]
    values: list[str] = []
    for n, (kind, spec) in enumerate(_groups(layout, endian)):
        if kind == "struct":
            order, items = spec
            fmt = struct.Struct(order + "".join(code for code, _ in items))
            env[f"S{n}"] = fmt
            names = []
            for _code, f in items:
                var = f"v_{f.name}" if f.kind not in ("len16", "len32") else f"n_{f.target}"
                if f.kind == "pad":
                    var = f"p{n}_{len(names)}"
                names.append(var)
            lines += [f"    if pos + {fmt.size} > limit: return None",
                      f"    {', '.join(names)}{',' if len(names) == 1 else ''} = S{n}.unpack_from(buf, pos)",
                      f"    pos += {fmt.size}"]
            for (_code, f), var in zip(items, names):
                if f.kind == "pad":
                    lines.append(f"    pad += {var}")
                elif f.kind == "nibbles":
                    hi, lo = f.names
                    lines.append(f"    v_{hi} = {var} >> 4; v_{lo} = {var} & 15")
                    values += [hi, lo]
                elif f.kind not in ("len16", "len32"):
                    if f.must is not None:
                        lines.append(f"    if {var} != {f.must}: return None")
                    values.append(f.name)
        elif kind in ("str", "bytes"):
            (f,) = spec
            lines += [f"    end = pos + n_{f.name}", "    if end > limit: return None"]
            if kind == "bytes":
                lines.append(f"    v_{f.name} = bytes(buf[pos:end])")
            else:
                expr = "bytes(buf[pos:end]).decode('utf-8', 'surrogateescape')"
                lines.append(f"    v_{f.name} = ({expr} or None) if end > pos else None" if f.nullable
                             else f"    v_{f.name} = {expr}")
            lines.append("    pos = end")
            values.append(f.name)
        elif kind == "props":
            (f,) = spec
            lines += ["    end = start + length",
                      "    if end < pos or end > limit: return None",
                      f"    v_{f.name} = None",
                      "    if end > pos:",
                      "        try:",
                      f"            v_{f.name} = decode_properties(buf, pos, end)",
                      "        except PropertyError:",
                      "            return None",
                      "    pos = end"]
            values.append(f.name)
        else:  # pragma: no cover
            return None
    items = ", ".join(f"{name!r}: v_{name}" for name in values)
    lines.append(f"    return {{{items}}}, pos, pad")
    exec(compile("\n".join(lines), f"<layout {layout.type.label} v{layout.versions} {layout.abi}>", "exec"), env)
    return env["decode"]


_CACHE: dict[tuple[int, str], Decoder | None] = {}


def fast_decoder(layout: Layout, endian: str) -> Decoder | None:
    key = (id(layout), endian)
    if key not in _CACHE:
        _CACHE[key] = compile_layout(layout, endian)
    return _CACHE[key]


__all__ = ["compile_layout", "fast_decoder"]
