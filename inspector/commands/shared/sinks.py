"""Where ``--to`` sends a db: one table of sinks (scheme -> the command that takes it and its runner).

One spelling for every sink, ``SCHEME:PATH`` or ``SCHEME://ADDRESS``::

    export   parquet:DIR  jsonl:FILE  msgpack:FILE  forward://HOST:PORT
    migrate  sqlite:FILE  mysql://USER:PASS@HOST:PORT/DB  redis://HOST:PORT/N  mysql-sql:FILE  redis-cmds:FILE
    replay   mqtt://[USER[:PASS]@]HOST[:PORT]  mqtts://...

The older spellings stay as aliases: ``--to parquet -o DIR`` (likewise jsonl, msgpack, sqlite) is
``--to parquet:DIR``. A new sink is one :data:`SINKS` row and its runner; the runner's module is
imported only when the sink runs (the database clients, pyarrow... stay off every other start-up).
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass

from inspector.commands import UsageError


@dataclass(frozen=True)
class Sink:
    """One ``--to`` scheme: the command whose options it takes and the function that runs it."""

    scheme: str
    command: str
    form: str  # how the help and the docs spell it
    runner: str  # "module:function", called with the parsed arguments, returns the exit code
    address: bool = False  # SCHEME://ADDRESS (the whole text goes to the runner), else SCHEME:PATH
    output: bool = False  # the PATH is the command's -o (the older spelling: --to SCHEME -o PATH)


EXPORT_FILES = "inspector.commands.export:export_files"
FORWARD = "inspector.commands.shared.forward_export:run_forward_export"
MIGRATE = "inspector.commands.migrate:migrate_to"
REPLAY = "inspector.commands.replay:replay_to"

SINKS = (
    Sink("parquet", "export", "parquet:DIR", EXPORT_FILES, output=True),
    Sink("jsonl", "export", "jsonl:FILE", EXPORT_FILES, output=True),
    Sink("msgpack", "export", "msgpack:FILE", FORWARD, output=True),
    Sink("forward", "export", "forward://HOST:PORT", FORWARD, address=True),
    Sink("sqlite", "migrate", "sqlite:FILE", MIGRATE, output=True),
    Sink("mysql", "migrate", "mysql://USER:PASS@HOST:PORT/DB", MIGRATE, address=True),
    Sink("redis", "migrate", "redis://HOST:PORT/N", MIGRATE, address=True),
    Sink("mysql-sql", "migrate", "mysql-sql:FILE", MIGRATE),
    Sink("redis-cmds", "migrate", "redis-cmds:FILE", MIGRATE),
    Sink("mqtt", "replay", "mqtt://[USER[:PASS]@]HOST[:PORT]", REPLAY, address=True),
    Sink("mqtts", "replay", "mqtts://...", REPLAY, address=True),
)


def forms(command: str) -> str:
    """The ``--to`` spellings of ``command``, for its help: ``parquet:DIR | jsonl:FILE | ...``."""
    return " | ".join(s.form for s in SINKS if s.command == command)


def find(command: str, to: str) -> Sink | None:
    """The sink ``to`` names for ``command`` (None: not one of its sinks; the command says what it takes)."""
    scheme, sep, rest = to.partition(":")
    for sink in SINKS:
        if sink.command != command or sink.scheme != scheme:
            continue
        if sink.address:
            return sink if rest.startswith("//") else None
        if sep or sink.output:  # mysql-sql:FILE; parquet:DIR or the older --to parquet -o DIR
            return sink
    return None


def choose(command: str, args: argparse.Namespace) -> Sink | None:
    """:func:`find` for ``args.to``; ``SCHEME:PATH`` of an output sink becomes the older ``--to SCHEME -o PATH``
    the runners read (so both spellings run the same code and say the same)."""
    sink = find(command, args.to)
    if sink is not None and sink.output and ":" in args.to:
        path = args.to.partition(":")[2]
        if getattr(args, "output", None) not in (None, path):
            raise UsageError(f"--to {args.to} names the output; give it once (not -o {args.output} too)")
        args.to, args.output = sink.scheme, path
    return sink


def run(sink: Sink, args: argparse.Namespace) -> int:
    """Call the sink's runner (its module imported now)."""
    module, _, function = sink.runner.partition(":")
    return int(getattr(importlib.import_module(module), function)(args) or 0)
