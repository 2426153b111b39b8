"""Fixtures for every test. Helpers (paths to ../shared, the CLI, brokers, ...) live in tests/support/."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.paths import REAL_FILES

# Under pytest-xdist (`scripts/test` runs `-n auto --dist loadgroup`) the tests of a marker named here run
# on one worker, one after another: their servers (a Spark session or local cluster, MariaDB + Redis) start
# once per module rather than once per worker, and two JVM clusters never compete for the cores and memory.
# Everything else is safe to run anywhere: brokers, receivers and services listen on free ports in temp dirs.
SERIAL_GROUPS = ("spark", "services")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which appends the group to the node id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for name in SERIAL_GROUPS:
            if item.get_closest_marker(name) is not None:
                item.add_marker(pytest.mark.xdist_group(name))
                break


@pytest.fixture(params=REAL_FILES, ids=lambda p: p.name)
def real_file(request: pytest.FixtureRequest) -> Path:
    return request.param
