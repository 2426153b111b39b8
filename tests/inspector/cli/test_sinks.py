"""One ``--to`` syntax for export, migrate and replay (inspector.commands.shared.sinks): ``SCHEME:PATH`` does
what the older ``--to SCHEME -o PATH`` does, byte for byte; every sink's runner exists."""

from __future__ import annotations

import argparse
import hashlib
import importlib
import re
from pathlib import Path

import pytest

from inspector.commands import UsageError
from inspector.commands.shared import sinks

from support.cli import run_bytes_in_process
from support.paths import REAL_FILES

DB = str(REAL_FILES[-1])
AT = "2026-11-22T00:00:00Z"


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_sink_runs_a_function_of_its_command() -> None:
    seen = set()
    for sink in sinks.SINKS:
        assert (sink.command, sink.scheme) not in seen
        seen.add((sink.command, sink.scheme))
        module, _, function = sink.runner.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), sink


@pytest.mark.parametrize(("command", "to", "scheme"), [
    ("export", "parquet:out", "parquet"), ("export", "parquet", "parquet"), ("export", "forward://h:1", "forward"),
    ("export", "forward:h", None), ("export", "sqlite:x", None), ("migrate", "sqlite", "sqlite"),
    ("migrate", "mysql-sql:f.sql", "mysql-sql"), ("migrate", "mysql-sql", None), ("migrate", "redis://h/0", "redis"),
    ("migrate", "parquet:x", None), ("replay", "mqtt://h:1883", "mqtt"), ("replay", "mqtts://h", "mqtts"),
    ("replay", "tcp://h", None),
])
def test_find(command: str, to: str, scheme: str | None) -> None:
    sink = sinks.find(command, to)
    assert (sink.scheme if sink else None) == scheme


def test_a_path_given_twice_must_agree() -> None:
    args = argparse.Namespace(to="jsonl:a.jsonl", output="a.jsonl")
    assert sinks.choose("export", args) is not None and (args.to, args.output) == ("jsonl", "a.jsonl")
    with pytest.raises(UsageError, match="give it once"):
        sinks.choose("export", argparse.Namespace(to="jsonl:a.jsonl", output="b.jsonl"))


@pytest.mark.parametrize("scheme", ["parquet", "msgpack"])
def test_scheme_path_writes_what_the_older_spelling_writes(tmp_path: Path, scheme: str) -> None:
    outs = []
    for name, to in (("old", [scheme, "-o"]), ("new", [])):
        out = tmp_path / name / ("out" if scheme == "parquet" else "out.fwd")
        out.parent.mkdir()
        args = ["--to", *to, str(out)] if to else ["--to", f"{scheme}:{out}"]
        r = run_bytes_in_process("export", DB, *args, "--at", AT, "-q")
        assert r.returncode == 0, r.stderr
        outs.append(digest(out.parent))
    assert outs[0] == outs[1] and outs[0]


def test_jsonl_to_stdout_either_way() -> None:
    old = run_bytes_in_process("export", DB, "--to", "jsonl", "-o", "-", "--at", AT)
    new = run_bytes_in_process("export", DB, "--to", "jsonl:-", "--at", AT)
    assert old.returncode == new.returncode == 0 and old.stdout == new.stdout and old.stdout


def test_migrate_sqlite_path_either_way(tmp_path: Path) -> None:
    outs = []
    for name, args in (("old", ["--to", "sqlite", "-o"]), ("new", None)):
        out = tmp_path / name / "mosquitto.sqlite3"
        out.parent.mkdir()
        argv = [*args, str(out)] if args else ["--to", f"sqlite:{out}"]
        r = run_bytes_in_process("migrate", DB, *argv, "--at", AT, "--dry-run", "--json")
        assert r.returncode == 0, r.stderr
        outs.append(re.sub(rb'"seconds": [0-9.e-]+', b"", r.stdout.replace(str(out).encode(), b"OUT")))
    assert outs[0] == outs[1]
