"""No output of a command replaces a file the command reads, whatever its option is called and however the path
is spelled (another path, a hard link, a directory of *.db given as input): ``export a.db --to jsonl -o a.db``
replaced the db with its own export. Only a command's ``--in-place`` changes its input."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from support.cli import run
from support.paths import ROOT, V6

CASES = [
    ("metrics", "{db}", "-o", "{out}"),
    ("export", "{db}", "--to", "jsonl", "-o", "{out}"),
    ("export", "{dir}", "--to", "jsonl", "-o", "{out}"),
    ("export", "{db}", "--to", "msgpack", "-o", "{out}"),
    ("migrate", "{db}", "--to", "mysql-sql:{out}"),
    ("migrate", "{db}", "--to", "redis-cmds:{out}"),
    ("migrate", "{db}", "--to", "sqlite", "-o", "{out}", "--force"),
    ("convert", "{db}", "--to-version", "5", "-o", "{out}", "--force"),
    ("repair", "{db}", "-o", "{out}"),
    ("rm-retained", "{db}", "#", "-o", "{out}"),
    ("renew", "{db}", "--sessions", "1d", "-o", "{out}"),
]


@pytest.mark.parametrize("spelling", ["same", "relative", "hard link"])
@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c[:1] + c[2:4]) for c in CASES])
def test_an_output_never_replaces_an_input(tmp_path: Path, argv: tuple[str, ...], spelling: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "mosquitto.db"
    shutil.copyfile(V6, db)
    out = {"same": str(db), "relative": os.path.relpath(db, ROOT), "hard link": str(data / "link.db")}[spelling]
    if spelling == "hard link":
        os.link(db, out)
    before = db.read_bytes()
    r = run(*[a.replace("{db}", str(db)).replace("{dir}", str(data)).replace("{out}", out) for a in argv])
    assert r.returncode in (1, 2), r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "input" in r.stderr and "nothing written" in r.stderr or "the output is the input" in r.stderr, r.stderr
    assert db.read_bytes() == before
    assert sorted(p.name for p in data.iterdir()) == sorted(["mosquitto.db"] + (["link.db"] if spelling == "hard link"
                                                                                 else []))


def test_in_place_still_changes_the_input(tmp_path: Path) -> None:
    """The one way to change an input: --in-place (a backup kept first)."""
    db = tmp_path / "mosquitto.db"
    shutil.copyfile(V6, db)
    r = run("rm-retained", db, "#", "--in-place")
    assert r.returncode == 0, r.stderr
    assert db.read_bytes() != V6.read_bytes() and (tmp_path / "mosquitto.db.bak").read_bytes() == V6.read_bytes()


def test_the_inputs_are_forgotten_when_the_command_ends(tmp_path: Path) -> None:
    """A program that runs a command in process and then changes its input through the library may do so."""
    from codec import safefile
    from codec.writer import atomic_output
    from inspector.cli import main

    db = tmp_path / "mosquitto.db"
    shutil.copyfile(V6, db)
    assert main(["info", str(db)]) == 0
    with atomic_output(db) as out:
        out.write(V6.read_bytes())
    safefile.reading(db)  # while a command runs: refused
    with pytest.raises(safefile.WriteError, match="is an input of this command"), atomic_output(db) as out:
        out.write(b"")
    safefile.forget_inputs()


def test_a_directory_is_read_for_its_db_files_and_stores(tmp_path: Path) -> None:
    """A directory given as input is read for its db files and its 2.1 sqlite stores (a name with glob characters
    too): both are exported, file by file, and an output naming the store in it is refused as an input."""
    import json

    from support.paths import SQLITE_STORES

    if not SQLITE_STORES:
        pytest.skip("no sqlite store fixture")
    data = tmp_path / "site [7]*"
    data.mkdir()
    db, store = data / "a.db", data / "b.sqlite3"
    shutil.copyfile(V6, db)
    shutil.copyfile(SQLITE_STORES[0], store)
    out = tmp_path / "out.jsonl"
    run("export", data, "--to", "jsonl", "-o", out, "--kind", "msg_store", "-q", ok=True)
    files = [json.loads(line)["file"] for line in out.read_text().splitlines()]
    assert sorted(set(files)) == [str(db), str(store)] and files == sorted(files)
    before = store.read_bytes()
    r = run("export", data, "--to", "jsonl", "-o", store)
    assert r.returncode in (1, 2) and "input" in r.stderr and "nothing written" in r.stderr, r.stderr
    assert store.read_bytes() == before and sorted(p.name for p in data.iterdir()) == ["a.db", "b.sqlite3"]
