"""Random damage never escapes as anything but a valid file or one clear codec error."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codec.errors import CodecError
from codec.ops.repair import repair

from support.paths import V4, V6
from support.records import errors

DATA = {4: V4.read_bytes(), 6: V6.read_bytes()}


@st.composite
def damaged(draw: st.DrawFn) -> tuple[int, bytes]:
    version = draw(st.sampled_from([4, 6]))
    data = bytearray(DATA[version])
    for _ in range(draw(st.integers(1, 4))):
        what = draw(st.sampled_from(["overwrite", "insert", "delete", "truncate", "zero"]))
        if len(data) < 2:
            break
        at = draw(st.integers(0, len(data) - 1))
        n = draw(st.integers(1, 300))
        if what == "overwrite":
            data[at : at + n] = draw(st.binary(min_size=n, max_size=n))
        elif what == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=n))
        elif what == "delete":
            del data[at : at + n]
        elif what == "zero":
            data[at : at + n] = bytes(len(data[at : at + n]))
        else:
            del data[max(at, 1):]
    return version, bytes(data)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=damaged())
def test_random_damage_gives_a_valid_file_or_a_codec_error(tmp_path: Path, case: tuple[int, bytes]) -> None:
    _version, data = case
    src, out = tmp_path / "in.db", tmp_path / "out.db"
    src.write_bytes(data)
    out.unlink(missing_ok=True)
    try:
        rep = repair(src, out, at=1795301000)
    except CodecError as exc:
        assert "\n" not in str(exc)
        assert not out.exists()
        return
    assert rep.valid and out.exists()
    assert errors(out) == []
    assert src.read_bytes() == data
