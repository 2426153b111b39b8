"""No face (inspector/, exporters/) asks which format holds a file: they read the storage contract
(:mod:`codec.storage`: what a file can do, such as ``chunk_bytes``), :mod:`codec.sources` (which chooses
between the formats) and :mod:`codec.edits` (the write operations on either).

Read from the sources with ``ast``: a face names none of ``is_store``, ``is_store_path``, ``is_sqlite_file``,
``StoreFile`` (as a name, an attribute or an imported name) and imports nothing of ``codec.store``. Only a
format's own face may, each for the reason given in :data:`ALLOWED`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from support.paths import ROOT

FACES = ("inspector", "exporters")
KIND_NAMES = frozenset({"is_store", "is_store_path", "is_sqlite_file", "StoreFile"})

ALLOWED = {
    "exporters/migrate/sqlite.py": "writes the sqlite format: its schema, the lock of a live store it must not "
                                   "replace, a target that is some other sqlite file",
    "inspector/tui/model/storedoc.py": "the inspector's document of a store: its rows read and saved as rows "
                                       "(codec.store.read, rowedit, edit), as document.py is a .db's",
}


def kind_branches(path: Path) -> Iterator[str]:
    """Where the module at ``path`` names the storage kind: 'line N: what'."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in KIND_NAMES:
            yield f"line {node.lineno}: {node.id}"
        elif isinstance(node, ast.Attribute) and node.attr in KIND_NAMES:
            yield f"line {node.lineno}: .{node.attr}"
        elif isinstance(node, ast.Constant) and node.value in KIND_NAMES:  # getattr(db, "is_store", ...)
            yield f"line {node.lineno}: {node.value!r}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "codec.store" or alias.name.startswith("codec.store."):
                    yield f"line {node.lineno}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if module == "codec.store" or module.startswith("codec.store."):
                yield f"line {node.lineno}: from {module} import ..."
            elif module == "codec" and any(a.name == "store" for a in node.names):
                yield f"line {node.lineno}: from codec import store"
            for alias in node.names:
                if alias.name in KIND_NAMES:
                    yield f"line {node.lineno}: imports {alias.name}"


def face_branches(root: Path) -> dict[str, list[str]]:
    """Every face module under ``root`` that names the storage kind, with where."""
    out = {}
    for face in FACES:
        for path in sorted((root / face).rglob("*.py")):
            found = sorted(set(kind_branches(path)))
            if found:
                out[path.relative_to(root).as_posix()] = found
    return out


def test_no_face_branches_on_the_storage_kind() -> None:
    found = face_branches(ROOT)
    outside = {p: w for p, w in found.items() if p not in ALLOWED}
    assert not outside, "faces ask the storage contract (codec.storage, codec.sources, codec.edits), not the kind:\n" + \
        "\n".join(f"  {p}: {', '.join(w)}" for p, w in outside.items())


def test_every_allowed_face_still_needs_its_place() -> None:
    """An entry that no longer names the kind goes: the allow-list stays the format's own faces only."""
    found = face_branches(ROOT)
    assert all(p in found for p in ALLOWED), [p for p in ALLOWED if p not in found]


def test_the_scan_sees_each_way_of_asking(tmp_path: Path) -> None:
    face = tmp_path / "exporters"
    face.mkdir()
    lines = ["from codec.sources import is_store", "import codec.store.read", "from codec import store",
             "x = getattr(db, 'is_store', False)", "y = db.is_store", "from codec.store.edit import StoreEdit",
             "z = StoreFile"]
    for k, line in enumerate(lines):
        (face / f"m{k}.py").write_text(line + "\n", encoding="utf-8")
    (face / "clean.py").write_text("from codec.sources import open_any\nok = db.chunk_bytes\n", encoding="utf-8")
    found = face_branches(tmp_path)
    assert sorted(found) == [f"exporters/m{k}.py" for k in range(len(lines))]
