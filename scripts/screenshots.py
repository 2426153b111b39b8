"""Regenerate screenshots/ (SVG, plus PNG when rsvg-convert is installed) from the real fixtures.

Usage: python scripts/screenshots.py [OUT_DIR]   (default: screenshots/ in the repository)
Fixtures are read from ../shared/fixtures/real beside the repository.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from codec import DbFile  # noqa: E402
from inspector.tui.app import InspectorApp  # noqa: E402
from inspector.tui.document import Document  # noqa: E402

REAL = ROOT.parent / "shared" / "fixtures" / "real"
V6 = REAL / "2.0.20-a.db"


async def shoot(path: Path, out: Path, size: tuple[int, int], steps: Callable[[InspectorApp, object], Awaitable[None]]) -> None:
    app = InspectorApp(Document(str(path)), detail_delay=0, check_at=AT)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await steps(app, pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))
    app.doc.close()


async def settle(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await app.workers.wait_for_complete()
    await pilot.pause()


async def fields_and_hex(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    app.do_goto("#64")  # corp/retained/v5props: MQTT v5 properties
    await settle(app, pilot)
    app.fields.focus()
    await pilot.press(*["down"] * 19)


async def edit_in_progress(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    app.apply_filter("topic:corp/retained/#")
    await settle(app, pilot)
    app.do_goto("#59")  # corp/retained/température/salle-1
    await settle(app, pilot)
    app.do_edit(app.item, "qos", "2")
    await settle(app, pilot)
    tree = app.fields
    node = next(n for _s, _z, n in tree.nodes_by_span if n.data.name == "payload")
    tree.move_cursor(node)
    tree.focus()
    await settle(app, pilot)
    await pilot.press("e", "ctrl+u", *"22.0 C")


async def damaged(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("end")


async def filtered(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("f", *"topic:corp/plain/#", "enter")
    await settle(app, pilot)
    await pilot.press("down", "down", "down")


AT = 1_795_305_600  # 2026-11-22T00:00:00Z: a fixed reference time, so the pictures do not age

def to_png(svg: Path) -> Path | None:
    tool = shutil.which("rsvg-convert")
    if tool is None:
        return None
    # rsvg drops the SVG's non-breaking-space runs unless whitespace is preserved
    text = svg.read_text().replace("<svg ", '<svg xml:space="preserve" ', 1)
    with tempfile.NamedTemporaryFile("w", suffix=".svg", delete=False) as tmp:
        tmp.write(text)
    png = svg.with_suffix(".png")
    subprocess.run([tool, "-w", "1600", tmp.name, "-o", str(png)], check=True)
    Path(tmp.name).unlink()
    return png


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        broken = Path(tmp) / "damaged-2.0.20-a.db"
        with DbFile(V6) as db:
            cut = db.index.offsets[50] + 12
        broken.write_bytes(V6.read_bytes()[:cut])
        editable = Path(tmp) / "2.0.20-a.db"
        shutil.copyfile(V6, editable)
        shots = [
            ("fields-and-hex", V6, (120, 36), fields_and_hex),
            ("edit-in-progress", editable, (120, 36), edit_in_progress),
            ("damaged-file", broken, (120, 36), damaged),
            ("filter", V6, (120, 36), filtered),
            ("small-terminal-80x24", V6, (80, 24), fields_and_hex),
        ]
        for name, path, size, steps in shots:
            svg = out / f"{name}.svg"
            asyncio.run(shoot(path, svg, size, steps))
            png = to_png(svg)
            print(svg, png or "(no rsvg-convert: SVG only)")


if __name__ == "__main__":
    main()
