"""Driving the app in tests: start it on a file and wait until the index is built."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from textual.pilot import Pilot

from inspector.tui.app import InspectorApp
from inspector.tui.model.storedoc import open_document

from support.clock import AT


def make_app(path: Path | str, *, read_only: bool = False, check_at: float | None = AT,
             detail_delay: float = 0.0) -> InspectorApp:
    """The app on a file (a .db or a 2.1 sqlite store), at a fixed reference time; details follow the cursor at
    once unless asked."""
    return InspectorApp(open_document(str(path), read_only=read_only), check_at=check_at, detail_delay=detail_delay)


async def settle(pilot: Pilot) -> None:
    """Wait for workers (index, filter, search) and the messages they posted."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


@asynccontextmanager
async def running(path: Path | str, *, size: tuple[int, int] = (100, 30), **kw: object) -> AsyncIterator[Pilot]:
    """The app on ``path`` (:func:`make_app`'s options) started at ``size`` with its index built: the set-up of
    almost every TUI test (the app is ``pilot.app``)."""
    app = make_app(path, **kw)  # type: ignore[arg-type]
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        yield pilot


async def until(pilot: Pilot, cond: Callable[[], object], what: str, rounds: int = 3000) -> None:
    """Let the app run until ``cond()`` holds (bounded by rounds of the event loop, not seconds)."""
    for _ in range(rounds):
        if cond():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"never happened: {what}")


async def keys(pilot: Pilot, *names: str) -> None:
    for name in names:
        await pilot.press(name)
        await settle(pilot)


async def type_text(pilot: Pilot, text: str) -> None:
    await pilot.press(*[c if c != " " else "space" for c in text])


def status(app: InspectorApp) -> str:
    return str(app.query_one("#status").render())


def select_value(app, name: str) -> None:  # type: ignore[no-untyped-def]
    """Put the field tree's cursor on the value ``name``."""
    def walk(node):  # type: ignore[no-untyped-def]
        yield node
        for child in node.children:
            yield from walk(child)

    node = next(n for n in walk(app.fields.root) if n.data is not None and getattr(n.data, "name", None) == name)
    app.fields.move_cursor(node)


async def edit_value(pilot: Pilot, item: int, name: str, text: str) -> None:
    """The keys a user presses: go to the row, pick the value in the field tree, e, type, Enter."""
    from inspector.tui.screens.prompt import PromptScreen

    app = pilot.app
    app.jump(item)
    await settle(pilot)
    app.fields.focus()
    select_value(app, name)
    await keys(pilot, "e")
    assert isinstance(app.screen, PromptScreen), status(app)
    await pilot.press("ctrl+u")
    await type_text(pilot, text)
    await keys(pilot, "enter")
