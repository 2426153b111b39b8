"""A power cut that zeroed a real file from the middle of a payload to its end.

The file keeps its size; the chunk the zeros begin in still frames (its header and length reached
the disk), so only its payload is zeros. check names where the run begins, the chunk is damaged
rather than data, repair drops it (also with --recover-retained), and repair says what
--recover-retained would have kept; a real Mosquitto serves what repair says it kept.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from codec import DbFile

from support.brokers import Broker, collect_retained, have_mosquitto, oracle_binary
from support.cli import run, run_in_process
from support.paths import V6
from support.records import errors, records

AT = "2026-11-21T22:43:20Z"


def broker(test):  # type: ignore[no-untyped-def]
    """A test that starts a real Mosquitto (skipped where none is installed)."""
    return pytest.mark.broker(pytest.mark.skipif(not have_mosquitto(), reason="mosquitto broker not installed")(test))


def big_store() -> tuple[int, int, int]:
    """(offset of the chunk, offset of its payload, payload size) of the 100 KiB retained message."""
    with DbFile(V6) as db:
        for c in db.stream():
            if c.kind == "msg_store" and c.record["topic"] == "corp/retained/big":
                c = db.chunk(c.index, spans=True)
                payload = next(sp for sp in c.spans if sp.name == "payload")
                return c.offset, c.body_offset + payload.offset, payload.size
    raise AssertionError("no corp/retained/big in the fixture")


def zeroed(tmp_path: Path) -> tuple[Path, int]:
    """V6 with every byte from the middle of the big payload to the end NUL (same size)."""
    _off, payload, size = big_store()
    start = payload + size // 2 + 3  # not on a sector boundary
    data = bytearray(V6.read_bytes())
    data[start:] = bytes(len(data) - start)
    p = tmp_path / "zeroed.db"
    p.write_bytes(bytes(data))
    return p, start


def test_check_reports_the_run_from_where_it_begins(tmp_path: Path) -> None:
    """Before: only "3,223 NUL bytes from offset 104,399", after the payload; the store was checked as data."""
    p, start = zeroed(tmp_path)
    r = run_in_process("check", p, "--json", "--at", AT)
    assert r.returncode == 1
    found = json.loads(r.stdout)["findings"]
    tail = [f for f in found if f["rule"] == "nul-tail"]
    assert len(tail) == 1 and tail[0]["offset"] == start
    assert f"from offset {start:,}" in tail[0]["message"] and "corp/retained/big" in tail[0]["message"]
    assert "store 63" in tail[0]["message"] and "payload" in tail[0]["message"]
    zero = [f for f in found if f["rule"] == "zeroed"]
    assert len(zero) == 1 and zero[0]["severity"] == "error"
    assert zero[0]["chunk_type"] == "msg_store" and zero[0]["field"] == "payload" and zero[0]["offset"] == start


def test_a_run_that_only_covers_a_small_ids_high_bytes_is_no_damage(tmp_path: Path) -> None:
    """A whole file, then NUL bytes: its last RETAIN's store id ends in zeros, and that is its value."""
    p = tmp_path / "padded.db"
    p.write_bytes(V6.read_bytes() + bytes(5000))
    found = json.loads(run_in_process("check", p, "--json", "--at", AT).stdout)["findings"]
    assert [f["rule"] for f in found if f["severity"] == "error"] == ["nul-tail"]


def test_repair_recover_retained_does_not_restore_the_zeroed_message(tmp_path: Path) -> None:
    """Before: 'corp/retained/big' recreated with 50,013 zeroed bytes, and check said OK."""
    p, start = zeroed(tmp_path)
    out = tmp_path / "out.db"
    r = run_in_process("repair", p, "-o", out, "--recover-retained", "--json", "--at", AT)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    off, _payload, _size = big_store()
    damaged = [d for d in rep["dropped"] if d["offset"] == off]
    assert len(damaged) == 1 and damaged[0]["kind"] == "msg_store"
    assert f"from offset {start:,}" in damaged[0]["reason"] and "NUL" in damaged[0]["reason"]
    assert not any("corp/retained/big" in f for f in rep["fixes"])
    assert "corp/retained/big" not in {r["topic"] for r in records(out) if r.kind == "msg_store"}
    assert all(b"\0" * 64 not in r["payload"] for r in records(out) if r.kind == "msg_store")
    assert errors(out) == []


def test_repair_says_what_recover_retained_would_keep(tmp_path: Path) -> None:
    """Before: every store dropped as "referenced by nothing", not a word about --recover-retained."""
    p, _start = zeroed(tmp_path)
    plain = run_in_process("repair", p, "-o", tmp_path / "plain.db", "--at", AT)
    assert plain.returncode == 0, plain.stderr
    recovering = json.loads(run_in_process("repair", p, "-o", tmp_path / "rec.db", "--recover-retained", "--json",
                                    "--at", AT).stdout)
    n = sum("recreated from store" in f for f in recovering["fixes"])
    assert n == 2  # corp/v5/retained and corp/retained/v5props; the zeroed big one is not among them
    assert f"--recover-retained would keep {n} retained message(s)" in plain.stdout
    rep = json.loads(run_in_process("repair", p, "-o", tmp_path / "plain2.db", "--json", "--at", AT).stdout)
    assert rep["recoverable_retained"] == n
    assert recovering["recoverable_retained"] == 0  # nothing more to recover


def test_repair_of_a_file_cut_mid_chunk_names_the_retained_it_drops(tmp_path: Path) -> None:
    """Cut inside the first session, before any reference: every store is referenced by nothing."""
    with DbFile(V6) as db:
        first_client = next(c for c in db.stream() if c.kind == "client")
    cut = tmp_path / "cut.db"
    cut.write_bytes(V6.read_bytes()[: first_client.offset + 12])
    r = run_in_process("repair", cut, "-o", tmp_path / "out.db", "--json", "--at", AT)
    rep = json.loads(r.stdout)
    assert rep["kept"].get("msg_store", 0) == 0
    assert rep["recoverable_retained"] == 10
    text = run_in_process("repair", cut, "-o", tmp_path / "out2.db", "--at", AT).stdout
    assert "--recover-retained would keep 10 retained message(s)" in text


# ---------------------------------------------------------------- the broker serves what repair says


def said_recreated(report: dict) -> set[str]:
    return {m.group(1) for f in report["fixes"] if (m := re.match(r"retained message for '(.*)' recreated", f))}


def live_now(path: Path, topics: set[str]) -> dict[str, bytes]:
    """The payloads of ``topics`` in ``path`` whose message has not expired by now (the broker drops those)."""
    now = time.time()  # about now: the live broker drops what has expired by its own clock
    out = {}
    with DbFile(path) as db:
        for c in db.stream():
            r = c.record
            exp = r.get("expiry_time") or 0 if r.kind == "msg_store" else 0
            if r.kind == "msg_store" and r["topic"] in topics and not (exp and exp < now + 60):
                out[r["topic"]] = r["payload"]
    return out


@broker
@pytest.mark.parametrize("release", ["2.0.11", "2.0.18"])  # Debian's, and the release the damage was seen with
def test_the_broker_serves_what_repair_recovered_and_not_the_zeroed_message(tmp_path: Path, release: str) -> None:
    binary = oracle_binary(release)
    if binary is None:
        pytest.skip(f"no Mosquitto {release} here")
    damaged, _start = zeroed(tmp_path)
    out = tmp_path / "mosquitto.db"
    r = run("repair", damaged, "-o", out, "--recover-retained", "--json", ok=True)
    report = json.loads(r.stdout)
    recreated = said_recreated(report)
    assert recreated and "corp/retained/big" not in recreated
    with Broker(out, workdir=tmp_path / "b", binary=binary) as b:
        got = {t: m.payload for t, m in collect_retained(b.port).items()}
    assert "corp/retained/big" not in got
    assert got == live_now(out, recreated)
    assert got  # at least one of them is served (corp/v5/retained never expires)

    plain = tmp_path / "plain" / "mosquitto.db"
    plain.parent.mkdir()
    r = run("repair", damaged, "-o", plain, "--json", ok=True)
    said = json.loads(r.stdout)["recoverable_retained"]
    assert said == len(recreated)
    with Broker(plain, workdir=tmp_path / "p", binary=binary) as b:
        assert collect_retained(b.port) == {}  # what the note says is lost without the option


@broker
def test_the_broker_served_the_zeroes_from_the_damaged_file_itself(tmp_path: Path) -> None:
    """Why the chunk is damage: loaded as it is, the broker serves the half-zeroed payload as the message."""
    damaged, start = zeroed(tmp_path)
    with Broker(damaged, workdir=tmp_path / "raw") as b:
        got = collect_retained(b.port, ("corp/retained/big",))
    whole = V6.read_bytes()
    if "corp/retained/big" in got:  # the retains were zeroed too: the broker may serve nothing
        payload = got["corp/retained/big"].payload
        assert payload.endswith(b"\0" * 1000) and payload != whole
    check = run("check", damaged, "--broker", "auto")
    assert check.returncode != 0 and "[zeroed]" in check.stdout and f"{start:,}" in check.stdout


def test_check_warns_of_a_payload_that_ends_in_zeroed_blocks(tmp_path: Path) -> None:
    """What an older repair restored (the zeroed half of the payload, the chunks after it intact):
    before, check said OK without a word."""
    _off, payload, size = big_store()
    data = bytearray(V6.read_bytes())
    start = payload + size // 2 + 3
    data[start:payload + size] = bytes(payload + size - start)
    p = tmp_path / "restored.db"
    p.write_bytes(bytes(data))
    found = json.loads(run_in_process("check", p, "--json", "--at", AT).stdout)["findings"]
    hit = [f for f in found if f["rule"] == "nul-payload"]
    assert len(hit) == 1 and hit[0]["severity"] == "warning" and hit[0]["field"] == "payload"
    assert f"ends in {payload + size - start:,} NUL bytes (from offset {start:,})" in hit[0]["message"]
    clean = json.loads(run_in_process("check", V6, "--json", "--at", AT).stdout)["findings"]
    assert not [f for f in clean if f["rule"] == "nul-payload"]


def test_the_per_record_checker_agrees(tmp_path: Path) -> None:
    """The oracle of tests/codec/ops/test_check.py makes the same findings on the zeroed file."""
    from codec.ops.check import check_file

    from support.check_oracle import check_file as oracle_check

    p, _start = zeroed(tmp_path)
    with DbFile(p) as db:
        old = [f.to_json() for f in oracle_check(db, at=1795392000, cap=None)]
    with DbFile(p) as db:
        new = [f.to_json() for f in check_file(db, at=1795392000, limit=None)]
    assert new == old and any(f["rule"] == "zeroed" for f in new)


def test_a_run_that_begins_in_a_chunk_header(tmp_path: Path) -> None:
    """The length's low byte was the first byte not written: the chunk frames, its body all zeros."""
    import struct

    from support import crafted

    data = crafted.header(6) + crafted.cfg(6, 5) + crafted.msg_store_v5(5, topic=b"a/b", payload=b"x")
    data += crafted.retain(6, 5) + struct.pack(">II", 4, 0x100)[:7] + bytes(600)
    p = tmp_path / "header.db"
    p.write_bytes(data)
    found = json.loads(run_in_process("check", p, "--json", "--at", AT).stdout)["findings"]
    zero = [f for f in found if f["rule"] == "zeroed"]
    assert len(zero) == 1 and zero[0]["chunk_type"] == "retain" and "its chunk header" in zero[0]["message"]
    tail = next(f for f in found if f["rule"] == "nul-tail")
    assert "beginning inside retain[3] (its chunk header)" in tail["message"]
