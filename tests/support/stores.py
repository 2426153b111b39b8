"""What a Mosquitto 2.1 sqlite store holds, read with plain sqlite3 (not the code under test): tests only."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from urllib.parse import quote


def names(path: Path) -> list[str]:
    """The files beside ``path`` (a store must never gain -wal/-shm or other files from a read)."""
    return sorted(p.name for p in path.parent.iterdir())


def one_line(err: str) -> str:
    """``err`` is exactly one line (the error shape of every command): that line."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def connect(path: Path) -> sqlite3.Connection:
    """Read-only, creating nothing beside the store (immutable: only for stores no one is writing)."""
    con = sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=ro&immutable=1", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "surrogateescape")
    return con


def run_sql(path: Path, *statements: str) -> None:
    """Change the store at ``path`` with ``statements``, committed (a damaged or edited store for a test)."""
    con = sqlite3.connect(path)
    try:
        for stmt in statements:
            con.execute(stmt)
        con.commit()
    finally:
        con.close()


def store_state(path: Path) -> dict:
    """retained {topic: payload}; sessions {client id}; queues {client id: Counter((topic, payload))} of the
    outgoing entries whose message exists (what a reconnecting client is sent)."""
    con = connect(path)
    try:
        retained = {t: bytes(p or b"") for t, p in con.execute(
            "SELECT r.topic, b.payload FROM retains r JOIN base_msgs b ON b.store_id = r.store_id")}
        sessions = {c for (c,) in con.execute("SELECT client_id FROM clients")}
        queues: dict[str, Counter] = {c: Counter() for c in sessions}
        for cid, topic, payload in con.execute(
                "SELECT q.client_id, b.topic, b.payload FROM client_msgs q JOIN base_msgs b ON b.store_id = q.store_id "
                "WHERE q.direction = 1 ORDER BY q.rowid"):
            queues.setdefault(cid, Counter())[(topic, bytes(payload or b""))] += 1
        return {"retained": retained, "sessions": sessions, "queues": queues}
    finally:
        con.close()


ORDER = ("base_msgs", "clients", "client_msgs", "subscriptions", "retains")  # how the inspector numbers rows


def alone_copy(src: Path, tmp_path: Path) -> Path:
    """A copy of the store ``src`` alone in its directory (so any file created beside it is seen)."""
    d = tmp_path / "broker"
    d.mkdir()
    out = d / "mosquitto.sqlite3"
    shutil.copyfile(src, out)
    return out


def rows_in_order(path: Path) -> list[tuple[str, int, dict]]:
    """(table, rowid, row) of every row in the inspector's numbering: tables in ORDER, each by rowid."""
    con = connect(path)
    con.row_factory = lambda cur, row: {d[0]: v for d, v in zip(cur.description, row, strict=True)}
    try:
        return [(t, r["rowid"], r) for t in ORDER
                for r in con.execute(f"SELECT rowid AS rowid, * FROM {t} ORDER BY rowid")]
    finally:
        con.close()


def counts(path: Path) -> dict[str, int]:
    con = connect(path)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("base_msgs", "retains", "clients", "subscriptions", "client_msgs")}
    finally:
        con.close()


def killed_mid_edit(*argv: str) -> subprocess.CompletedProcess:
    """Run ``mosqdb ARGV`` in a child that dies (SIGKILL) right after its first ``DELETE FROM client_msgs``:
    a store edit that must roll back whole."""
    from support.cli import env
    from support.paths import ROOT

    code = textwrap.dedent(f"""
        import os, signal
        from codec.store import edit
        real = edit.StoreEdit.execute
        def execute(self, sql, params=()):
            cur = real(self, sql, params)
            if sql.startswith("DELETE FROM client_msgs"):
                os.kill(os.getpid(), signal.SIGKILL)
            return cur
        edit.StoreEdit.execute = execute
        from inspector.cli import main
        main({list(argv)!r})
    """)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), capture_output=True, text=True,
                          timeout=60)


def row_of(path: Path, table: str, **where: object) -> int:
    """The inspector's number of the first row of ``table`` whose columns have ``where``'s values."""
    return next(i for i, (t, _rowid, r) in enumerate(rows_in_order(path))
                if t == table and all(r[k] == v for k, v in where.items()))


def store_id_of(path: Path, topic: str) -> int:
    """The store id of the retained message on ``topic``."""
    con = connect(path)
    try:
        return con.execute("SELECT store_id FROM retains WHERE topic = ?", (topic,)).fetchone()[0]
    finally:
        con.close()
