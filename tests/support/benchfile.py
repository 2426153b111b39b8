"""The benchmark file: ``$MOSQDB_BIG``, ``../big/big.db`` or ``/tmp/big.db`` when one is there (the 371 MB file
``../shared/tools/make-big-db.sh`` makes), else a small one made by the same generator and a real broker (a little
more than 10,000 chunks), once per test process."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.paths import ROOT, SHARED

_made: dict[str, Path] = {}


def big_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The benchmark file's path (skips the test when there is none and no broker to make one)."""
    for candidate in (os.environ.get("MOSQDB_BIG"), str(ROOT.parent / "big" / "big.db"), "/tmp/big.db"):
        if candidate and os.path.isfile(candidate):
            return Path(candidate)
    if "small" in _made:
        return _made["small"]
    tool = SHARED / "tools" / "make-big-db.sh"
    if not tool.exists() or not (shutil.which("mosquitto") or os.path.exists("/usr/sbin/mosquitto")):
        pytest.skip("no big file and no Mosquitto broker to make one (set MOSQDB_BIG)")
    out = tmp_path_factory.mktemp("big") / "big.db"
    r = subprocess.run(["bash", str(tool), str(out), "8000"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, BIG_CLIENTS="100", BIG_QUEUED="3000"))
    if r.returncode != 0:
        pytest.skip(f"make-big-db.sh could not make a file here: {r.stderr.strip()[-300:]}")
    _made["small"] = out
    return out
