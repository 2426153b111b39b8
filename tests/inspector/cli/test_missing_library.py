"""A declared library missing from the installation: help still works, a command that needs it says so in one line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support.cli import MOSQDB
from support.paths import ROOT, V6


def without(library: str, tmp_path: Path, *args: object) -> subprocess.CompletedProcess[str]:
    """The CLI with ``library`` unimportable (a module of that name first on the path raises as a missing one)."""
    (tmp_path / f"{library}.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{library}'\", name={library!r})\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    return subprocess.run([*MOSQDB, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)


@pytest.mark.parametrize("library", ["numpy", "msgpack", "pyarrow"])
def test_help_lists_the_commands_and_names_what_is_missing(library: str, tmp_path: Path) -> None:
    r = without(library, tmp_path, "--help")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and r.stdout.startswith("usage: mosqdb")


@pytest.mark.parametrize(("library", "command"), [("numpy", ["info", V6]), ("pyarrow", ["export", V6, "--to",
                                                   "jsonl", "-o", "-"]), ("textual", ["inspect", V6])])
def test_a_command_that_needs_it_says_so_in_one_line(library: str, command: list[object], tmp_path: Path) -> None:
    r = without(library, tmp_path, *command)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"mosqdb {command[0]}: needs the library '{library}', which is not installed here "
        "(install mosqdb with its dependencies: pip install mosqdb)"], r.stderr
