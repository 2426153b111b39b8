"""The format for other tools: a Kaitai Struct spec, an ImHex pattern and the format reference's
field tables, each generated from the layout table (``codec.layouts``), never written by hand.

:mod:`codec.spec.model` turns the table into what every target needs (one body type per group of
versions, sizes and positions as sums of fields); one module per target renders it.
"""

from __future__ import annotations

import os

from codec.spec.imhex import render_imhex
from codec.spec.kaitai import render_kaitai
from codec.spec.markdown import render_field_tables, update_page

KAITAI_FILE = "mosquitto_db.ksy"
IMHEX_FILE = "mosquitto_db.hexpat"
FORMAT_PAGE = os.path.join("docs", "format.md")


def generated_files(root: str) -> dict[str, str]:
    """Every generated file of a checkout at ``root`` (path -> text as the code renders it now): the
    spec and pattern shipped in this package and beside the docs, and the format page's tables.
    scripts/regen-spec.py writes them; a test fails when one differs (they never drift)."""
    ksy, hexpat = render_kaitai(), render_imhex()
    out = {}
    for folder in (os.path.join("codec", "spec"), "docs"):
        out[os.path.join(root, folder, KAITAI_FILE)] = ksy
        out[os.path.join(root, folder, IMHEX_FILE)] = hexpat
    page = os.path.join(root, FORMAT_PAGE)
    with open(page, encoding="utf-8") as f:
        out[page] = update_page(f.read())
    return out


def packaged(name: str) -> str:
    """The text of a generated file as installed with the package (``KAITAI_FILE`` or ``IMHEX_FILE``)."""
    from importlib import resources

    return resources.files("codec.spec").joinpath(name).read_text(encoding="utf-8")


__all__ = ["IMHEX_FILE", "KAITAI_FILE", "generated_files", "packaged", "render_field_tables", "render_imhex",
           "render_kaitai"]
