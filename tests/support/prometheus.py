"""Debian's prometheus-node-exporter and Prometheus on 127.0.0.1 for the metrics test: free ports, temp dirs,
stopped by PID.

node_exporter runs the textfile collector alone (every default collector off) on a directory the test
writes into; Prometheus scrapes it every second and is asked through its HTTP API.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from support.brokers import free_port

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def have_prometheus() -> bool:
    return bool(NODE_EXPORTER and PROMETHEUS)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, seconds: float = 30.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"exited at start (code {proc.returncode}): {log.read_text()[-500:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"did not listen on 127.0.0.1:{port} within {seconds:.0f} s: {log.read_text()[-500:]}")


class Monitoring:
    """node_exporter (textfile collector on ``textfiles``) scraped by Prometheus every second."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.textfiles = workdir / "textfiles"
        self.textfiles.mkdir(parents=True)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.node_port = 0
        self.prom_port = 0

    def _start(self, argv: list[str], port: int, name: str) -> None:
        log = self.dir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        _wait_port(port, proc, log)

    def start(self) -> Monitoring:
        assert NODE_EXPORTER and PROMETHEUS
        self.node_port = free_port()
        self._start([NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
                     f"--collector.textfile.directory={self.textfiles}",
                     f"--web.listen-address=127.0.0.1:{self.node_port}"], self.node_port, "node_exporter")
        self.prom_port = free_port()
        conf = self.dir / "prometheus.yml"
        conf.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        "scrape_configs:\n  - job_name: node\n    static_configs:\n"
                        f"      - targets: ['127.0.0.1:{self.node_port}']\n")
        self._start([PROMETHEUS, f"--config.file={conf}", f"--storage.tsdb.path={self.dir / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{self.prom_port}"], self.prom_port, "prometheus")
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):
            _stop(proc)
        self.procs.clear()

    def __enter__(self) -> Monitoring:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now (``/api/v1/query``)."""
        url = f"http://127.0.0.1:{self.prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def wait_for(self, expr: str, seconds: float = 60.0) -> list[dict[str, Any]]:
        """``expr``'s result once it is not empty (the scrape after the file was written)."""
        end = time.monotonic() + seconds
        while True:
            got = self.query(expr)
            if got or time.monotonic() > end:
                return got
            time.sleep(0.25)

    def exporter_text(self) -> str:
        """What node_exporter serves (to tell a collector error from a scrape that has not happened yet)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.node_port}/metrics", timeout=10) as r:
            return str(r.read().decode("utf-8"))
