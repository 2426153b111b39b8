"""The Kaitai Struct compiler and runtime for tests: compile the generated .ksy to Python and read
a file with it into what ``mosqdb dump --json`` prints (type, offset, length, values).

The compiler is the npm registry's JavaScript build, run with Node from ``$MOSQDB_KAITAI_DIR``
(default ~/.cache/mosqdb-kaitai, filled by scripts/bootstrap.sh); tests skip, saying why, without it."""

from __future__ import annotations

import base64
import importlib.util
import io
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.paths import ROOT

KAITAI_DIR = Path(os.environ.get("MOSQDB_KAITAI_DIR") or Path.home() / ".cache" / "mosqdb-kaitai")
COMPILE = ROOT / "scripts" / "kaitai-compile.js"


def missing() -> str | None:
    """Why the compiler cannot run here (None when it can)."""
    if shutil.which("node") is None:
        return "node is not installed (scripts/bootstrap.sh installs the Kaitai compiler with npm)"
    if not (KAITAI_DIR / "node_modules" / "kaitai-struct-compiler").is_dir():
        return f"the Kaitai Struct compiler is not in {KAITAI_DIR} (run scripts/bootstrap.sh with MOSQDB_KAITAI=1)"
    if importlib.util.find_spec("kaitaistruct") is None:
        return "the kaitaistruct runtime is not installed (pip install -e '.[test]')"
    return None


def compile_spec(ksy: Path, outdir: Path, *, language: str = "python", debug: bool = True) -> Path:
    """Compile ``ksy``; returns the directory holding the generated sources."""
    args = ["node", str(COMPILE), str(ksy), language, str(outdir)] + (["--debug"] if debug else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, MOSQDB_KAITAI_DIR=str(KAITAI_DIR)))
    assert r.returncode == 0, f"the Kaitai compiler refused {ksy.name}: {r.stderr}"
    return outdir


def load_parser(outdir: Path) -> Any:
    """The generated ``MosquittoDb`` class."""
    spec = importlib.util.spec_from_file_location("mosquitto_db_kaitai", outdir / "mosquitto_db.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MosquittoDb


def compiled_parser(ksy_text: str, tmp: Path) -> Any:
    reason = missing()
    if reason:
        pytest.skip(reason)
    ksy = tmp / "mosquitto_db.ksy"
    ksy.write_text(ksy_text)
    return load_parser(compile_spec(ksy, tmp / "py"))


def _int(v: Any) -> int:
    return int(v.value) if hasattr(v, "value") else int(v)


def _props(tail: Any) -> list[dict[str, Any]] | None:
    from codec.properties import BY_ID

    if tail is None:
        return None
    out = []
    for item in tail.list.items:
        pid = _int(item.identifier)
        spec = BY_ID[pid]
        v = item.value
        if spec.kind == "vbi":
            value: Any = v.value
        elif spec.kind == "bin":
            value = bytes(v.value).hex()
        elif spec.kind == "str":
            value = v.value
        elif spec.kind == "pair":
            value = [v.key.value, v.value.value]
        else:
            value = int(v)
        out.append({"id": pid, "name": spec.name, "type": spec.kind, "value": value})
    return out


def chunk_values(version: int, chunk: Any) -> dict[str, Any]:
    """A parsed chunk as `dump --json` shows it: type, length and the values its layout holds."""
    from codec.layouts import ChunkType, layout_for

    t = _int(chunk.chunk_type)
    layout = layout_for(version, t)
    body = chunk.body
    if layout is None:
        return {"type": "unknown", "length": chunk.length, "chunk_type": t,
                "raw_b64": base64.b64encode(body.raw).decode("ascii")}
    out: dict[str, Any] = {"type": ChunkType(t).label, "length": chunk.length}
    for f in layout.fields:
        for name in f.values:
            v = getattr(body, name, None)
            if f.kind == "props":
                out[name] = _props(v)
            elif f.kind == "bytes":
                out["payload_b64" if name == "payload" else name] = base64.b64encode(v).decode("ascii")
            elif f.kind == "str":
                out[name] = None if f.nullable and v == "" else v
            else:
                out[name] = _int(v)
    return out


def read(parser: Any, data: bytes) -> dict[str, Any]:
    """Parse ``data``: {"version", "chunks": [values with "offset"], "stop": where reading ended,
    "error": the exception or None}. ``stop`` is the end of the last whole chunk: where a damaged
    chunk starts, or where bytes Mosquitto ignores begin (a cut-short header or unknown chunk)."""
    from kaitaistruct import KaitaiStream

    m = parser(KaitaiStream(io.BytesIO(data)))
    error = None
    try:
        m._read()
    except Exception as exc:  # a damaged file: what was read before stays
        error = exc
    whole_header = "end" in m._debug.get("header", {})
    version = m.header.db_version if whole_header else None
    chunks, stop = [], (23 if whole_header else 0)
    arr = m._debug["chunks"].get("arr", []) if "chunks" in m._debug else []
    for i, c in enumerate(getattr(m, "chunks", None) or []):
        span = arr[i]
        if "end" not in span:  # the chunk that failed
            break
        if getattr(c, "trailing", None) is not None or getattr(getattr(c, "body", None), "cut_short", None) is not None:
            break  # bytes Mosquitto does not read
        row = chunk_values(version, c)
        row["offset"] = span["start"]
        chunks.append(row)
        stop = span["end"]
    return {"version": version, "chunks": chunks, "stop": stop, "error": error}
