"""The Spark session the data-source tests share: one local[2] session per test module, stopped after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    import exporters.spark as xs

    session = xs.local_session("local[2]", app="mosqdb-tests")
    yield session
    session.stop()
