"""MariaDB and Redis for the migration tests (import the fixtures): 127.0.0.1, free ports, temp dirs, stopped by PID.

Module-scoped: each test module (on whichever xdist worker runs it) starts its own servers.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.brokers import free_port

MARIADBD = shutil.which("mariadbd") or ("/usr/sbin/mariadbd" if os.path.exists("/usr/sbin/mariadbd") else None)
INSTALL_DB = shutil.which("mariadb-install-db")
REDIS = shutil.which("redis-server")


def _wait_port(port: int, proc: subprocess.Popen, seconds: float, log: Path) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.skip(f"server exited at start (code {proc.returncode}): {log.read_text()[-300:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    _stop(proc)
    pytest.skip(f"server did not listen on 127.0.0.1:{port} within {seconds:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


TEST_TUNING = ("--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=2")  # light for tests


@pytest.fixture(scope="module")
def mariadb() -> Iterator[dict]:
    """A throwaway MariaDB; yields connection settings (root, no password, grant tables off)."""
    yield from mariadb_server(TEST_TUNING)


def mariadb_server(tuning: tuple[str, ...] = ()) -> Iterator[dict]:
    """Start MariaDB (``tuning``: extra server options; none = the server's defaults), yield, stop."""
    if not (MARIADBD and INSTALL_DB):
        pytest.skip("MariaDB is not installed (apt-get install mariadb-server; scripts/bootstrap.sh does it)")
    tmp = Path(tempfile.mkdtemp(prefix="mosqdb-mariadb-"))
    data = tmp / "data"
    r = subprocess.run([INSTALL_DB, "--no-defaults", "--user=root", f"--datadir={data}",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        shutil.rmtree(tmp, True)
        pytest.skip(f"mariadb-install-db failed: {r.stderr[-300:]}")
    port = free_port()
    log = tmp / "log"
    with open(log, "w") as lf:
        proc = subprocess.Popen([MARIADBD, "--no-defaults", "--user=root", f"--datadir={data}",
                                 f"--socket={tmp}/sock", "--bind-address=127.0.0.1", f"--port={port}",
                                 "--skip-grant-tables", "--skip-log-bin", *tuning, f"--pid-file={tmp}/pid"],
                                stdout=lf, stderr=subprocess.STDOUT)
    try:
        _wait_port(port, proc, 60, log)
        yield {"host": "127.0.0.1", "port": port, "user": "root", "password": ""}
    finally:
        _stop(proc)
        shutil.rmtree(tmp, True)


@pytest.fixture(scope="module")
def redis_server() -> Iterator[dict]:
    if not REDIS:
        pytest.skip("redis-server is not installed (apt-get install redis-server; scripts/bootstrap.sh does it)")
    tmp = Path(tempfile.mkdtemp(prefix="mosqdb-redis-"))
    port = free_port()
    log = tmp / "log"
    with open(log, "w") as lf:
        proc = subprocess.Popen([REDIS, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly",
                                 "no", "--dir", str(tmp), "--databases", "64"], stdout=lf, stderr=subprocess.STDOUT)
    try:
        _wait_port(port, proc, 20, log)
        yield {"host": "127.0.0.1", "port": port}
    finally:
        _stop(proc)
        shutil.rmtree(tmp, True)
