"""Helpers for the TUI tests: copies of the real fixtures and a started app."""

from __future__ import annotations

import asyncio
import inspect
import shutil
from pathlib import Path

import pytest

from support.paths import V6


@pytest.fixture
def v6_copy(tmp_path: Path) -> Path:
    out = tmp_path / "mosquitto.db"
    shutil.copyfile(V6, out)
    return out


@pytest.fixture
def damaged_copy(tmp_path: Path) -> Path:
    """2.0.20-a cut in the middle of its 51st chunk's body."""
    from codec import DbFile

    with DbFile(V6) as db:
        cut = db.index.offsets[50] + 12
    out = tmp_path / "damaged.db"
    out.write_bytes(V6.read_bytes()[:cut])
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests here with asyncio.run (no asyncio plugin is installed)."""
    func = pyfuncitem.obj
    if not inspect.iscoroutinefunction(func):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(func(**args))
    return True


@pytest.fixture
def many_chunks(tmp_path: Path) -> Path:
    """2.0.20-a up to its first client_msg, then that chunk 600,000 times more (19 MB): a file the
    checker takes seconds over (so a test can stop it half-way), made in milliseconds."""
    from codec import ChunkType, DbFile

    with DbFile(V6) as db:
        idx = db.index
        first = next(i for i in range(len(idx)) if idx.types[i] == int(ChunkType.CLIENT_MSG))
        head_end = idx.chunk_end(first)
        chunk = db.raw(first)
    out = tmp_path / "many.db"
    out.write_bytes(V6.read_bytes()[:head_end] + chunk * 600_000)
    return out
