"""Hostile inputs end in a result or in one error line naming the file, never in a traceback.

Each case is a real 2.1.2 store (or a tiny .db) with one hostile value, odd schema or torn page,
run in process through the commands that read it: an exception escaping ``inspector.cli.main``
fails the test, as does an exit 1/2 without the ``mosqdb CMD: FILE...`` line.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from support.cli import run_bytes_in_process
from support.paths import SQLITE_STORES

if not SQLITE_STORES:
    pytest.skip("../shared fixtures missing", allow_module_level=True)

STORE = SQLITE_STORES[0]
READERS = (("info",), ("info", "--json"), ("check",), ("check", "--broker", "auto"), ("stats",), ("dump",),
           ("dump", "--json"), ("diff", "OTHER"), ("export", "--to", "jsonl", "-o", "OUT"),
           ("export", "--to", "parquet", "-o", "DIR"), ("convert", "--to-version", "6", "-o", "OUT"),
           ("migrate", "--to", "sqlite", "-o", "OUT"), ("repair", "-o", "OUT"), ("rm-retained", "-o", "OUT", "#"))


def clean(r: subprocess.CompletedProcess, command: str, path: Path, broker: bool = False) -> None:
    """Exit 0, or 1/2 with the one error line (check and diff answer with 1 too; check --broker with 3 when the
    model cannot tell, and says so)."""
    assert r.returncode in (0, 1, 2, 3) if broker else r.returncode in (0, 1, 2), (r.returncode, r.stderr)
    assert r.returncode != 3 or "unknown" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode and command not in ("check", "diff"):
        assert f"mosqdb {command}: {path}" in r.stderr, r.stderr


def run_all(path: Path, tmp: Path, other: Path | None = None) -> dict[str, int]:
    codes = {}
    for cmd in READERS:
        out = tmp / "out.bin"
        args = [{"OTHER": str(other or STORE), "OUT": str(out), "DIR": str(tmp / "dir")}.get(a, a) for a in cmd]
        if cmd[0] == "rm-retained":
            args.insert(1, str(path))
            args = [args[0], args[1], *args[2:]]
        else:
            args.append(str(path))
        try:
            r = run_bytes_in_process(*args)
        except Exception as exc:  # noqa: BLE001 - the failure this test is about
            pytest.fail(f"{' '.join(cmd)}: {type(exc).__name__}: {exc}")
        clean(r, cmd[0], path, broker="--broker" in cmd)
        codes[" ".join(cmd)] = r.returncode
        out.unlink(missing_ok=True)
        shutil.rmtree(tmp / "dir", ignore_errors=True)
    return codes


def store_with(tmp: Path, *statements: str, params: tuple = ()) -> Path:
    p = tmp / "hostile.sqlite3"
    shutil.copyfile(STORE, p)
    p.chmod(0o644)
    con = sqlite3.connect(p)
    for s in statements:
        con.execute(s, params if "?" in s else ())
    con.commit()
    con.close()
    return p


PROPERTIES = {
    "huge-number": "[{\"identifier\":\"message-expiry-interval\",\"value\":1e999}]",
    "bare-huge-number": "1e999",
    "nan": "[{\"identifier\":\"payload-format-indicator\",\"value\":NaN}]",
    "nested": "[" * 3000 + "]" * 3000,
    "lone-surrogate": "[{\"identifier\":\"content-type\",\"value\":\"\\ud800\"}]",
    "lone-surrogate-name": "[{\"identifier\":\"user-property\",\"name\":\"\\udc80\",\"value\":\"v\"}]",
}


@pytest.mark.parametrize("name", sorted(PROPERTIES))
def test_hostile_properties_json(tmp_path: Path, name: str) -> None:
    p = store_with(tmp_path, "UPDATE base_msgs SET properties = ? WHERE rowid = (SELECT min(rowid) FROM base_msgs)",
                   params=(PROPERTIES[name],))
    codes = run_all(p, tmp_path)
    assert codes["dump"] == 0 and codes["info"] == 0, codes
    r = run_bytes_in_process("check", "--json", p)
    assert b'"properties"' in r.stdout, r.stdout[-500:]


VALUES: dict[str, tuple[str, ...]] = {
    "text-payloadlen": ("UPDATE base_msgs SET payloadlen = 'abc' WHERE rowid = (SELECT min(rowid) FROM base_msgs)",),
    "text-store-id": ("UPDATE base_msgs SET store_id = 'x' || store_id WHERE rowid = "
                      "(SELECT min(rowid) FROM base_msgs)",),
    "text-queue-store-id": ("UPDATE client_msgs SET store_id = 'abc' WHERE rowid = (SELECT min(rowid) FROM client_msgs)",),
    "real-store-id": ("UPDATE retains SET store_id = 1e300",),
    "blob-qos": ("UPDATE base_msgs SET qos = x'ff00'",),
    "infinite-schema-version": ("UPDATE version_info SET major = 1e999, minor = 'x', patch = -1e999",),
    "numbers-beyond-the-field": ("UPDATE base_msgs SET qos = -9223372036854775808, source_mid = 70000",
                                 "UPDATE client_msgs SET mid = -1, dup = 4096, state = 300"),
    "long-topic": ("UPDATE base_msgs SET topic = ? WHERE rowid = (SELECT min(rowid) FROM base_msgs)",),
}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_hostile_row_values(tmp_path: Path, name: str) -> None:
    p = store_with(tmp_path, *VALUES[name], params=("t/" * 35_000,))
    run_all(p, tmp_path)


def test_a_topic_no_db_can_hold_names_its_row(tmp_path: Path) -> None:
    p = store_with(tmp_path, VALUES["long-topic"][0], params=("t/" * 35_000,))
    rowid = sqlite3.connect(p).execute("SELECT min(rowid) FROM base_msgs").fetchone()[0]
    for cmd in (("convert", "--to-version", "6"), ("migrate", "--to", "sqlite")):
        r = run_bytes_in_process(*cmd, "-o", tmp_path / "out", p)
        assert r.returncode == 1 and r.stderr.splitlines()[-1] == (
            f"mosqdb {cmd[0]}: {p}: base_msgs[{rowid}].topic: its length 70000 is out of range 0..65535"), r.stderr


SCHEMAS: dict[str, Callable[[sqlite3.Connection], None]] = {
    "without-rowid": lambda con: con.executescript(
        "ALTER TABLE retains RENAME TO old; CREATE TABLE retains (topic STRING PRIMARY KEY, store_id INT64) "
        "WITHOUT ROWID; INSERT INTO retains SELECT * FROM old; DROP TABLE old;"),
    "view": lambda con: con.executescript(
        "ALTER TABLE clients RENAME TO real_clients; CREATE VIEW clients AS SELECT * FROM real_clients;"),
    "missing-column": lambda con: con.executescript("ALTER TABLE base_msgs DROP COLUMN source_port;"),
    "extra-column": lambda con: con.executescript("ALTER TABLE subscriptions ADD COLUMN extra BLOB DEFAULT x'00';"),
    "no-version-table": lambda con: con.executescript("DROP TABLE version_info;"),
    # a damaged schema whose error message quotes bytes that are not UTF-8 (UnicodeDecodeError in sqlite3)
    "schema-name-not-utf8": lambda con: con.executescript(
        "PRAGMA writable_schema=ON; UPDATE sqlite_master SET name = CAST(x'737562738f' AS TEXT) "
        "WHERE name = 'sqlite_autoindex_subscriptions_1';"),
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_odd_schemas(tmp_path: Path, name: str) -> None:
    p = store_with(tmp_path)
    con = sqlite3.connect(p)
    SCHEMAS[name](con)
    con.commit()
    con.close()
    codes = run_all(p, tmp_path)
    if name in ("without-rowid", "view", "missing-column", "schema-name-not-utf8"):  # not what the plugin can read: refused, exit 2
        assert codes["info"] == 2 and codes["dump"] == 2, codes


@pytest.mark.parametrize("page", [2, 3, 5, "last"])
def test_corrupt_page(tmp_path: Path, page: int | str) -> None:
    p = store_with(tmp_path)
    data = bytearray(p.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    n = len(data) // size - 1 if page == "last" else int(page) - 1
    data[n * size:n * size + 40] = b"\x0d\x00\x00\xff\xff" + bytes(35)
    data[n * size + 200:n * size + 400] = b"\xff" * 200
    p.write_bytes(bytes(data))
    run_all(p, tmp_path)
    r = run_bytes_in_process("check", p)
    assert r.returncode in (1, 2), r.stderr


def test_corrupt_page_reads_as_one_line(tmp_path: Path) -> None:
    """sqlite3.DatabaseError from a torn table page: a line naming the store in info, check and stats."""
    p = store_with(tmp_path)
    con = sqlite3.connect(p)
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'base_msgs'").fetchone()[0]
    size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    data = bytearray(p.read_bytes())
    data[(root - 1) * size:(root - 1) * size + 12] = b"\x05\xff\xff\xff\xff\x00\x00\x00\xff\xff\xff\xff"
    p.write_bytes(bytes(data))
    for cmd in ("info", "stats", "dump"):
        r = run_bytes_in_process(cmd, p)
        assert r.returncode in (1, 2) and f"mosqdb {cmd}: {p}" in r.stderr, r.stderr
    run_all(p, tmp_path)


def test_refused_parquet_export_leaves_no_directory(tmp_path: Path) -> None:
    """A damaged input refuses the export: the output directory it created (and its parents) are gone."""
    from support.paths import V6

    cut = tmp_path / "cut.db"
    cut.write_bytes(V6.read_bytes()[:2000])
    out = tmp_path / "new" / "dataset"
    r = run_bytes_in_process("export", "--to", "parquet", "-o", out, cut)
    assert r.returncode in (1, 2) and f"mosqdb export: {cut}" in r.stderr, r.stderr
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    r = run_bytes_in_process("export", "--to", "parquet", "-o", kept, cut)
    assert r.returncode in (1, 2) and kept.is_dir() and not list(kept.iterdir())  # one that was there stays


def test_info_on_an_empty_file(tmp_path: Path) -> None:
    """A 0-byte mosquitto.db is what a broker starts empty from: info answers, no traceback."""
    empty = tmp_path / "mosquitto.db"
    empty.write_bytes(b"")
    for args in (("info",), ("info", "--json")):
        r = run_bytes_in_process(*args, empty)
        assert r.returncode == 0 and not r.stderr, r.stderr


def test_diff_with_a_queued_message_and_no_stored_message(tmp_path: Path) -> None:
    """A client_msg whose store is nowhere (there are no msg_store chunks at all) is a difference, not an IndexError."""
    import struct

    from support import crafted as c

    cid = b"c1"
    body = struct.pack("<Q", 7) + struct.pack(">HH", 1, len(cid)) + bytes((1, 0, 0, 1)) + cid
    lonely = tmp_path / "lonely.db"
    lonely.write_bytes(c.db(6, c.cfg(6), c.client_v6(cid), c.chunk(6, 3, body)))
    plain = tmp_path / "plain.db"
    plain.write_bytes(c.db(6, c.cfg(6), c.client_v6(cid)))
    for a, b in ((lonely, plain), (plain, lonely), (lonely, lonely)):
        for extra in ((), ("--json",)):
            r = run_bytes_in_process("diff", *extra, a, b)
            clean(r, "diff", a)
            assert r.returncode == (0 if a == b else 1), r.stderr


def _db_cases() -> dict[str, bytes]:
    from support import crafted as c

    return {
        # a session expired before year 1: the broker model said when with time.gmtime (OSError)
        "expiry-before-year-1": c.db(6, c.cfg(6), c.client_v6(b"c", session_expiry_time=-7_478_056_966_745_425_530,
                                                                interval=60)),
        "expiry-after-year-9999": c.db(6, c.cfg(6), c.client_v6(b"c", session_expiry_time=1 << 62, interval=60)),
    }


@pytest.mark.parametrize("name", sorted(_db_cases()))
def test_hostile_db_files(tmp_path: Path, name: str) -> None:
    p = tmp_path / "hostile.db"
    p.write_bytes(_db_cases()[name])
    run_all(p, tmp_path, other=p)
    for broker in ("auto", "2.0.18", "1.6.15"):
        r = run_bytes_in_process("check", "--broker", broker, p)
        clean(r, "check", p)


def test_system_failures_end_in_one_line_and_bugs_keep_their_traceback(monkeypatch, tmp_path: Path) -> None:
    """An OSError about a named file or a sqlite error escaping a command: one line, exit 1; a bug is re-raised."""
    import errno


    db = tmp_path / "x.db"
    db.write_bytes(b"")

    def eio(args):
        raise OSError(errno.EIO, "Input/output error", str(db))

    monkeypatch.setattr("inspector.cli.build_parser", _parser_with("info", eio))
    r = run_bytes_in_process("info", db)
    assert (r.returncode, r.stderr) == (1, f"mosqdb info: {db}: input/output error\n")

    def damaged(args):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr("inspector.cli.build_parser", _parser_with("info", damaged))
    r = run_bytes_in_process("info", db)
    assert (r.returncode, r.stderr) == (1, f"mosqdb info: {db}: sqlite: database disk image is malformed\n")

    def bug(args):
        raise ValueError("a bug")

    monkeypatch.setattr("inspector.cli.build_parser", _parser_with("info", bug))
    with pytest.raises(ValueError):
        run_bytes_in_process("info", db)


def _parser_with(command: str, func: Callable) -> Callable:
    from inspector import cli as cli_module

    real = cli_module.build_parser

    def build(*args, **kw):
        parser = real(*args, **kw)
        parser._subparsers._group_actions[0].choices[command].set_defaults(func=func)
        return parser

    return build
