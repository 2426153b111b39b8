"""``mosquitto -h`` is run once per binary file in a process (the guard resolves the binary on every run;
a process running many commands — the TUI, the fuzz campaign — started it each time)."""

from __future__ import annotations

import os
from pathlib import Path

from codec.broker.trial import binary_version


def fake_mosquitto(path: Path, version: str, log: Path) -> None:
    path.write_text(f"#!/bin/sh\necho started >> '{log}'\necho 'mosquitto version {version}'\n")
    path.chmod(0o755)


def test_the_version_is_asked_once_per_binary_file(tmp_path: Path) -> None:
    log = tmp_path / "runs"
    binary = tmp_path / "mosquitto"
    fake_mosquitto(binary, "2.0.18", log)
    assert binary_version(str(binary)) == (2, 0, 18)
    assert binary_version(str(binary)) == (2, 0, 18)
    assert log.read_text().count("started") == 1
    # another binary at the same path (an upgrade): asked again
    fake_mosquitto(binary, "2.0.22", log)
    st = binary.stat()
    os.utime(binary, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert binary_version(str(binary)) == (2, 0, 22)
    assert log.read_text().count("started") == 2


def test_a_binary_that_names_no_version_is_asked_again(tmp_path: Path) -> None:
    log = tmp_path / "runs"
    binary = tmp_path / "mosquitto"
    binary.write_text(f"#!/bin/sh\necho started >> '{log}'\necho 'usage: something else'\n")
    binary.chmod(0o755)
    assert binary_version(str(binary)) is None
    assert binary_version(str(binary)) is None
    assert log.read_text().count("started") == 2
