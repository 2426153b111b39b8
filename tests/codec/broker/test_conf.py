"""mosquitto.conf reading: the settings, bridges, plugins and include_dir rules of Mosquitto's conf.c."""

from __future__ import annotations

from pathlib import Path

import pytest

from codec.broker.conf import ConfError, read_conf

MAIN = """\
# a comment
persistence true
persistence_location /var/lib/mosquitto
persistent_client_expiration 2d
queue_qos0_messages true
max_queued_messages 200
listener 1883
include_dir conf.d

global_plugin /usr/lib/mosquitto_persist_sqlite.so
plugin_opt_db_file /tmp/x.sqlite3
"""

BRIDGE = """\
connection upstream
address 10.0.0.1:1883
remote_clientid edge-7
cleansession false
topic sensors/# out 1 "" site7/
topic cmd/# in

connection other
addresses a:1 b:2
local_clientid bridge-local
local_cleansession true
"""


def _conf(tmp_path: Path) -> Path:
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "B-bridge.conf").write_text(BRIDGE)
    (tmp_path / "conf.d" / "a.conf").write_text("max_queued_bytes 4096\npersistence_file state.db\n")
    (tmp_path / "conf.d" / "notes.txt").write_text("max_queued_messages 7\n")
    main = tmp_path / "mosquitto.conf"
    main.write_text(MAIN)
    return main


def test_settings_paths_and_includes(tmp_path: Path) -> None:
    conf = read_conf(_conf(tmp_path))
    assert conf.persistence and conf.queue_qos0_messages
    assert conf.persistent_client_expiration == 2 * 86400
    assert (conf.max_queued_messages, conf.max_queued_bytes) == (200, 4096)  # .txt ignored, a.conf read
    assert conf.db_path == Path("/var/lib/mosquitto/state.db")
    # 2.1.2's plugin takes persistence_location/mosquitto.sqlite3 and ignores db_file when it is set
    assert conf.sqlite_path == Path("/var/lib/mosquitto/mosquitto.sqlite3")
    assert [Path(f).name for f in conf.files] == ["mosquitto.conf", "a.conf", "B-bridge.conf"]
    d = conf.find("max_queued_bytes")[0]
    assert Path(d.path).name == "a.conf" and d.line == 1


def test_bridges(tmp_path: Path) -> None:
    conf = read_conf(_conf(tmp_path))
    up, other = conf.bridges
    assert up.name == "upstream" and up.addresses == ["10.0.0.1:1883"]
    assert up.local_id() == "local.edge-7" and not up.local_clean
    assert [(t.pattern, t.direction, t.qos, t.local_prefix, t.remote_prefix) for t in up.topics] == [
        ("sensors/#", "out", 1, "", "site7/"), ("cmd/#", "in", 0, "", "")]
    assert other.addresses == ["a:1", "b:2"] and other.local_id() == "bridge-local" and other.local_clean
    assert other.remote_id("pi") == "pi.other"
    assert conf.bridge_for_session("local.edge-7") is up and conf.bridge_for_session("x") is None


def test_plugin_db_file_without_location(tmp_path: Path) -> None:
    main = tmp_path / "m.conf"
    main.write_text("global_plugin /p/mosquitto_persist_sqlite.so\nplugin_opt_db_file store.sqlite3\n")
    conf = read_conf(main)
    assert not conf.persistence and conf.sqlite_path == tmp_path / "store.sqlite3"
    assert conf.db_path == tmp_path / "mosquitto.db"


@pytest.mark.parametrize(("text", "message"), [
    ("persistence yes\n", "m.conf:1: persistence: expected true or false"),
    ("\n\nmax_queued_messages lots\n", "m.conf:3: max_queued_messages: expected a number"),
    ("persistent_client_expiration 3x\n", "m.conf:1: persistent_client_expiration: not a duration"),
    ("connection a\nconnection a\n", "m.conf:2: duplicate bridge name 'a'"),
    ("connection a\ntopic x sideways\n", "m.conf:2: topic: direction must be in, out or both"),
    ("include_dir nowhere\n", "m.conf:1: include_dir nowhere:"),
])
def test_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    main = tmp_path / "m.conf"
    main.write_text(text)
    with pytest.raises(ConfError) as e:
        read_conf(main)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_include_dir_only_in_main_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.conf").write_text("include_dir .\n")
    main = tmp_path / "m.conf"
    main.write_text(f"include_dir {tmp_path / 'd'}\n")
    with pytest.raises(ConfError, match="x.conf:1: include_dir is only valid in the main"):
        read_conf(main)


def test_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ConfError, match="cannot read the configuration"):
        read_conf(tmp_path / "missing.conf")
    with pytest.raises(ConfError, match="is a directory"):
        read_conf(tmp_path)
