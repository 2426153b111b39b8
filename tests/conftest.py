"""Shared test fixtures: paths to ../shared material (tests only; the package never needs it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
REAL = SHARED / "fixtures" / "real"
UNIT = SHARED / "fixtures" / "mosquitto-unit"
REAL_FILES = sorted(REAL.glob("*.db"))
UNIT_FILES = sorted(UNIT.glob("persist_*/*.test-db"))


def manifest(path: Path) -> dict:
    return json.loads(Path(f"{path}.manifest.json").read_text())


def unit_expected() -> dict:
    return json.loads((UNIT / "EXPECTED.json").read_text())["files"]


@pytest.fixture(params=REAL_FILES, ids=lambda p: p.name)
def real_file(request: pytest.FixtureRequest) -> Path:
    return request.param
