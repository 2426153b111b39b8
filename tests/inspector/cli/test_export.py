"""`mosqdb export`: a Parquet dataset and JSON Lines of all four real files, checked against the manifests."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from support.cli import run
from support.paths import REAL_FILES, ROOT, manifest, persisted_options

KINDS = ("cfg", "msg_store", "client_msg", "retain", "sub", "client", "messages")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "ds"
    r = run("export", *map(str, REAL_FILES), "--to", "parquet", "-o", str(out), "--batch-size", "8")
    assert r.returncode == 0, r.stderr
    assert f"exported {len(REAL_FILES)} file(s)" in r.stderr
    return out


def test_dataset_has_a_file_per_kind_with_manifest_counts(dataset: Path) -> None:
    assert sorted(p.name for p in dataset.iterdir()) == sorted(f"{k}.parquet" for k in KINDS)
    mask = os.umask(0)
    os.umask(mask)
    assert {p.stat().st_mode & 0o777 for p in dataset.iterdir()} == {0o666 & ~mask}  # not mkstemp's 0600
    for kind in KINDS:
        table = pq.read_table(dataset / f"{kind}.parquet")
        per_file = Counter(table.column("file").to_pylist())
        for path in REAL_FILES:
            key = "msg_store" if kind == "messages" else kind
            assert per_file[os.path.abspath(path)] == manifest(path)["chunk_counts"][f"DB_CHUNK_{key.upper()}"], kind


def test_retained_payloads_by_join_of_retain_and_msg_store(dataset: Path) -> None:
    stores = pq.read_table(dataset / "msg_store.parquet", columns=["file", "store_id", "topic", "qos", "payload"])
    retain = pq.read_table(dataset / "retain.parquet").select(["file", "store_id"])
    joined = retain.join(stores, keys=["file", "store_id"], join_type="inner")
    for path in REAL_FILES:
        rows = joined.filter(pc.equal(joined.column("file"), os.path.abspath(path))).to_pylist()
        got = {r["topic"]: (hashlib.sha256(r["payload"]).hexdigest(), r["qos"]) for r in rows}
        want = {r["topic"]: (r["payload_sha256"], r["qos"]) for r in manifest(path)["workload"]["retained"]}
        assert got == want, path.name


def test_queued_counts_per_client(dataset: Path) -> None:
    table = pq.read_table(dataset / "client_msg.parquet")
    for path in REAL_FILES:
        rows = table.filter(pc.equal(table.column("file"), os.path.abspath(path)))
        got = Counter(rows.column("client_id").to_pylist())
        want = {c: v["queued_or_inflight_messages"] for c, v in manifest(path)["clients_observed"].items()
                if v["queued_or_inflight_messages"]}
        assert dict(got) == want
        by_state = Counter((r["client_id"], f"qos{r['qos']}/dir{r['direction']}/state{r['state']}")
                           for r in rows.to_pylist())
        want_state = {(c, k): n for c, d in manifest(path)["client_messages_by_qos_direction_state"].items()
                      for k, n in d.items()}
        assert dict(by_state) == want_state


def test_v5_properties_and_subscription_options(dataset: Path) -> None:
    stores = pq.read_table(dataset / "msg_store.parquet").to_pylist()
    subs = pq.read_table(dataset / "sub.parquet").to_pylist()
    for path in REAL_FILES:
        m = manifest(path)
        mine = {r["topic"]: r for r in stores if r["file"] == os.path.abspath(path)}
        for entry in m["workload"]["retained"] + m["workload"]["published_non_retained"]:
            props = entry.get("properties")
            row = mine.get(entry["topic"])
            if row is None:
                continue
            if not props:
                continue
            got = row["properties"] or []
            pairs = [[p["key"], p["value"]] for p in got if p["name"] == "user_property"]
            assert pairs == props.get("UserProperty", [])
            named = {p["name"]: p["value"] for p in got if p["name"] != "user_property"}
            if "ContentType" in props:
                assert named["content_type"] == props["ContentType"]
            if "CorrelationData" in props:
                assert named["correlation_data"] == props["CorrelationData"]
            if "MessageExpiryInterval" in props:
                assert row["expiry_time"] > 0 and row["expiry_ts"] is not None
        if m["db_version"] >= 5:
            v5 = {r["topic"]: r for r in subs if r["file"] == os.path.abspath(path) and r["client_id"] == "a-sub-v5"}
            want = {s["filter"]: s for c in m["workload"]["clients"] for s in c["subscriptions"]
                    if c["client_id"] == "a-sub-v5"}
            assert v5["corp/v5/#"]["identifier"] == 42
            assert v5["corp/v5/#"]["options"] == persisted_options(m, want["corp/v5/#"])
            assert v5["corp/v5/#"]["options"] & 0x0C == 0x04 | 0x08
            assert v5["corp/v5opts/+"]["identifier"] == 7
            assert v5["corp/v5opts/+"]["options"] == persisted_options(m, want["corp/v5opts/+"])
            assert v5["corp/v5opts/+"]["options"] & 0x0C == 0
        else:
            assert {r["options"] for r in subs if r["file"] == os.path.abspath(path)} == {None}


def test_jsonl_equals_dump_json_plus_file(tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"
    r = run("export", *map(str, REAL_FILES), "--to", "jsonl", "-o", str(out))
    assert r.returncode == 0, r.stderr
    lines = out.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    want = []
    for path in REAL_FILES:
        dump = run("dump", "--json", str(path))
        assert dump.returncode == 0
        want += [{"file": os.path.abspath(path), **json.loads(line)} for line in dump.stdout.splitlines()]
    got = [json.loads(line) for line in lines]
    assert len(got) == len(want)
    for mine, theirs in zip(got, want, strict=True):
        # dump may add derived keys (e.g. expiry relative to now); every exported key is dump's
        assert mine == {k: theirs[k] for k in mine}


def test_single_kind_parquet_with_topic_filter(tmp_path: Path) -> None:
    out = tmp_path / "retained.parquet"
    r = run("export", *map(str, REAL_FILES), "--to", "parquet", "--kind", "messages", "--topic",
               "corp/retained/#", "-o", str(out))
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out)
    assert table.num_rows == sum(len(manifest(p)["workload"]["retained"]) - (1 if manifest(p)["db_version"] >= 5
                                                                             else 0) for p in REAL_FILES)
    assert all(t.startswith("corp/retained/") for t in table.column("topic").to_pylist())
    assert all(table.column("retained").to_pylist())


def test_client_selection_in_jsonl(tmp_path: Path) -> None:
    out = tmp_path / "c.jsonl"
    r = run("export", str(REAL_FILES[-1]), "--to", "jsonl", "--client", "a-sub-q2", "-o", str(out))
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = Counter(r["type"] for r in rows)
    assert kinds == {"client": 1, "sub": 3, "client_msg": 6}
    assert {r["client_id"] for r in rows} == {"a-sub-q2"}


def test_errors_are_one_line(tmp_path: Path) -> None:
    r = run("export", str(tmp_path / "missing.db"), "--to", "parquet", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "missing.db: no such file" in r.stderr
    r = run("export", str(REAL_FILES[0]), "--to", "csv", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and "--to csv" in r.stderr
    r = run("export", str(REAL_FILES[0]), "--to", "parquet", "--topic", "a/#/b", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and "not a valid MQTT topic filter" in r.stderr
    # damage: one line naming file, offset and chunk; no output left behind
    cut = tmp_path / "cut.db"
    shutil.copyfile(REAL_FILES[-1], cut)
    with open(cut, "r+b") as fh:
        fh.truncate(4000)
    out = tmp_path / "damaged"
    r = run("export", str(REAL_FILES[0]), str(cut), "--to", "parquet", "-o", str(out))
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1 and str(cut) in r.stderr and "offset" in r.stderr and "[" in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()  # nothing the refused export created is left: no .parquet, not the directory either
    r = run("export", str(REAL_FILES[0]), "--to", "jsonl", "-o", str(tmp_path / "x.jsonl"), "--kind", "nope")
    assert r.returncode == 2 and "unknown kind 'nope'" in r.stderr


def test_forward_targets_are_routed(tmp_path: Path) -> None:
    """--to msgpack goes to the forward-packet exporter (or says it is missing from this build)."""
    out = tmp_path / "f.msgpack"
    r = run("export", str(REAL_FILES[-1]), "--to", "msgpack", "-o", str(out))
    try:
        import inspector.commands.shared.forward_export  # noqa: F401
    except ImportError:
        assert r.returncode == 2 and "forward-packet exporter is not available" in r.stderr
    else:
        assert r.returncode == 0, r.stderr
        assert out.stat().st_size > 0


def test_schema_is_the_same_for_every_version(dataset: Path) -> None:
    table = pq.read_table(dataset / "client.parquet")
    v3 = table.filter(pc.equal(table.column("db_version"), 3)).to_pylist()
    v6 = table.filter(pc.equal(table.column("db_version"), 6)).to_pylist()
    assert all(r["session_expiry_time"] is None and r["disconnect_t"] is not None for r in v3)
    v6_file = next(p for p in REAL_FILES if manifest(p)["db_version"] == 6)
    users = {c["client_id"]: c["username"] for c in manifest(v6_file)["workload"]["clients"]}
    assert {r["client_id"]: r["username"] for r in v6} == users
    assert all(r["disconnect_t"] is None and r["disconnect_ts"] is None for r in v6)
    assert isinstance(table.schema.field("session_expiry_ts").type, pa.TimestampType)


def test_sql_without_pyspark_says_how_to_install() -> None:
    code = ("import sys; sys.modules['pyspark'] = None; from inspector.cli import main; "
            f"sys.exit(main(['sql', 'SELECT 1', {str(REAL_FILES[0])!r}]))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    # the command that works from this checkout: the running Python's pip, the spark extra of this tree
    assert r.stderr.strip() == f"mosqdb sql: PySpark is not installed: {sys.executable} -m pip install -e '{ROOT}[spark]'"


def test_compression_codec_and_level(tmp_path: Path) -> None:
    """The default is zstd (at a fast level); CODEC:LEVEL picks another; a bad one is one line, exit 2,
    and nothing is made."""
    sizes = {}
    for spec in (None, "zstd:9", "gzip:1", "none"):
        out = tmp_path / (spec or "default").replace(":", "-")
        extra = ["--compression", spec] if spec else []
        r = run("export", str(REAL_FILES[-1]), "--to", "parquet", "-o", str(out), "--kind", "msg_store", *extra)
        assert r.returncode == 0, r.stderr
        meta = pq.ParquetFile(out).metadata
        codecs = {meta.row_group(0).column(i).compression for i in range(meta.num_columns)}
        assert codecs == {{None: "ZSTD", "zstd:9": "ZSTD", "gzip:1": "GZIP", "none": "UNCOMPRESSED"}[spec]}
        sizes[spec] = out.stat().st_size
        assert pq.read_table(out).equals(pq.read_table(tmp_path / "default"))
    assert sizes["none"] > sizes[None]
    for bad, says in (("zstd:99", "zstd levels run from"), ("snappy:1", "snappy has no compression level"),
                      ("bz2", "unknown Parquet compression 'bz2'"), ("zstd:x", "not a compression level")):
        out = tmp_path / "bad"
        r = run("export", str(REAL_FILES[-1]), "--to", "parquet", "-o", str(out), "--compression", bad)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and says in r.stderr, (bad, r.stderr)
        assert not out.exists()
