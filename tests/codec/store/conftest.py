"""The store tests' shared fixture: a private copy of the 2.1.2 plugin's store (the original is never edited)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.paths import INCOMING


@pytest.fixture
def store(tmp_path: Path) -> Path:
    d = tmp_path / "s"
    d.mkdir()
    dst = d / "mosquitto.sqlite3"
    shutil.copyfile(INCOMING / "2.1.2-a.sqlite3", dst)
    return dst
