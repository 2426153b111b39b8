"""The format for other tools: a Kaitai Struct spec, an ImHex pattern and the format reference's
field tables, each generated from the layout table (``codec.layouts``), never written by hand.

:mod:`codec.spec.model` turns the table into what every target needs (one body type per group of
versions, sizes and positions as sums of fields); one module per target renders it.
"""

from __future__ import annotations

from codec.spec.imhex import render_imhex
from codec.spec.kaitai import render_kaitai
from codec.spec.markdown import render_field_tables

KAITAI_FILE = "mosquitto_db.ksy"
IMHEX_FILE = "mosquitto_db.hexpat"

__all__ = ["IMHEX_FILE", "KAITAI_FILE", "render_field_tables", "render_imhex", "render_kaitai"]
