"""Each crash class, from a minimal file of a few dozen bytes, ends in one clear line or works.

Every test here failed (a traceback, a wrong exit status or a silent wrong result) before its fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codec import CodecError, DbFile
from codec.engine import Record
from codec.writer import Overlay, save
from inspector.cli import main

from support.crafted import cfg, chunk, client_v6, db, msg_store_v5, retain, sub_v6


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


# ---------------------------------------------------------------- index: a v5 msg_store of length 0
@pytest.mark.parametrize("tail", [b"", cfg(6)], ids=["last", "middle"])
@pytest.mark.parametrize("command", ["info", "check", "stats"])
def test_v5_msg_store_length_zero(tmp_path, capsys, command, tail):
    path = write(tmp_path, "len0.db", db(6, cfg(6), chunk(6, 2, b"", 0), tail))
    code, _out, err = run(capsys, command, path)
    assert code == 1
    assert "Traceback" not in err


def test_v5_length_zero_index_names_the_damage(tmp_path):
    path = write(tmp_path, "len0.db", db(6, cfg(6), chunk(6, 2, b"", 0)))
    with DbFile(path) as f:
        idx = f.index
        assert len(idx) == 1 and idx.error is not None and idx.error.chunk_type == "msg_store"


# ---------------------------------------------------------------- v3/v4: a RETAIN and no MSG_STORE
@pytest.mark.parametrize("version", [3, 4])
def test_retain_without_any_store(tmp_path, capsys, version):
    path = write(tmp_path, "r.db", db(version, cfg(version), retain(version)))
    code, out, _err = run(capsys, "check", path)
    assert code == 1 and "dangling" in out
    code, out, _err = run(capsys, "stats", path)
    assert code == 0 and "retain" in out


# ---------------------------------------------------------------- times outside what datetime shows
@pytest.mark.parametrize("expiry", [2**62, -(2**62), 2**63 - 1])
def test_expiry_outside_the_calendar(tmp_path, capsys, expiry):
    path = write(tmp_path, "e.db", db(6, cfg(6), msg_store_v5(expiry=expiry), retain(6)))
    code, out, _ = run(capsys, "dump", path)
    assert code == 0 and f"Expiry Time: {expiry}" in out
    code, out, _ = run(capsys, "dump", "--json", path)
    assert code == 0
    row = json.loads(out.splitlines()[1])
    assert row["expiry_time"] == expiry
    if expiry > 0:
        assert "outside years 1-9999" in row["expires_at"]
    code, out, err = run(capsys, "check", path)
    assert code == 0, err


def test_renew_report_with_an_out_of_range_expiry(tmp_path, capsys):
    path = write(tmp_path, "e.db", db(6, cfg(6), msg_store_v5(expiry=2**62), retain(6)))
    out_path = str(tmp_path / "out.db")
    code, out, _ = run(capsys, "renew", "--shift", "1d", "-o", out_path, path)
    assert code == 0 and "outside years 1-9999" in out and Path(out_path).exists()


def test_prune_expired_session_outside_the_calendar(tmp_path, capsys):
    path = write(tmp_path, "s.db", db(6, cfg(6), client_v6(session_expiry_time=-(2**62), interval=5)))
    out_path = str(tmp_path / "out.db")
    code, out, err = run(capsys, "prune-sessions", "--expired", "-o", out_path, path)
    assert code == 0, err
    assert "1 sessions" in out


# ---------------------------------------------------------------- appending after the last chunk
def test_save_appends_after_the_last_chunk(tmp_path):
    path = write(tmp_path, "a.db", db(6, cfg(6), msg_store_v5(), retain(6)))
    with DbFile(path) as f:
        n = len(f)
        rec = Record(4, {"store_id": 1}, 6)
        save(f, str(tmp_path / "out.db"), Overlay(inserted={n: [rec]}))
    with DbFile(tmp_path / "out.db") as g:
        assert len(g) == n + 1 and g.chunk(n).record["store_id"] == 1
        assert Path(tmp_path / "out.db").read_bytes()[:-16] == Path(path).read_bytes()


# ---------------------------------------------------------------- columnar on an empty file
def test_iter_columns_on_an_empty_file(tmp_path):
    from codec import columnar

    path = write(tmp_path, "empty.db", b"")
    with DbFile(path) as f:
        assert list(columnar.iter_columns(f, 2)) == []


# ---------------------------------------------------------------- a scan that raised
def test_index_after_a_failed_scan_raises_again(tmp_path, monkeypatch):
    from codec import index as index_mod

    path = write(tmp_path, "a.db", db(6, cfg(6), msg_store_v5(), retain(6)))

    def broken(self, limit):  # an I/O error in the middle of the scan
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(index_mod._Walker, "python_chunks", broken)
    monkeypatch.setattr(index_mod, "_framing", None)
    with DbFile(path) as f:
        for _ in range(2):
            with pytest.raises(OSError):
                len(f.index)
        monkeypatch.undo()
        assert len(f.index) == 3  # scanned again once the error is gone
        with pytest.raises(CodecError):  # and a save never writes an incomplete index
            f._index.complete = False
            save(f, str(tmp_path / "out.db"))


# ---------------------------------------------------------------- check says when it stops listing
def test_check_counts_findings_past_the_limit(tmp_path, capsys):
    from codec.ops.check import LIMIT

    refs = b"".join(retain(6, 1000 + i) for i in range(LIMIT + 5))
    path = write(tmp_path, "many.db", db(6, cfg(6, 5000), refs))
    code, out, _ = run(capsys, "check", path)
    assert code == 1
    assert out.count("[dangling]") == LIMIT + 1
    assert "… and 5 more dangling findings" in out  # main's wording of the cap


# ---------------------------------------------------------------- a file name that looks like markup
def test_info_with_a_markup_file_name(tmp_path, capsys):
    d = tmp_path / "a[" / "x]b"
    d.mkdir(parents=True)
    path = write(d, "evil.db", db(6, cfg(6)))
    assert path.endswith("a[/x]b/evil.db")
    code, out, err = run(capsys, "info", path)
    assert code == 0, err
    assert "a[/x]b/evil.db" in out


# ---------------------------------------------------------------- migrate: a content type that is not UTF-8
def test_migrate_sqlite_with_a_non_utf8_content_type(tmp_path, capsys):
    import sqlite3

    props = b"\x05\x03\x00\x02a\xff"  # content_type "a\xff"
    path = write(tmp_path, "ct.db", db(6, cfg(6, 5), msg_store_v5(1, topic=b"t", payload=b"x", props=props), retain(6)))
    out = str(tmp_path / "ct.sqlite")
    code, stdout, err = run(capsys, "migrate", "--to", "sqlite", "-o", out, path)
    assert code == 0, err
    assert "skipped 1" in stdout
    con = sqlite3.connect(out)
    assert con.execute("select count(*) from base_msgs").fetchone()[0] == 1


# ---------------------------------------------------------------- writing commands never copy damage silently
@pytest.mark.parametrize("argv", [
    ["convert", "--to-version", "6", "-o", "{out}"],
    ["rm-retained", "-o", "{out}", "{file}", "a"],  # a match: a filter matching nothing writes nothing
    ["prune-sessions", "--expired", "-o", "{out}"],
    ["renew", "--sessions", "1d", "-o", "{out}"],
])
def test_writing_commands_refuse_to_copy_damage(tmp_path, capsys, argv):
    # a retain that points at no store: `check` reports an error (the 1.4/1.5 loaders refuse the file)
    path = write(tmp_path, "dangling.db", db(6, cfg(6, 5), msg_store_v5(1, topic=b"a"), retain(6, 1), retain(6, 77),
                                            client_v6(b"c", session_expiry_time=1, interval=5)))
    out = str(tmp_path / "out.db")
    full = [a.replace("{out}", out).replace("{file}", path) for a in argv]
    if "{file}" not in argv:
        full.append(path)
    code, _stdout, err = run(capsys, *full)
    assert code == 1, err
    assert "fail `mosqdb check`" in err and "repair" in err and len(err.strip().splitlines()) == 1
    assert not Path(out).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# ---------------------------------------------------------------- text columns where every value is empty
def test_stats_and_check_with_only_empty_topics_and_client_ids(tmp_path, capsys):
    """Every topic and client id of a batch empty: the byte window is 0 wide and the rows were left without a
    number (ValueError in stats, found by the short fuzz run after the merge of the column-batch stats)."""
    path = write(tmp_path, "empty-texts.db", db(6, cfg(6, 5), msg_store_v5(1, topic=b""), msg_store_v5(2, topic=b""),
                                                retain(6, 1), client_v6(b""), sub_v6(b"", b"")))
    code, out, err = run(capsys, "stats", "--json", path)
    assert code == 0, err
    st = json.loads(out)
    assert [(t["topic"], t["stores"], t["retained"]) for t in st["by_topic"]] == [("", 2, 1)]
    assert [(c["client_id"], c["session"], c["subscriptions"]) for c in st["by_client"]] == [("", True, 1)]
    code, _out, err = run(capsys, "stats", "--by", "client", path)
    assert code == 0 and "Traceback" not in err, err
    code, _out, err = run(capsys, "check", path)
    assert "Traceback" not in err
