"""The fuzzing campaign's short run (bench/fuzz.py): 3,000 mutated inputs (MOSQDB_FUZZ_INPUTS for more), no
exception outside the codec's error hierarchy, no input under 100 KB over 2 s of CPU. No time cap: on a loaded
machine a capped run would test the neighbours' speed. The long runs' figures are in the README."""

from __future__ import annotations

import importlib.util
import os

import pytest

from support.paths import REAL, ROOT

if not REAL.is_dir():
    pytest.skip("../shared fixtures missing", allow_module_level=True)


def _fuzz():
    spec = importlib.util.spec_from_file_location("mosqdb_fuzz", ROOT / "bench" / "fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_short_fuzz_run(tmp_path):
    fuzz = _fuzz()
    inputs = int(os.environ.get("MOSQDB_FUZZ_INPUTS", "3000"))
    res = fuzz.campaign(inputs, seed=18, findings_dir=str(tmp_path))
    assert res["inputs"] == inputs
    details = {k: (h["count"], h["message"], h.get("traceback", "")[-800:]) for k, h in res["findings"].items()}
    assert not details, details
    assert not res["slow_over_2s"], res["slow_over_2s"]
