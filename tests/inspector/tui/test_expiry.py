"""Expiry in the TUI: absolute and relative times, expired chunks marked (fixed reference time)."""

from __future__ import annotations

from codec.views.timeview import relative

from support.clock import AT
from support.paths import V6
from support.tui import running, settle


async def test_expired_message_is_marked_with_absolute_and_relative_time() -> None:
    async with running(V6, size=(140, 40)) as pilot:
        app = pilot.app
        app.do_goto("#81")  # corp/v5/a: message expiry 3600 s, expired at 2026-11-21 23:43:27 UTC
        await settle(pilot)
        lines = [str(app.chunks.render_line(y).text) for y in range(app.chunks.size.height)]
        row = next(line for line in lines if "corp/v5/a" in line)
        assert "⌛expired" in row
        assert not any("⌛" in line for line in lines if "corp/v5opts/z" in line)  # never expires
        text = "\n".join(str(app.fields.render_line(y).text) for y in range(app.fields.size.height))
        assert "2026-11-21 23:43:27 UTC" in text
        assert relative(1795304607, AT) in text and relative(1795304607, AT).startswith("expired")
