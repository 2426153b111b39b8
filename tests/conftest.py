"""Fixtures for every test. Helpers (paths to ../shared, the CLI, brokers, ...) live in tests/support/."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.paths import REAL_FILES


@pytest.fixture(params=REAL_FILES, ids=lambda p: p.name)
def real_file(request: pytest.FixtureRequest) -> Path:
    return request.param
