"""Progress: every long command shows one Rich bar on a terminal's stderr, none off a terminal or with -q.

The commands run under a pseudo-terminal (os.openpty) as at a terminal; stdout is a pipe and
must be byte-identical with the bar, without a terminal and with -q.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.paths import REAL
from support.terminal import run

V5 = REAL / "1.6.10-a.db"  # db v5
V6 = REAL / "2.0.20-a.db"

BAR = "━".encode()  # Rich's bar glyph
HIDE_CURSOR = b"\x1b[?25l"  # a Live display starting


def commands(tmp: Path) -> dict[str, list[object]]:
    """Every long command, with a result that goes to stdout (or --dry-run) so runs compare byte for byte."""
    return {
        "check": ["check", V6],
        "dump": ["dump", V6, "--json"],
        "stats": ["stats", V6, "--json"],
        "rewrite": ["rewrite", V6, "-o", "-"],
        "convert": ["convert", V5, "--to-version", "6", "-o", "-"],
        "rm-retained": ["rm-retained", V6, "#", "--dry-run", "--json"],
        "drop-client": ["drop-client", V6, "nobody", "--dry-run", "--json"],
        "prune-sessions": ["prune-sessions", V6, "--no-subscriptions", "--dry-run", "--json"],
        "repair": ["repair", V6, "--dry-run", "--json"],
        "renew": ["renew", V6, "--shift", "1d", "--at", "1700000000", "-o", "-"],
        "migrate": ["migrate", V6, "--to", "sqlite", "--dry-run", "--at", "1700000000"],
        "export": ["export", V6, "--to", "jsonl", "-o", "-", "--at", "1700000000"],
        "export-msgpack": ["export", V6, "--to", "msgpack", "-o", "-"],
    }


def _strip_seconds(data: bytes) -> bytes:
    """Reports carry their own run time ("seconds": 0.01, "... in 0.35 s"); everything else must match."""
    import re

    return re.sub(rb' in [0-9.]+ s\b', b" in 0 s", re.sub(rb'"seconds": [0-9.e-]+', b'"seconds": 0', data))


@pytest.mark.parametrize("name", list(commands(Path("/"))))
def test_bar_on_a_terminal_only(name: str, tmp_path: Path) -> None:
    args = commands(tmp_path)[name]
    rc, out, err = run(*args)  # stderr is a terminal
    assert rc == 0, err
    assert HIDE_CURSOR in err and BAR in err, f"no progress bar on the terminal: {err[:300]!r}"
    rc2, out2, err2 = run(*args, tty_stderr=False)  # a pipe: no bar, no escape codes
    assert rc2 == 0, err2
    assert b"\x1b[" not in err2 and BAR not in err2
    rc3, out3, err3 = run(*args, "-q")  # -q on a terminal: no bar either
    assert rc3 == 0, err3
    assert HIDE_CURSOR not in err3 and BAR not in err3
    assert _strip_seconds(out) == _strip_seconds(out2) == _strip_seconds(out3) and out


def test_dump_to_a_terminal_shows_no_bar_over_its_own_output() -> None:
    rc, out, err = run("dump", V6, tty_stdout=True)
    assert rc == 0 and b"DB_CHUNK_CFG" in out and HIDE_CURSOR not in out


def test_export_bar_counts_the_file_once(tmp_path: Path) -> None:
    """The parquet bar says "x/0.1 MB" for a 0.1 MB file, not once per kind (it said 2.2 GB for 0.37 GB)."""
    from codec.progress import EVERY  # noqa: F401 - the codec's progress module exists
    from exporters.files import export_parquet

    calls: list[tuple[str, int, int]] = []
    export_parquet([str(V6)], str(tmp_path / "ds"), progress=lambda p, d, t: calls.append((p, d, t)))
    size = V6.stat().st_size
    assert calls and all(t == size and 0 <= d <= size for _p, d, t in calls)
    assert calls[-1][1] == size
    assert [d for _p, d, _t in calls] == sorted(d for _p, d, _t in calls)


def test_codec_progress_callbacks_reach_the_end() -> None:
    from codec import DbFile
    from codec.ops.check import check_file
    from codec.ops.stats import compute

    with DbFile(V6) as db:
        seen: list[tuple[int, int]] = []
        check_file(db, progress=lambda d, t: seen.append((d, t)))
        assert seen[-1] == (db.size, db.size)
        seen.clear()
        compute(db, progress=lambda d, t: seen.append((d, t)))
        assert seen[-1] == (db.size, db.size) and len(seen) == 5
