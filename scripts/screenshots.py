"""Regenerate screenshots/ from the real fixtures: Textual's SVG of each screen, and a PNG of it.

Usage: python scripts/screenshots.py [OUT_DIR] [--no-setup] [--only=NAME,...]   (default: screenshots/)

Set-up (skipped with --no-setup): installs what is missing with apt-get, as scripts/bootstrap.sh does:
Debian's chromium and the fonts fonts-noto-cjk, fonts-noto-color-emoji, fonts-symbola and
fonts-firacode. The PNGs are drawn by headless Chromium, whose font fallback has a glyph for
every character the inspector shows (⌛, CJK topics, emoji); rsvg-convert drew empty boxes and
broken shapes for them. The browser picture is `mosqdb serve` in that Chromium. Fixtures are read
from ../shared/fixtures/real beside the repository; the reference time is fixed, so the pictures
do not age.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from codec import ChunkType, DbFile  # noqa: E402
from inspector.tui.app import InspectorApp  # noqa: E402
from inspector.tui.model.storedoc import open_document  # noqa: E402

REAL = ROOT.parent / "shared" / "fixtures" / "real"
V6 = REAL / "2.0.20-a.db"
AT = 1_795_305_600  # 2026-11-22T00:00:00Z: a fixed reference time, so the pictures do not age
PNG_WIDTH = 1600

APT = {  # package: how to tell it is there
    "chromium": lambda: shutil.which("chromium") is not None,
    "fonts-noto-cjk": lambda: has_font("Noto Sans CJK"),
    "fonts-noto-color-emoji": lambda: has_font("Noto Color Emoji"),
    "fonts-symbola": lambda: has_font("Symbola"),
    "fonts-firacode": lambda: has_font("Fira Code"),  # the SVGs' own font
}


def has_font(family: str) -> bool:
    out = subprocess.run(["fc-list", ":", "family"], capture_output=True, text=True).stdout if shutil.which(
        "fc-list") else ""
    return family.lower() in out.lower()


def setup() -> None:
    """Install the missing Debian packages (apt-get; sudo when not root)."""
    missing = [name for name, present in APT.items() if not present()]
    if not missing:
        return
    print("installing:", " ".join(missing), file=sys.stderr)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["fc-cache", "-f"], check=False, stdout=subprocess.DEVNULL)


# ---------------------------------------------------------------- the TUI screens
async def shoot(path: Path, out: Path, size: tuple[int, int],
                steps: Callable[[InspectorApp, object], Awaitable[None]], *, settle_after: bool = True) -> None:
    app = InspectorApp(open_document(str(path)), detail_delay=0, check_at=AT)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await steps(app, pilot)
        if settle_after:
            await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))
        app.cancel_jobs()
    app.doc.close()


async def settle(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await app.workers.wait_for_complete()
    await pilot.pause()


async def fields_and_hex(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    app.do_goto("#64")  # corp/retained/v5props: MQTT v5 properties
    await settle(app, pilot)
    tree = app.fields
    tree.focus()
    # a property, its bytes lit in the hex view (found by its label: rows above it, a decoded payload's, come and go)
    tree.move_cursor(next(n for n in tree.rows if str(n.label).startswith("content_type")))
    await settle(app, pilot)


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
    await pilot.press("f", *"type:retain corp/retained/", "enter")  # a bare word: topics starting with it
    await settle(app, pilot)
    await pilot.press("down", "down", "down")


async def wide(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("end", *["up"] * 8)


async def editing_bytes(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    app.do_goto("#59")
    await settle(app, pilot)
    await pilot.press("tab", "tab", "i", *["down"] * 5, "3")


async def new_errors(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("A", *"retain", "enter")
    await settle(app, pilot)
    await pilot.press("ctrl+s")


async def check_progress(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The checker on 600,000 chunks, caught part-way (its batches paced, so the picture can be taken)."""
    await pilot.press("c")
    for _ in range(3000):
        job = app.jobs.get("check")
        if job is not None and job.total and 0.3 < job.done / job.total < 0.8:
            break
        await pilot.pause(0.01)
    await pilot.pause(0.05)


async def broker_verdict(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """Mosquitto 2.0.18's verdict in the header, and the check panel graded for it."""
    app.set_broker("2.0.18")
    await settle(app, pilot)
    await pilot.press("c")
    await settle(app, pilot)


async def store_row(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """A 2.1 sqlite store being edited: a stored message deleted (struck through), then a base_msgs row with
    properties whose qos is edited (unsaved), its payload selected in the hex view."""
    app.do_search("corp/retained/q1")
    await settle(app, pilot)
    app.action_delete()
    await settle(app, pilot)
    app.do_search("corp/retained/v5props")
    await settle(app, pilot)
    app.do_edit(app.item, "qos", "2")
    await settle(app, pilot)
    tree = app.fields
    node = next(n for _s, _z, n in tree.nodes_by_span if n.data.name == "payload")
    tree.focus()
    tree.move_cursor(node)


async def sparkplug_payload(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """A Sparkplug B NBIRTH (made by pysparkplug, persisted by Debian's broker) decoded under payload,
    the temperature metric's value selected: its bytes highlighted in the hex view."""
    with DbFile(app.doc.db.path) as db:
        sid = next(c.record["store_id"] for c in db.stream()
                   if c.kind == "msg_store" and c.record["topic"].endswith("/NBIRTH/edge-α"))
    app.do_goto(f"#{sid}")
    await settle(app, pilot)
    tree = app.fields
    metric = next(n for n in tree.rows if "temperature (Double)" in n.label.plain)
    value = next(n for n in metric.children if n.label.plain.startswith("double_value"))
    head = next(n for n in tree.rows if n.label.plain.startswith("decoded sparkplug"))
    tree.focus()
    tree.move_cursor(value)
    await settle(app, pilot)
    tree.scroll_to(y=tree.rows.index(head) - 1, animate=False)  # the rule line, the metrics, the selected value


def sparkplug_db(tmp: Path) -> Path | None:
    """The tests' real Sparkplug traffic (tests/support/payload_traffic.py), or None without a broker
    or pysparkplug."""
    try:
        from support.brokers import have_mosquitto
        from support.payload_traffic import make_payload_db

        return make_payload_db(tmp).db if have_mosquitto() else None
    except ImportError:
        return None


async def topic_tree(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The topic tree (t), two levels open, the cursor on the level that fills the file."""
    await pilot.press("t")
    await settle(app, pilot)
    screen = app.screen
    widget = screen.query_one("#topic-tree")
    node = widget.root.children[0]
    for _level in range(2):
        node.expand()
        screen.fill(node)
        await settle(app, pilot)
        node = node.children[0]
    await settle(app, pilot)
    widget.move_cursor(node)


async def sessions_view(app: InspectorApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The sessions view (s): one row per client, the biggest queue first."""
    await pilot.press("s")
    await settle(app, pilot)
    await pilot.press("down")


def pace_checker() -> None:
    """Slow the checker's child process (a file this size is checked in one) to 0.1 s a batch."""
    os.environ["MOSQDB_TEST_CHECK_PACE"] = "0.1"


def many_chunks(out: Path) -> Path:
    """2.0.20-a up to its first client_msg, then that chunk 600,000 times more (19 MB)."""
    with DbFile(V6) as db:
        idx = db.index
        first = next(i for i in range(len(idx)) if idx.types[i] == int(ChunkType.CLIENT_MSG))
        head_end = idx.chunk_end(first)
        chunk = db.raw(first)
    out.write_bytes(V6.read_bytes()[:head_end] + chunk * 600_000)
    return out


# ---------------------------------------------------------------- the browser
def browser_shot(path: Path, png: Path) -> None:
    """`mosqdb serve` in headless Chromium: the page after a goto, the picture the browser took."""
    from support.brokers import free_port
    from support.browser import Browser

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, "-m", "mosqdb", "serve", str(path), "--port", str(port), "--at",
                               str(AT)], env=env, cwd=ROOT, text=True, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert server.stderr is not None
    line = server.stderr.readline()  # "mosqdb serve: ... at http://HOST:PORT/?token=... (Ctrl+C stops)"
    address = re.search(r"at (http://\S+/\?token=\S+)", line)
    assert address is not None, line

    async def drive() -> None:
        async with Browser(1400, 860) as browser:
            await browser.open(address.group(1))
            await browser.wait_for("corp/retained/plain")
            await browser.press("g")
            await browser.wait_for("Go to")
            await browser.press("#", "5", "9", "enter")
            await browser.wait_for("went to chunk")
            await browser.press("tab")
            await browser.wait_for("FIELDS")
            await asyncio.sleep(0.5)
            await browser.screenshot(png)

    try:
        asyncio.run(drive())
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


# ---------------------------------------------------------------- SVG -> PNG
def to_png(svg: Path) -> Path | None:
    """Draw the SVG with headless Chromium (every glyph has a font there); rsvg-convert if no Chromium."""
    png = svg.with_suffix(".png")
    text = svg.read_text()
    box = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', text)
    exe = shutil.which("chromium")
    if exe is not None and box is not None:
        width, height = PNG_WIDTH, round(PNG_WIDTH * float(box.group(2)) / float(box.group(1)))
        with tempfile.TemporaryDirectory() as tmp:
            # Fira Code's ligatures would draw 0x1f as 0×1f and -> as an arrow: bytes are shown as typed
            plain = Path(tmp) / svg.name
            plain.write_text(text.replace("<style>", '<style>\n    text { font-variant-ligatures: none; '
                                          'font-feature-settings: "calt" 0, "liga" 0; }', 1))
            page = Path(tmp) / "page.html"
            page.write_text(f'<html><body style="margin:0;background:#000">'
                            f'<img src="{plain.as_uri()}" width="{width}" height="{height}"></body></html>')
            subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--force-device-scale-factor=1", "--host-resolver-rules=MAP * ~NOTFOUND",
                            f"--user-data-dir={tmp}/profile", f"--window-size={width},{height}",
                            f"--screenshot={png}", page.as_uri()],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return png
    tool = shutil.which("rsvg-convert")
    if tool is None:
        return None
    # rsvg drops the SVG's non-breaking-space runs unless whitespace is preserved
    with tempfile.NamedTemporaryFile("w", suffix=".svg", delete=False) as tmp_svg:
        tmp_svg.write(text.replace("<svg ", '<svg xml:space="preserve" ', 1))
    subprocess.run([tool, "-w", str(PNG_WIDTH), tmp_svg.name, "-o", str(png)], check=True)
    Path(tmp_svg.name).unlink()
    return png


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--no-setup" not in sys.argv:
        setup()
    only = next((a.split("=", 1)[1].split(",") for a in sys.argv[1:] if a.startswith("--only=")), None)
    wanted = (lambda name: only is None or name in only)  # noqa: E731
    out = Path(args[0]) if args else ROOT / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        broken = Path(tmp) / "damaged-2.0.20-a.db"
        with DbFile(V6) as db:
            cut = db.index.offsets[50] + 12
        broken.write_bytes(V6.read_bytes()[:cut])
        editable = Path(tmp) / "2.0.20-a.db"
        shutil.copyfile(V6, editable)
        private = Path(tmp) / "mosquitto.db"  # mode 0600, as a broker leaves it (no world-readable warning)
        store = Path(tmp) / "mosquitto.sqlite3"
        shutil.copyfile(ROOT.parent / "shared" / "fixtures" / "incoming" / "2.1.2-a.sqlite3", store)
        shutil.copyfile(V6, private)
        private.chmod(0o600)
        many = many_chunks(Path(tmp) / "600k-chunks.db")
        shots = [
            ("fields-and-hex", V6, (120, 36), fields_and_hex),
            ("edit-in-progress", editable, (120, 36), edit_in_progress),
            ("damaged-file", broken, (120, 36), damaged),
            ("filter", V6, (120, 36), filtered),
            ("small-terminal-80x24", V6, (80, 24), fields_and_hex),
            ("wide-200x60", V6, (200, 60), wide),
            ("editing-bytes", V6, (120, 36), editing_bytes),
            ("save-new-errors", editable, (120, 36), new_errors),
            ("broker-verdict", private, (120, 36), broker_verdict),
            ("sqlite-store", store, (120, 36), store_row),
            ("topic-tree", V6, (130, 36), topic_tree),
            ("sessions", V6, (130, 36), sessions_view),
        ]
        if wanted("sparkplug-payload"):
            spb = sparkplug_db(Path(tmp))
            if spb is not None:
                shots.append(("sparkplug-payload", spb, (130, 50), sparkplug_payload))
        for name, path, size, steps in shots:
            if not wanted(name):
                continue
            svg = out / f"{name}.svg"
            asyncio.run(shoot(path, svg, size, steps))
            print(svg, to_png(svg) or "(no chromium or rsvg-convert: SVG only)")
        if wanted("check-progress"):
            pace_checker()
            svg = out / "check-progress.svg"
            asyncio.run(shoot(many, svg, (120, 36), check_progress, settle_after=False))
            print(svg, to_png(svg) or "(SVG only)")
        if shutil.which("chromium") and wanted("browser"):
            browser_shot(editable, out / "browser.png")
            print(out / "browser.png")


if __name__ == "__main__":
    main()
