"""Shared pytest fixtures. Paths to ../shared live in fixturepaths.py (import them from there)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixturepaths import REAL_FILES


@pytest.fixture(params=REAL_FILES, ids=lambda p: p.name)
def real_file(request: pytest.FixtureRequest) -> Path:
    return request.param
