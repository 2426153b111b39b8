"""The writing operations' reports share their common fields through one base (codec.ops.report)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from codec.ops.convert import ConvertReport
from codec.ops.repair import RepairReport
from codec.ops.report import WriteReport
from codec.ops.surgery import Removal
from codec.ops.trim import TrimReport

COMMON = {f.name for f in fields(WriteReport)}


@pytest.mark.parametrize("cls", [Removal, TrimReport, RepairReport, ConvertReport])
def test_declared_once_in_the_base(cls: type) -> None:
    assert issubclass(cls, WriteReport)
    assert {"size_before", "size_after", "written", "seconds", "notes"} == COMMON
    assert not COMMON & set(cls.__dict__.get("__annotations__", {}))  # not declared again


def test_own_positional_fields_come_first() -> None:
    assert Removal("rm-retained", size_before=5).size_before == 5
    assert RepairReport("x.db", 6).notes == [] and ConvertReport(5, 6).written is None
