"""One vocabulary: --version, python -m mosqdb, the package layout check, clear one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import run, run_in_process
from support.paths import REAL, ROOT

V6 = REAL / "2.0.20-a.db"




def python_m(*args: str, pythonpath: str = "") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (pythonpath, str(ROOT)) if p))
    return subprocess.run([sys.executable, "-m", "mosqdb", *args], capture_output=True, text=True,
                          cwd=pythonpath or ROOT, env=env, timeout=60)


def test_version_and_python_m_mosqdb() -> None:
    from mosqdb import __version__

    r = python_m("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"mosqdb {__version__}"
    r = python_m("info", str(V6), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["version"] == 6


def test_a_shadowing_codec_package_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "codec").mkdir()
    (tmp_path / "codec" / "__init__.py").write_text("")
    r = python_m("--version", pythonpath=str(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "'codec' is loaded from" in r.stderr and "shadows it" in r.stderr and "Traceback" not in r.stderr


def test_a_missing_file_is_no_such_file_not_invalid_choice(tmp_path: Path) -> None:
    r = run_in_process(tmp_path / "missing.db")
    assert r.returncode == 2 and "no such file" in r.stderr and "invalid choice" not in r.stderr
    r = run_in_process("missing.db")
    assert r.returncode == 2 and "missing.db: no such file" in r.stderr


def test_stats_of_an_empty_file_does_not_print_vnone() -> None:
    r = run_in_process("stats", "/dev/null")
    assert r.returncode == 0 and "vNone" not in r.stdout and "empty file" in r.stdout



@pytest.mark.parametrize("command", ["info", "check", "dump", "stats", "tree"])
def test_a_device_with_no_end_is_refused_in_one_line(command: str) -> None:
    """/dev/zero has no size to read by offset (it read as an empty file); /dev/null ends at once and stays one."""
    r = run_in_process(command, "/dev/zero")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "/dev/zero: is a character device, not a regular file" in r.stderr
    assert run_in_process(command, "/dev/null").returncode == 0

@pytest.mark.parametrize("url", ["redis://host:notaport/0", "redis://host:99999/0", "mysql://u:p@host:notaport/db"])
def test_a_bad_port_is_one_clear_line(url: str) -> None:
    r = run_in_process("migrate", V6, "--to", url, "--dry-run")
    assert r.returncode == 2 and "bad port" in r.stderr and r.stderr.count("\n") == 1


def test_removal_wording() -> None:
    """Stores removed with their last reference are not "left unreferenced"."""
    r = run_in_process("rm-retained", V6, "corp/retained/#", "--dry-run")
    assert "stored messages no longer referenced" in r.stdout and "left unreferenced" not in r.stdout


@pytest.mark.parametrize(("argv", "hint"), [
    (["trim-queue", "{db}", "--max", "1", "-o", "{out}"], "--max-bytes"),  # a prefix took --max-bytes: every message
    (["rm-retained", "{db}", "#", "--in", "-o", "{out}"], "--in-place"),
    (["check", "{db}", "--brok", "2.0.22"], "--broker")])
def test_an_option_is_taken_only_as_spelled(tmp_path: Path, argv: list[str], hint: str) -> None:
    """argparse takes a unique prefix for an option: ``trim-queue --max 1`` dropped every queued message as
    ``--max-bytes 1``. An option must be spelled out; the error names the options that begin so."""
    out = tmp_path / "out.db"
    r = run(*[a.replace("{db}", str(V6)).replace("{out}", str(out)) for a in argv])
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "unrecognized arguments" in r.stderr and f"options are spelled out: {hint}?" in r.stderr
    assert not out.exists()


def test_a_missing_module_of_mosqdb_is_a_bug_not_a_missing_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lazy import of mosqdb's own that names nothing (a module moved) is not "install its dependencies"."""
    import inspector.commands.metrics as metrics

    def moved(args: object) -> int:
        import inspector.commands.not_there  # type: ignore[import-not-found]  # noqa: F401

        return 0

    monkeypatch.setattr(metrics, "cmd_metrics", moved)
    r = run_in_process("metrics", V6)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "mosqdb's own module inspector.commands.not_there is missing from this copy (a bug" in r.stderr
    assert "not installed" not in r.stderr


def test_output_cut_short_is_never_success(tmp_path: Path) -> None:
    """``mosqdb check FILE | head``: when the reader goes away the command stops; its exit status is not 0
    (which says "OK" for check, "done" for guard) but 141, as for a program that SIGPIPE ends."""
    from support.cli import MOSQDB, env
    from support.crafted import cfg, db, msg_store_v5, retain

    path = tmp_path / "many.db"
    path.write_bytes(db(6, cfg(6, 5000), *(msg_store_v5(k, topic=b"t/%d" % k, payload=b"x" * 40) for k in
                                             range(1, 3001)), *(retain(6, k) for k in range(1, 3001))))
    p = subprocess.Popen([*MOSQDB, "dump", str(path)], cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline()  # more than a pipe holds is still to come
    p.stdout.close()
    _out, err = p.communicate(timeout=120)
    assert p.returncode == 141, err
    assert b"Traceback" not in err
