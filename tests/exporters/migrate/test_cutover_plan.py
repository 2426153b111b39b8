"""The cut-over's configuration rewrite, decided without a broker (exporters.migrate.sqlite_cutover.plan)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters.migrate.sqlite_cutover import CutoverError, plan, running_broker


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    p = tmp_path / "lib" / "mosquitto_persist_sqlite.so"
    p.parent.mkdir()
    p.write_bytes(b"\x7fELF")
    return p


def test_persistence_in_an_include_file_with_a_location(tmp_path: Path, plugin: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    inc = tmp_path / "conf.d" / "p.conf"
    inc.write_text("# persistence\npersistence true\r\nautosave_interval 10\n")
    main = tmp_path / "mosquitto.conf"
    main.write_text(f"persistence_location {tmp_path}/data/\ninclude_dir conf.d\nlistener 1883")  # no final newline
    cut = plan(main, str(plugin), None)
    assert cut.store == tmp_path / "data" / "mosquitto.sqlite3"
    assert list(cut.texts) == [str(main), str(inc)]
    new_inc = cut.texts[str(inc)][1]
    assert new_inc.splitlines()[1].startswith("# persistence true") and new_inc.splitlines()[2] == "autosave_interval 10"
    new_main = cut.texts[str(main)][1]
    assert new_main.startswith(main.read_text() + "\n")  # the old text, a newline added, then the plugin lines
    assert f"global_plugin {plugin}" in new_main and "plugin_opt_db_file" not in new_main
    assert "+global_plugin" in cut.diff() and "-persistence true" in cut.diff()


def test_without_a_location_the_plugin_is_told_the_file(tmp_path: Path, plugin: Path) -> None:
    main = tmp_path / "mosquitto.conf"
    main.write_text("persistence true\npersistence_file /var/lib/mosquitto/state.db\n")
    cut = plan(main, str(plugin), None)
    assert cut.store == Path("/var/lib/mosquitto/mosquitto.sqlite3")
    assert "plugin_opt_db_file /var/lib/mosquitto/mosquitto.sqlite3\n" in cut.texts[str(main)][1]
    cut = plan(main, str(plugin), str(tmp_path / "x.sqlite3"))  # -o is where it goes, and what the plugin is told
    assert f"plugin_opt_db_file {tmp_path / 'x.sqlite3'}\n" in cut.texts[str(main)][1]


@pytest.mark.parametrize("text, words", [
    ("persistence false\n", "does not enable persistence"),
    ("persistence true\npersistence false\n", "does not enable persistence"),  # the last one wins
    ("persistence true\nglobal_plugin /usr/lib/mosquitto_persist_sqlite.so\n", "already loads"),
])
def test_refusals(tmp_path: Path, plugin: Path, text: str, words: str) -> None:
    main = tmp_path / "mosquitto.conf"
    main.write_text(text)
    with pytest.raises(CutoverError, match=words):
        plan(main, str(plugin), None)


def test_no_plugin_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import exporters.migrate.sqlite_cutover as cutover

    monkeypatch.setattr(cutover, "PLUGIN_DIRS", (str(tmp_path),))
    monkeypatch.setattr(cutover.shutil, "which", lambda name: None)
    main = tmp_path / "mosquitto.conf"
    main.write_text("persistence true\n")
    with pytest.raises(CutoverError, match="give --plugin PATH"):
        plan(main, None, None)


def test_no_running_broker_for_a_fresh_configuration(tmp_path: Path, plugin: Path) -> None:
    main = tmp_path / "mosquitto.conf"
    main.write_text(f"persistence true\npid_file {tmp_path}/none.pid\n")
    assert running_broker(plan(main, str(plugin), None).conf) is None
