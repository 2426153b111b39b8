"""Untrusted text never reaches the terminal raw: ids, usernames and topics with ESC [2J, OSC 52,
NUL, CR, newlines, C1 controls and bidi overrides are shown escaped in every text output;
JSON keeps the exact values (escaped as \\uXXXX, so it decodes to the same strings)."""

from __future__ import annotations

import json
import re

import pytest

from codec.values import json_text, printable
from inspector.cli import main

from support.crafted import cfg, client_v6, db, msg_store_v5, retain, sub_v6

EVIL = [b"\x1b[2J", b"\x1b]52;c;ZXZpbA==\x07", b"\x00", b"\r", b"\n", "\u202e".encode(), "\u2066".encode(),
        "\u009b".encode(), b"\x7f"]
CID = b"cid" + b"".join(EVIL) + b"\xff"
TOPIC = b"t/" + b"".join(EVIL)
USER = b"user\x00\x1b]52;c;aGk=\x07\nX"
# anything a terminal acts on: C0 but the line breaks and tabs we print ourselves, DEL, C1, bidi
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


@pytest.fixture
def evil_db(tmp_path):
    p = tmp_path / "evil.db"
    p.write_bytes(db(6, cfg(6, 9),
                     msg_store_v5(1, topic=TOPIC, payload=b"\x1b[2Jpay", source_id=CID, username=USER), retain(6, 1),
                     client_v6(CID, USER, session_expiry_time=1_700_000_000, interval=60),
                     sub_v6(CID + b"x", TOPIC)))
    return str(p)


def test_printable_escapes_every_control():
    assert printable("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert printable("\x00\r\n\x7f\x9b\u202e\u2066") == "\\x00\\x0d\\x0a\\x7f\\x9b\\u202e\\u2066"
    assert printable("caf\u00e9 \udcff") == "caf\u00e9 \\xff"  # valid UTF-8 kept, a bad byte shown as \\xff
    assert printable("plain/topic") == "plain/topic"


def test_printable_long_text_escapes_the_same():
    """Long values take a translation table instead of the expression: the same escapes."""
    chars = "a\x00\x1b\x7f\x85\x9f\u061c\u200e\u200f\u202a\u202e\u2066\u2069\ud800\udc80\udcff\udfff\u00e9\u2070 "
    for k in range(len(chars)):
        text = (chars[k:] + chars[:k]) * 5
        assert printable(text) == re.sub(
            "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]",
            lambda m: (f"\\x{ord(m.group()) - 0xDC00:02x}" if 0xDC80 <= ord(m.group()) <= 0xDCFF
                       else f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}"),
            text)


def test_json_text_keeps_values_and_escapes_c1():
    value = {"t": "\x9b\x9d\x1b\u202e\x7f"}
    out = json_text(value)
    assert not UNSAFE.search(out)
    assert json.loads(out) == value
    for ascii_only in ({"t": "\x7f-publisher"}, "\x7f"):  # DEL is ASCII: no shortcut may let it through
        out = json_text(ascii_only)
        assert "\x7f" not in out and json.loads(out) == ascii_only


@pytest.mark.parametrize("argv", [["dump"], ["dump", "--json"], ["check"], ["check", "--json"], ["stats"],
                                  ["stats", "--json"], ["info"], ["info", "--json"], ["stats", "--by", "client"]])
def test_no_control_characters_reach_the_terminal(evil_db, capsys, argv):
    code = main([*argv, evil_db])
    out, err = capsys.readouterr()
    assert code in (0, 1)
    for stream in (out, err):
        bad = UNSAFE.search(stream)
        assert bad is None, (argv, stream[max(bad.start() - 40, 0):bad.end() + 40])
    if argv == ["dump"]:
        assert "\\x1b[2J" in out and "\\x1b]52;c;ZXZpbA==\\x07" in out and "\\u202e" in out
        assert "Client ID: cid\\x1b[2J" in out  # the value stays on its line (no raw newline)
    if argv == ["dump", "--json"]:
        rows = [json.loads(line) for line in out.splitlines()]
        assert any(r.get("topic") == TOPIC.decode() for r in rows)


def test_renew_and_prune_reports(evil_db, capsys, tmp_path):
    for argv in (["renew", "--sessions", "1d", "-o", str(tmp_path / "r.db")],
                 ["prune-sessions", "--idle-since", "2030-01-01", "--dry-run"],
                 ["rm-retained", "--dry-run", "{file}", "#"]):
        main([a.replace("{file}", evil_db) for a in argv] + ([] if "{file}" in argv else [evil_db]))
        out, err = capsys.readouterr()
        for stream in (out, err):
            assert UNSAFE.search(stream) is None, (argv, stream)


WIDE = ["a/日本語の長いトピック名前/x".encode(), "a/e\u0301e\u0301".encode(), b"a/\x1b[31mRED\x1b[0m", b"a/line\nbreak",
        "a/\u202eevil".encode(), b"b/" + b"x" * 60, "b/日本".encode() * 12]


@pytest.mark.parametrize("argv", [["tree", "--depth", "3"], ["stats", "--by", "topic", "--depth", "3"],
                                  ["stats", "--by", "client"]])
def test_text_tables_keep_their_columns(tmp_path, capsys, argv):
    """A table's columns line up on a terminal whatever its topics and ids hold: wide (East Asian) characters
    take two cells, combining marks none, an escaped control its escape's length; a long one is cut with "…"."""
    from codec.values import cells

    path = tmp_path / "wide.db"
    stores = [msg_store_v5(k, topic=t, payload=b"p" * k) for k, t in enumerate(WIDE, 1)]
    path.write_bytes(db(6, cfg(6, 9), *stores, *(retain(6, k) for k in range(1, len(WIDE) + 1)),
                        client_v6("クライアント\x1b[2J".encode()), sub_v6("クライアント\x1b[2J".encode(), b"a/#")))
    assert main([*argv, str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(k for k, line in enumerate(out) if line.startswith(("topic", "client")))
    rows = out[head:next((k for k in range(head, len(out)) if out[k] == "biggest payloads:"), len(out))]
    rows = [r for r in rows if not r.startswith(("1 client ids",))]
    assert len(rows) >= (2 if argv[0] == "stats" and argv[2] == "client" else len(WIDE))
    first = rows[0].rstrip()
    ends = {cells(r.rstrip()) for r in rows}  # the numbers are right-aligned: every row ends where the header does
    assert ends == {cells(first)}, "\n".join(rows)
    assert any("…" in r for r in rows[1:]) or argv[2] == "client"


async def _tui_text(path: str) -> str:
    from inspector.tui.app import InspectorApp
    from inspector.tui.model.document import Document

    app = InspectorApp(Document(path, read_only=True), check_at=1_795_305_600, detail_delay=0.0)
    seen = []
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        for _ in range(len(app.doc.index())):
            for widget in (app.chunks, app.fields):
                for y in range(widget.size.height):
                    seen.append("".join(seg.text for seg in widget.render_line(y)))
            await pilot.press("down")
            await pilot.pause()
        seen.append(str(app.query_one("#status").render()))
        seen.append(app.screen.export_screenshot() if hasattr(app.screen, "export_screenshot") else "")
    return "\n".join(seen)


def test_tui_shows_controls_escaped(evil_db):
    import asyncio

    text = asyncio.run(_tui_text(evil_db))
    bad = UNSAFE.search(text)
    assert bad is None, text[max(bad.start() - 60, 0):bad.end() + 60]
    assert "\\x1b[2J" in text or "\\x1b" in text
