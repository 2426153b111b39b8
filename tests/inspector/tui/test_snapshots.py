"""SVG snapshots of the main screens on the real fixtures (fixed terminal sizes, no clock).

Update after a deliberate UI change with: pytest tests/inspector/tui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
from textual.pilot import Pilot

from support.paths import V3, V5, V6
from support.tui import make_app, settle

# the SVGs depend on Textual's rendering; they were made with this version (pinned in pyproject)
SNAPSHOT_TEXTUAL = "8.2.8"
pytestmark = pytest.mark.skipif(version("textual") != SNAPSHOT_TEXTUAL,
                                reason=f"snapshots were made with textual {SNAPSHOT_TEXTUAL}")


async def _ready(pilot: Pilot) -> None:
    await settle(pilot)


def test_main_screen_v6_80x24(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        pilot.app.do_goto("#64")  # corp/retained/v5props: MQTT v5 properties
        await settle(pilot)
        pilot.app.fields.focus()
        await settle(pilot)

    assert snap_compare(make_app(V6), terminal_size=(80, 24), run_before=run_before)


def test_main_screen_v5_properties_wide(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        pilot.app.do_search("corp/retained/v5props")
        await settle(pilot)
        pilot.app.fields.focus()
        await pilot.press("down", "down", "down", "down", "down", "down", "down", "down", "down", "down", "down",
                          "down", "down", "down", "down", "down", "down", "down", "down", "down")
        await settle(pilot)

    assert snap_compare(make_app(V5), terminal_size=(130, 42), run_before=run_before)


def test_v3_client_message(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        pilot.app.apply_filter("type:client_msg")
        await settle(pilot)
        await pilot.press("down", "down")
        await settle(pilot)

    assert snap_compare(make_app(V3), terminal_size=(100, 30), run_before=run_before)


def test_filter_bar(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("f", *"topic:corp/plain/#", "enter")
        await settle(pilot)

    assert snap_compare(make_app(V6), terminal_size=(100, 30), run_before=run_before)


def test_damaged_file(snap_compare, damaged_copy: Path) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)

    assert snap_compare(make_app(damaged_copy), terminal_size=(100, 30), run_before=run_before)


def test_edit_prompt(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        pilot.app.do_goto("#69")
        await settle(pilot)
        tree = pilot.app.fields
        node = next(n for _s, _z, n in tree.nodes_by_span if n.data.name == "payload")
        tree.move_cursor(node)
        tree.focus()
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        # a steady cursor (as stored): on a busy machine the input's 0.5 s blink timer fired before the picture
        pilot.app.screen.query_one("#prompt-input").cursor_blink = False
        await settle(pilot)

    assert snap_compare(make_app(V6), terminal_size=(80, 24), run_before=run_before)


def test_main_screen_200x60_list_focused(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """A wide terminal: the list grows (topics, retain rows with the topic of their store), 16 bytes a row."""
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("end", *["up"] * 6)
        await settle(pilot)

    assert snap_compare(make_app(V6), terminal_size=(200, 60), run_before=run_before)


def test_editing_bytes_80x24(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """Byte-edit mode: the key bar and the mode line say what typing does; a half-typed byte shows."""
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        pilot.app.do_goto("#59")
        await settle(pilot)
        await pilot.press("tab", "tab", "i", "right", "2")
        await settle(pilot)

    assert snap_compare(make_app(V6), terminal_size=(80, 24), run_before=run_before)


def test_save_with_new_errors_asks_200x60(snap_compare, v6_copy: Path) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("A", *"retain", "enter")
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)

    assert snap_compare(make_app(v6_copy), terminal_size=(200, 60), run_before=run_before)


def test_filter_help_80x24(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("f", *"type:retain corp/retained/")
        await settle(pilot)
        pilot.app.query_one("#filter").cursor_blink = False
        await settle(pilot)

    assert snap_compare(make_app(V6), terminal_size=(80, 24), run_before=run_before)


def test_help_screen(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(V6), terminal_size=(80, 24), press=["question_mark"], run_before=_ready)
