"""The topic tree: every node's numbers equal `stats --by topic --depth N` and a record-by-record count,
on every real fixture (.db and 2.1 sqlite stores) and the benchmark file, at every depth the file has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from codec.ops.stats import compute
from codec.ops.tree import Node, TopicTree, build
from codec.sources import open_any

from support.benchfile import big_db
from support.paths import REAL_FILES, ROOT, SQLITE_STORES, V6

FILES = REAL_FILES + SQLITE_STORES


def walk(tree: TopicTree, node: Node) -> list[Node]:
    out = [node]
    for c in tree.children(node, "name"):
        out += walk(tree, c)
    return out


def oracle(path: Path) -> tuple[dict[str, list[int]], dict[str, list[int]], int]:
    """Per topic prefix (every level), from the records one by one: [stores, retained, queued, payload bytes]
    for the subtree and for the topic itself; and the deepest level."""
    with open_any(str(path)) as db:
        recs = list(db.records())
    topic_of: dict[int, str] = {}
    for r in recs:
        if r.kind == "msg_store":
            topic_of.setdefault(r["store_id"], r["topic"])
    total: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    own: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    deepest = 0

    def add(topic: str, col: int, value: int) -> None:
        levels = topic.split("/")
        for d in range(1, len(levels) + 1):
            total["/".join(levels[:d])][col] += value
        own[topic][col] += value

    for r in recs:
        if r.kind == "msg_store":
            add(r["topic"], 0, 1)
            add(r["topic"], 3, len(r["payload"]))
            deepest = max(deepest, len(r["topic"].split("/")))
        elif r.kind in ("retain", "client_msg") and r["store_id"] in topic_of:
            add(topic_of[r["store_id"]], 1 if r.kind == "retain" else 2, 1)
    return total, own, deepest


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_node_is_counted_as_the_records_say(path: Path) -> None:
    total, own, _deepest = oracle(path)
    with open_any(str(path)) as db:
        tree = build(db)
    nodes = walk(tree, tree.root)[1:]
    assert {n.topic for n in nodes} == set(total)
    for n in nodes:
        t, o = n.total, n.own
        assert [t.stores, t.retained, t.queued, t.payload_bytes] == total[n.topic], n.topic
        assert [o.stores, o.retained, o.queued, o.payload_bytes] == own.get(n.topic, [0, 0, 0, 0]), n.topic
        assert n.has_children == any(k.startswith(n.topic + "/") for k in total), n.topic
    root = tree.root.total
    assert root.stores == sum(total[n.topic][0] for n in nodes if n.depth == 1)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_depth_equals_stats_by_topic(path: Path) -> None:
    _total, _own, deepest = oracle(path)
    depths_equal_stats(path, deepest)


def test_every_depth_of_the_big_file_equals_stats_by_topic(tmp_path_factory: pytest.TempPathFactory) -> None:
    depths_equal_stats(big_db(tmp_path_factory))


def depths_equal_stats(path: Path, deepest: int | None = None) -> None:
    """Each node's numbers (below it, and its own topic's) are the rows of `stats --by topic --depth N` at
    every depth of the file (``deepest``: the records' deepest topic; by default the tree's), and one more."""
    with open_any(str(path)) as db:
        tree = build(db)
        nodes = walk(tree, tree.root)[1:]
        if deepest is None:
            deepest = max((n.depth for n in nodes), default=0)
        for depth in range(1, deepest + 2):
            rows = {r["topic"]: r for r in compute(db, top=1 << 30, depth=depth).by_topic}
            want: dict[str, dict[str, int]] = {}
            for n in nodes:
                if n.depth == depth:
                    below = {k: getattr(n.total, k) - getattr(n.own, k) for k in ("stores", "retained", "bytes",
                                                                                 "payload_bytes")}
                    if below["stores"]:
                        want[n.topic + "/#"] = below
                if n.depth <= depth and n.own.stores:
                    want[n.topic] = {k: getattr(n.own, k) for k in ("stores", "retained", "bytes", "payload_bytes")}
            got = {k: {c: r[c] for c in ("stores", "retained", "bytes", "payload_bytes")} for k, r in rows.items()}
            assert got == want, (path.name, depth)


def test_long_and_odd_levels_are_cut_exactly(tmp_path: Path) -> None:
    """Levels past the 16-byte words and the 48-byte window, empty levels, a trailing slash, UTF-8 and
    levels sharing their first 16 bytes are grouped exactly."""
    from codec import Record
    from codec.writer import write_records

    topics = ["a" * 20 + "/x", "a" * 20 + "/y", "a" * 19 + "b/x", "b" * 60 + "/z", "b" * 60, "/lead", "//x",
              "trail/", "ünï/çødé", "ünï/çødé/deeper", "0123456789abcdef/q", "0123456789abcdeg/q", "x"]
    recs = [Record(1, {"last_db_id": len(topics), "shutdown": 1, "dbid_size": 8}, 6)]
    for k, t in enumerate(topics, 1):
        recs.append(Record(2, {"store_id": k, "expiry_time": 0, "source_mid": 0, "source_port": 0, "qos": 0,
                               "retain": 1, "source_id": None, "source_username": None, "topic": t,
                               "payload": b"p" * k, "properties": None}, 6))
        recs.append(Record(4, {"store_id": k}, 6))
    out = tmp_path / "odd.db"
    write_records(out, 6, recs)
    test_every_node_is_counted_as_the_records_say(out)
    test_every_depth_equals_stats_by_topic(out)


@pytest.mark.parametrize("last", ["a/b", "c" * 12 + "/d", "e" * 20 + "/f", "g" * 40 + "/h", "i" * 70, "j/" + "k" * 30])
def test_topics_ending_with_the_file_are_cut_exactly(tmp_path: Path, last: str) -> None:
    """A .db file's topics are read in the map of the file: a stored message at the end of the file with no
    payload and no properties ends with its topic, and levels read 8, 16 or 48 bytes at a time must not run
    past the file's last byte."""
    from codec import Record
    from codec.writer import write_records

    topics = ["a/b", "a/c", "e" * 20 + "/g", last]
    recs = [Record(1, {"last_db_id": len(topics), "shutdown": 1, "dbid_size": 8}, 6)]
    for k in range(1, len(topics) + 1):
        recs.append(Record(4, {"store_id": k}, 6))
    for k, t in enumerate(topics, 1):
        recs.append(Record(2, {"store_id": k, "expiry_time": 0, "source_mid": 0, "source_port": 0, "qos": 0,
                               "retain": 1, "source_id": None, "source_username": None, "topic": t,
                               "payload": b"", "properties": None}, 6))
    out = tmp_path / "end.db"
    write_records(out, 6, recs)
    assert out.read_bytes().endswith(last.encode())
    test_every_node_is_counted_as_the_records_say(out)
    test_every_depth_equals_stats_by_topic(out)


def test_the_second_level_left_to_the_open_when_it_has_too_many_names(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The first two levels are cut as the stores are read, the second only while it has few names: past
    that (here: past one), a first-level node's children are cut when it opens, with the same numbers."""
    from codec.ops import tree

    monkeypatch.setattr(tree._Levels, "MOST", 1)
    test_long_and_odd_levels_are_cut_exactly(tmp_path)
    with open_any(str(V6)) as db:
        built = build(db)
    assert built.second is None
    test_every_node_is_counted_as_the_records_say(V6)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_cli_tree_text_json_prefix_and_sort() -> None:
    r = run("tree", str(V6), "--depth", "2")
    assert r.returncode == 0, r.stderr
    assert "31 stored messages, 10 retained, 30 queued references" in r.stdout
    lines = r.stdout.splitlines()
    assert lines[3].split()[0] == "corp/" and lines[4].split()[0] == "retained/"  # biggest first
    r = run("tree", str(V6), "--json", "--prefix", "corp", "--sort", "name", "--depth", "1")
    data = json.loads(r.stdout)
    names = [c["level"] for c in data["tree"]["children"]]
    assert names == sorted(names) and data["tree"]["stores"] == 31
    assert data["tree"]["bytes"] == sum(c["bytes"] for c in data["tree"]["children"])
    r = run("tree", str(V6), "--prefix", "corp/nothing")
    assert r.returncode == 1 and "no stored message under 'corp/nothing'" in r.stdout
    r = run("tree", str(V6), "--prefix", "corp/+")
    assert r.returncode == 2 and "not a filter" in r.stderr
    r = run("tree", str(ROOT / "no-such.db"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
