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


def test_inputs_are_made_from_kind_seed_and_index_alone() -> None:
    """Input i is the same whichever run makes it and in whatever order: ranges of several runs add up."""
    fuzz = _fuzz()
    for kind in ("db", "store"):
        a, b = fuzz.Inputs(kind, 5), fuzz.Inputs(kind, 5)
        forward = [a(i) for i in range(6)]
        assert [b(i) for i in reversed(range(6))] == forward[::-1]
        assert fuzz.Inputs(kind, 6)(3) != forward[3]
        assert len(set(forward)) == 6


def test_ranges_of_several_runs_add_up_and_a_resumed_run_does_only_the_rest(tmp_path, capsys) -> None:
    import json

    fuzz = _fuzz()
    found = str(tmp_path / "found")
    assert fuzz.main(["--kind", "db", "--seed", "9", "--start", "0", "--inputs", "3", "--commands", "info",
                      "--findings", found]) == 0
    assert fuzz.main(["--kind", "db", "--seed", "9", "--start", "5", "--inputs", "2", "--commands", "info",
                      "--workers", "2", "--findings", found]) == 0
    capsys.readouterr()
    assert fuzz.main(["--tally", "--findings", found]) == 0
    t = json.loads(capsys.readouterr().out)["db seed 9"]
    assert (t["inputs"], t["covered"], t["foreign"]) == (5, [[0, 3], [5, 7]], 0)
    assert len(t["heads"]) == 1 and t["heads"][0]
    # --resume over 0-8 runs 3, 4 and 7 only; then the tally counts 0-8 once
    assert fuzz.main(["--kind", "db", "--seed", "9", "--start", "0", "--inputs", "8", "--resume", "--commands",
                      "info", "--findings", found]) == 0
    summary = json.loads(capsys.readouterr().out.split("\n}\n")[0] + "\n}")
    assert summary["ranges"] == [[3, 5], [7, 8]] and summary["inputs"] == 3 and summary["head"] == t["heads"][0]
    assert fuzz.main(["--tally", "--findings", found]) == 0
    t = json.loads(capsys.readouterr().out)["db seed 9"]
    assert (t["inputs"], t["covered"]) == (8, [[0, 8]])


def test_a_campaign_leaves_no_temporary_files_and_no_exit_handlers(tmp_path, monkeypatch) -> None:
    """A store read as a .db is written to a temporary directory removed at exit: a campaign empties its
    temporary directory after each input and drops those exit handlers (a million inputs would fill both)."""
    import atexit
    import os
    import tempfile

    fuzz = _fuzz()
    registered, dropped, left = [], [], []
    real_register, real_unregister = atexit.register, atexit.unregister

    def register(func, *args, **kw):  # type: ignore[no-untyped-def]
        registered.append(func)
        if tempfile.tempdir and tempfile.tempdir.startswith(("/dev/shm", tempfile.gettempdir())):
            left.append(sorted(os.listdir(tempfile.tempdir)))
        return real_register(func, *args, **kw)

    def unregister(func):  # type: ignore[no-untyped-def]
        dropped.append(func)
        return real_unregister(func)

    monkeypatch.setattr(atexit, "register", register)
    monkeypatch.setattr(atexit, "unregister", unregister)
    tmp = tempfile.gettempdir()
    res = fuzz.campaign("store", 3, 4, str(tmp_path), commands=(("convert", "--to-version", "5", "-o", "{out}", "{in}"),
                                                                ("diff", "{in}", "{in2}")))
    assert res["inputs"] == 3 and res["runs"] == 6
    assert registered and set(registered) <= set(dropped)
    assert max(len(names) for names in left) <= 3  # an input's own (convert: 1, diff: 2), never the ones before
    assert tempfile.gettempdir() == tmp


def test_split_and_missing_ranges() -> None:
    fuzz = _fuzz()
    assert fuzz.split([(0, 10)], 3) == [[(0, 4)], [(4, 7)], [(7, 10)]]
    assert fuzz.split([(0, 2), (5, 9)], 2) == [[(0, 2), (5, 6)], [(6, 9)]]
    assert fuzz.missing((0, 10), [(2, 4), (3, 6), (8, 20)]) == [(0, 2), (6, 8)]
    assert fuzz.missing((0, 10), []) == [(0, 10)]
    assert fuzz.merge_ranges([[5, 7], [0, 3], [3, 4]]) == [(0, 4), (5, 7)]


def test_a_store_image_made_once_per_input_is_the_one_each_command_would_make(tmp_path) -> None:
    """The campaign makes a store's v6 image once per input: a command then gets a copy, byte for byte what
    its own conversion writes; a conversion that fails fails again for every command."""
    import codec.store.todb as todb

    fuzz = _fuzz()
    made = fuzz.Inputs("store", 2)
    real = todb.sqlite_to_db
    store = tmp_path / "in.sqlite3"
    failed = 0
    for i in range(8):
        store.write_bytes(made(i))
        try:
            real(store, tmp_path / "direct.db")
        except Exception as exc:  # noqa: BLE001 - a store the conversion refuses: refused the same way again
            failed += 1
            with fuzz.converted_once(str(tmp_path / "images")) as forget:
                for _ in range(2):
                    try:
                        todb.sqlite_to_db(store, tmp_path / "again.db")
                    except Exception as again:  # noqa: BLE001
                        assert type(again) is type(exc) and str(again) == str(exc)
                    else:
                        raise AssertionError("converted once refused, then not")
                forget()
            continue
        with fuzz.converted_once(str(tmp_path / "images")) as forget:
            todb.sqlite_to_db(store, tmp_path / "first.db")
            todb.sqlite_to_db(store, tmp_path / "second.db")
            forget()
        direct = (tmp_path / "direct.db").read_bytes()
        assert (tmp_path / "first.db").read_bytes() == direct == (tmp_path / "second.db").read_bytes()
    assert todb.sqlite_to_db is real and failed < 8
