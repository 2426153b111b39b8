"""The codec stays light: importing it (its checks, queries, repair, every module) loads no pyarrow, textual or rich.

A fresh interpreter per case, since this one has long imported them. lint-imports ([tool.importlinter])
checks the same statically; this catches what it cannot see (imports done with importlib, or by a library).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.cli import env
from support.paths import ROOT

HEAVY = ("pyarrow", "textual", "rich", "exporters", "inspector")

EVERY_CODEC_MODULE = ("import importlib, pkgutil, codec\n"
                      "for m in pkgutil.walk_packages(codec.__path__, 'codec.'): importlib.import_module(m.name)")


def loaded_after(code: str) -> list[str]:
    """Which of HEAVY are in sys.modules after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))"
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


@pytest.mark.parametrize("code", ["import codec, codec.ops.check, codec.views.query, codec.ops.repair",
                                  EVERY_CODEC_MODULE], ids=["check-query-repair", "every-module"])
def test_codec_loads_no_heavy_or_ui_library(code: str) -> None:
    assert loaded_after(code) == []


def test_the_probe_sees_them() -> None:
    """The probe itself works: importing the exporters does load pyarrow."""
    assert "pyarrow" in loaded_after("import exporters.arrow")
