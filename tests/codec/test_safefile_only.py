"""Every file mosqdb creates or replaces goes through codec/safefile.py.

mosqdb runs as root in directories another user owns; one ``open(name, "w")``, ``shutil.copy``
or ``os.replace`` by path is enough for that user to point root's write at any file on the
system (a symlink planted at the name). This test walks the syntax tree of codec/, exporters/
and inspector/ and fails on any other way to create, replace or re-own a file: open for
writing, ``os.open`` with a write flag, ``tempfile``'s creators, ``shutil`` copies and moves,
``os.replace/rename/link/symlink/mkdir``, ``chmod/chown/utime`` by path, ``Path.write_*``
and friends, writing sqlite connections, Parquet/Arrow writers given a path.

ALLOWED lists the few sites that create nothing beside a user's file, each with why.
PENDING lists sites known to create files another way, each with the reason (empty: every writer
goes through codec.safefile); an entry that no longer matches fails the test, so it cannot go stale.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from support.paths import ROOT

PACKAGES = ("codec", "exporters", "inspector")
SAFEFILE = "codec/safefile.py"

# (file, enclosing function, what) -> why it is not a file beside a user's file
ALLOWED: dict[tuple[str, str, str], str] = {
    ("codec/store/edit.py", "StoreEdit._open_for_writing", "sqlite3.connect"):
        "opens the store's working copy inside safefile.private_dir (journals and -wal land there)",
    ("codec/store/edit.py", "StoreEdit._snapshot", "sqlite3.connect"):
        "the backup API's destination is inside safefile.private_dir",
    ("exporters/migrate/sqlite.py", "_migrate", "sqlite3.connect"):
        "builds the store inside safefile.new_private_dir; safefile.atomic_replace copies it to OUT",
    ("codec/store/salvage.py", "_private_copy", "open-for-writing"):
        "sets the page count in the header of the damaged store's copy inside safefile.private_dir",
    ("codec/store/salvage.py", "_schema_readable", "sqlite3.connect"):
        "opens the damaged store's copy inside safefile.private_dir (its -wal and -shm are there)",
    ("codec/store/salvage.py", "_build", "sqlite3.connect"):
        "builds the salvaged store inside safefile.private_dir; codec.store.connect.put_store copies it to OUT",
    ("exporters/files.py", "_Writers._write_now", "arrow.ParquetWriter"):
        "writes into a safefile.Replacement's file object, not to a path",
    ("exporters/spark/cache.py", "_write", "arrow.ParquetWriter"):
        "writes into a safefile.Replacement's file object in the private cache directory, not to a path",
    ("exporters/spark/cache.py", "entry", "os.utime"):
        "marks an entry in this user's private cache directory (safefile.user_cache_dir) as used, links not followed",
    ("inspector/commands/fleet.py", "write_report", "arrow.write_table"):
        "writes into a safefile.atomic_replace file object, not to a path",
}

# sites known to create files another way (none: every writer goes through codec.safefile)
PENDING: dict[tuple[str, str, str], str] = {}

TEMPFILE = {"mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile",
            "TemporaryDirectory"}
SHUTIL = {"copy", "copy2", "copyfile", "copytree", "move", "copystat", "copymode"}
OS_CALLS = {"replace", "rename", "renames", "link", "symlink", "mkdir", "makedirs", "mkfifo", "mknod",
            "chmod", "chown", "lchown", "utime", "truncate"}
WRITE_FLAGS = {"O_CREAT", "O_WRONLY", "O_RDWR", "O_TRUNC", "O_APPEND"}
PATH_METHODS = {"write_text", "write_bytes", "touch", "symlink_to", "hardlink_to", "link_to", "mkdir"}
ARROW_WRITERS = {"ParquetWriter", "OSFile", "output_stream", "write_csv", "write_feather", "new_file"}


def _name(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, '' otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _name(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def _mode(call: ast.Call, position: int) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == "mode":
            return kw.value
    return call.args[position] if len(call.args) > position else None


def _writes(mode: ast.AST | None) -> bool:
    """A mode that writes (or one we cannot read: assume it may)."""
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(set(mode.value) & set("wax+"))
    return True


def _read_only_sqlite(call: ast.Call) -> bool:
    """``sqlite3.connect`` on ``:memory:`` or a ``file:...?mode=ro`` URI creates no file."""
    if not call.args:
        return False
    text = ast.unparse(call.args[0])
    return ":memory:" in text or ("mode=ro" in text and re.match(r"[fFrRuU]*['\"]+file:", text) is not None)


def violation(call: ast.Call) -> str | None:
    """What ``call`` does to the file system that must go through safefile, or None."""
    func = _name(call.func)
    last = func.rsplit(".", 1)[-1]
    if func in ("open", "io.open") and _writes(_mode(call, 1)):
        return "open-for-writing"
    if func == "os.open" and len(call.args) > 1:
        flags = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "") for n in ast.walk(call.args[1])}
        if flags & WRITE_FLAGS:
            return "os.open-writing"
    if last in TEMPFILE and (func.startswith("tempfile.") or func == last):
        return f"tempfile.{last}"
    if func.startswith("shutil.") and last in SHUTIL:
        return func
    if func.startswith("os.") and func.count(".") == 1 and last in OS_CALLS:
        return func
    if func == "sqlite3.connect" and not _read_only_sqlite(call):
        return "sqlite3.connect"
    if last in ARROW_WRITERS and "." in func:
        return f"arrow.{last}"
    if func.endswith(("pq.write_table", "parquet.write_table")):
        return "arrow.write_table"
    if last == "tofile" or (last == "memmap" and _writes(_mode(call, 2)) and not _is_read(call)):
        return f"numpy.{last}"
    if isinstance(call.func, ast.Attribute) and not func.startswith(("os.", "shutil.", "tempfile.")):
        if last in PATH_METHODS:
            return f"path.{last}"
        if last == "open" and _writes(_mode(call, 0)):
            return "path.open-for-writing"
        if last in ("rename", "replace") and len(call.args) == 1 and not call.keywords:
            return f"path.{last}"
    return None


def _is_read(call: ast.Call) -> bool:
    mode = _mode(call, 2)
    return isinstance(mode, ast.Constant) and mode.value in ("r", "c")


class Finder(ast.NodeVisitor):
    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.scope: list[str] = []
        self.found: list[tuple[str, str, str, int]] = []

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Call(self, node: ast.Call) -> None:
        what = violation(node)
        if what is not None:
            self.found.append((self.rel, ".".join(self.scope) or "<module>", what, node.lineno))
        self.generic_visit(node)


def sites() -> Iterator[tuple[str, str, str, int]]:
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == SAFEFILE:
                continue
            finder = Finder(rel)
            finder.visit(ast.parse(path.read_text(encoding="utf-8"), rel))
            yield from finder.found


def test_files_are_created_only_through_safefile() -> None:
    bad = [f"{f}:{line}: {what} in {scope}" for f, scope, what, line in sites()
           if (f, scope, what) not in ALLOWED and (f, scope, what) not in PENDING]
    assert not bad, ("create, replace or re-own files only through codec/safefile.py (see its docstring):\n"
                     + "\n".join(bad))


def test_the_exception_lists_are_not_stale() -> None:
    """Every ALLOWED/PENDING entry still names a site: a converted module leaves no blanket exemption."""
    found = {(f, scope, what) for f, scope, what, _ in sites()}
    stale = sorted(set(ALLOWED) - found) + sorted(set(PENDING) - found)
    assert not stale, f"entries that match nothing any more (remove them): {stale}"


def test_the_lint_sees_what_it_must() -> None:
    """The detector itself: each of these is a violation, each of the last group is not."""
    bad = ["open(p, 'w')", "open(p, 'ab')", "open(p, mode)", "io.open(p, 'x')", "os.open(p, os.O_WRONLY | os.O_CREAT)",
           "tempfile.mkstemp()", "mkdtemp()", "tempfile.NamedTemporaryFile()", "shutil.copy2(a, b)",
           "shutil.copyfile(a, b)", "os.replace(a, b)", "os.rename(a, b)", "os.link(a, b)", "os.chmod(p, 0o644)",
           "Path(p).write_bytes(b'')", "p.write_text('')", "p.open('w')", "p.replace(q)", "p.rename(q)",
           "sqlite3.connect(p)", "pq.ParquetWriter(p, s)", "pq.write_table(t, p)", "pa.OSFile(p, 'wb')",
           "os.makedirs(d, exist_ok=True)"]
    good = ["open(p)", "open(p, 'rb')", "os.open(p, os.O_RDONLY)", "s.replace('a', 'b')", "d.replace(tzinfo=z)",
            "sqlite3.connect(f'file:{u}?mode=ro', uri=True)", "sqlite3.connect(':memory:')", "os.unlink(p)",
            "writer.write_table(t)", "np.memmap(p, mode='r')", "os.fdopen(fd, 'wb')"]
    for text in bad:
        call = ast.parse(text).body[0].value  # type: ignore[attr-defined]
        assert violation(call) is not None, text
    for text in good:
        call = ast.parse(text).body[0].value  # type: ignore[attr-defined]
        assert violation(call) is None, text


def test_paths_are_where_expected() -> None:
    assert (ROOT / SAFEFILE).is_file()
    assert all(isinstance(k, tuple) and len(k) == 3 for k in {**ALLOWED, **PENDING})
    assert all(Path(ROOT / f).is_file() for f, _, _ in {**ALLOWED, **PENDING})
