"""The generated files (Kaitai spec, ImHex pattern, the format page's tables) are what the code renders
now, ship in the package, and follow the layout table: a field added to a layout appears in every one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from codec import layouts
from codec.layouts import U16, ChunkType
from codec.spec import (
    IMHEX_FILE,
    KAITAI_FILE,
    generated_files,
    packaged,
    render_field_tables,
    render_imhex,
    render_kaitai,
)
from codec.spec.markdown import BEGIN, END, update_page

from support.cli import run, run_in_process
from support.paths import ROOT


def test_generated_files_are_current() -> None:
    """Regenerating from the code gives the committed files (else: python scripts/regen-spec.py)."""
    stale = [str(Path(p).relative_to(ROOT)) for p, text in generated_files(str(ROOT)).items()
             if not Path(p).exists() or Path(p).read_text(encoding="utf-8") != text]
    assert not stale, f"regenerate with `python scripts/regen-spec.py`: {stale}"


def test_regen_check_names_a_stale_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "format.md").write_text(f"# page\n\n{BEGIN}\nold tables\n{END}\n\nafter\n")
    files = generated_files(str(tmp_path))
    page = files[str(docs / "format.md")]
    assert "old tables" not in page and page.endswith("\n\nafter\n") and render_field_tables() in page
    with pytest.raises(ValueError):
        update_page("a page without markers")


def test_package_ships_both() -> None:
    assert packaged(KAITAI_FILE) == render_kaitai()
    assert packaged(IMHEX_FILE) == render_imhex()
    text = (ROOT / "pyproject.toml").read_text()
    assert '"spec/*.ksy"' in text and '"spec/*.hexpat"' in text


def test_cli_writes_what_the_code_renders(tmp_path: Path) -> None:
    assert run_in_process("spec", "--kaitai").stdout == render_kaitai()
    assert run_in_process("spec", "--imhex", "--host-order", "big").stdout == render_imhex("big")
    assert run_in_process("spec", "--markdown").stdout == render_field_tables()
    out = tmp_path / "mosquitto_db.ksy"
    r = run("spec", "--kaitai", "-o", out, ok=True)
    assert out.read_text() == render_kaitai() and str(out) in r.stderr
    r = run("spec")
    assert r.returncode == 2 and "--kaitai" in r.stderr
    r = run("spec", "--imhex", "-o", tmp_path)
    assert r.returncode == 1 and "is a directory" in r.stderr and "Traceback" not in r.stderr


def test_host_order_is_the_only_difference() -> None:
    le, be = render_kaitai(), render_kaitai("big")
    assert "u8le" in le and "u8be" not in le and "u8be" in be and "s8be" in be
    assert render_imhex().count("le u64") == render_imhex("big").count("be u64") > 0


def test_a_field_added_to_a_layout_changes_every_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new u16 in the v5/v6 SUB layout (before its padding) shows up in all three, at its place."""
    before = render_kaitai(), render_imhex(), render_field_tables()
    grown = []
    for layout in layouts.ALL_LAYOUTS:
        if layout.type == ChunkType.SUB and 6 in layout.versions:
            fields = list(layout.fields)
            fields.insert(len(fields) - 3, U16("hop_count"))  # before the pad and the two strings
            layout = replace(layout, fields=tuple(fields))
        grown.append(layout)
    monkeypatch.setattr("codec.spec.model.ALL_LAYOUTS", tuple(grown))
    after = render_kaitai(), render_imhex(), render_field_tables()
    for old, new in zip(before, after):
        assert old != new and "hop_count" in new and "hop_count" not in old
    assert "      - id: hop_count\n        type: u2\n" in after[0]
    assert "    u16 hop_count [[" in after[1]
    assert "| 10 | 2 | BE | `hop_count` |" in after[2]
