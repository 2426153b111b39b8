"""Commands run in process (the TUI, a library, the fuzz campaign) close what they open, the temporary v6 image
of a 2.1 store included: an image left open keeps a descriptor (and a deleted file's disk space) per run, until
every open fails with "Too many open files"."""

from __future__ import annotations

import contextlib
import gc
import io
import os
from pathlib import Path

import pytest

from inspector.cli import main

from support.paths import SQLITE_STORES, V6

STORE = next(p for p in SQLITE_STORES if p.name.startswith("2.1.2"))


def open_files() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            name = os.readlink(f"/proc/self/fd/{fd}")
            if name.startswith("/"):
                out.add(f"{fd} {name}")
    return out


@pytest.mark.parametrize("argv", [
    ["stats", "--by", "client", "{store}"],
    ["diff", "{store}", "{db}"],
    ["diff", "--json", "{db}", "{store}"],
    ["info", "--conf", "{conf}", "{store}"],
    ["stats", "--conf", "{conf}", "{store}"],
], ids=lambda a: " ".join(a))
def test_a_store_read_through_its_image_leaves_no_file_open(argv: list[str], tmp_path: Path) -> None:
    conf = tmp_path / "mosquitto.conf"
    conf.write_text("persistence true\nconnection edge\naddress 127.0.0.1:1884\ntopic # both 0\n")
    args = [a.format(store=STORE, db=V6, conf=conf) for a in argv]
    before = open_files()
    for _ in range(3):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                rc = main(args)
            except SystemExit as exc:
                rc = exc.code
        assert rc in (0, 1), err.getvalue()
    gc.collect()
    assert open_files() - before == set()
