"""The command-line campaign's short run (bench/fuzz_cli.py): grammar-made .db files and hostile sqlite
stores through every command, in process; no exception may escape ``inspector.cli.main`` and every
failure must be the one-line error. Fixed seeds and input counts (MOSQDB_FUZZ_CLI_INPUTS for more), no
time limit. The long runs' figures are in docs/reliability.md."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from support.paths import ROOT

if not (ROOT.parent / "shared" / "docs" / "persist-sqlite-schema.sql").is_file():
    pytest.skip("../shared missing", allow_module_level=True)


def _fuzz():
    spec = importlib.util.spec_from_file_location("mosqdb_fuzz_cli", ROOT / "bench" / "fuzz_cli.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("kind", "seed", "inputs"), [("db", 27, 25), ("store", 27, 12)])
def test_short_cli_fuzz_run(tmp_path, kind: str, seed: int, inputs: int) -> None:
    fuzz = _fuzz()
    n = int(os.environ.get("MOSQDB_FUZZ_CLI_INPUTS", inputs))
    res = fuzz.campaign(kind, n, seed, str(tmp_path))
    assert res["inputs"] == n and res["runs"] == n * len(fuzz.COMMANDS)
    details = {k: (h["count"], h["command"], h["detail"][-1200:]) for k, h in res["findings"].items()}
    assert not details, details


def test_grammar_covers_every_chunk_type_and_version() -> None:
    """The .db grammar makes every chunk type of every version 2-6 (framed by the layout tables)."""
    import random
    import struct

    fuzz = _fuzz()
    from codec.layouts import MAGIC, header_size

    seen: set[tuple[int, int]] = set()
    g = fuzz.DbGrammar(random.Random(3))
    for _ in range(400):
        data = g.file()
        assert data.startswith(MAGIC)
        version = struct.unpack_from(">I", data, 19)[0]
        hs = header_size(version)
        at = 23
        while at + hs <= len(data):
            t, n = struct.unpack_from(">II" if hs == 8 else ">HI", data, at)
            seen.add((version, t))
            at += hs + n
    assert {(v, t) for v in range(2, 7) for t in range(1, 7)} <= seen


def test_every_command_is_fuzzed_or_says_why_not() -> None:
    """A new command joins the campaign (bench/fuzz_cli.py COMMANDS) or NOT_FUZZED with the reason."""
    from inspector.cli import command_table

    REGISTERED = command_table()

    fuzz = _fuzz()
    fuzzed = {c[0] for c in fuzz.COMMANDS}
    assert set(REGISTERED) - fuzzed - set(fuzz.NOT_FUZZED) == set()
    assert not fuzzed & set(fuzz.NOT_FUZZED)
