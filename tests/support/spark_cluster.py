"""A real Spark standalone cluster for tests, and a fleet of real-workload db files for it to read.

    with StandaloneCluster(tmp, workers=2) as cluster:       # master + 2 workers: separate JVMs
        spark = xs.session(cluster.url, conf={...})          # the driver connects with spark://127.0.0.1:PORT
        cluster.tasks_by_worker(stage_ids)                   # which worker's executor ran which task

The master and workers are started from the installed PySpark (``bin/spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker``) on 127.0.0.1, free ports, their
own temp work and log dirs, the master's REST server off; each is stopped with SIGTERM by PID
(``spark-class`` execs the JVM, so the PID is the JVM's). Executors log their tasks at INFO
(``Running task N.0 in stage S.0``) into the workers' work dirs, so a test can see which worker
ran what.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from exporters.spark.session import LOG4J_QUIET

from support.brokers import free_port

# executors: the Executor's task lines at INFO, everything else quiet
EXECUTOR_LOG4J = LOG4J_QUIET + """logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = info
"""
# master and workers: their deploy messages at INFO (start-up and registration are waited for by them)
DAEMON_LOG4J = EXECUTOR_LOG4J.replace("org.apache.spark.executor.Executor", "org.apache.spark.deploy")
TASK_LINE = re.compile(r"Running task (\d+)\.\d+ in stage (\d+)\.\d+ \(TID (\d+)\)")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class ClusterError(RuntimeError):
    """A master or worker did not come up (its log is in the message)."""


class StandaloneCluster:
    """A Spark master and ``workers`` workers (``cores`` cores, ``memory`` each), all on loopback."""

    def __init__(self, root: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.root = Path(root)
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.port = 0
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.work_dirs = [self.root / f"worker{i}" for i in range(1, workers + 1)]
        self.executor_log4j = self.root / "executor-log4j2.properties"

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        conf = self.root / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "log4j2.properties").write_text(DAEMON_LOG4J)
        return dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1",
                    SPARK_CONF_DIR=str(conf), SPARK_LOG_DIR=str(self.root / "logs"), SPARK_NO_DAEMONIZE="1",
                    SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
                    SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=false",
                    PYSPARK_PYTHON=sys.executable)

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the child owns it; closed on stop
        try:
            return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self._env(),
                                    cwd=self.root, start_new_session=True)
        finally:
            log.close()

    def log(self, name: str) -> str:
        try:
            return (self.root / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""

    def _wait_for(self, name: str, proc: subprocess.Popen[bytes], needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log(name):
                return
            if proc.poll() is not None:
                raise ClusterError(f"{name} exited with {proc.returncode}: {self.log(name)[-3000:]}")
            time.sleep(0.2)
        raise ClusterError(f"{name}: no {needle!r} within {timeout} s: {self.log(name)[-3000:]}")

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.executor_log4j.write_text(EXECUTOR_LOG4J)
        self.port = free_port()
        self.master = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(self.port), "--webui-port", str(free_port()))
        self._wait_for("master", self.master, "I have been elected leader", timeout)
        for i, work in enumerate(self.work_dirs, 1):
            work.mkdir(parents=True, exist_ok=True)
            self.workers.append(self._spawn(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host",
                                            "127.0.0.1", "--port", str(free_port()), "--webui-port",
                                            str(free_port()), "--cores", str(self.cores), "--memory", self.memory,
                                            "--work-dir", str(work), self.url))
        for i, proc in enumerate(self.workers, 1):
            self._wait_for(f"worker{i}", proc, "Successfully registered with master", timeout)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM each worker, then the master, by PID; SIGKILL what has not exited after ``timeout``."""
        for proc in [*self.workers, *([self.master] if self.master else [])]:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        self.workers, self.master = [], None

    def __enter__(self) -> StandaloneCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def driver_conf(self) -> dict[str, str]:
        """Settings for a driver on this cluster: small executors that log their tasks (see ``tasks_by_worker``)."""
        return {"spark.executor.memory": "512m", "spark.executor.cores": str(self.cores),
                "spark.cores.max": str(self.cores * self.n_workers),
                "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{self.executor_log4j}"}

    def tasks_by_worker(self, stages: set[int]) -> dict[int, set[tuple[int, int]]]:
        """Per worker (1, 2, ...): the (stage, task) pairs of ``stages`` its executors ran, from their logs."""
        out: dict[int, set[tuple[int, int]]] = {}
        for i, work in enumerate(self.work_dirs, 1):
            ran: set[tuple[int, int]] = set()
            for log in work.glob("app-*/*/stderr"):
                for m in TASK_LINE.finditer(log.read_text(errors="replace")):
                    if int(m.group(2)) in stages:
                        ran.add((int(m.group(2)), int(m.group(1))))
            out[i] = ran
        return out


def wait_for_executors(spark, count: int, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    """Block until ``count`` executors have registered with the driver (else tasks may all go to the first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() >= count + 1:  # + the driver
            return
        time.sleep(0.2)
    raise ClusterError(f"fewer than {count} executors registered within {timeout} s")


# ---------------------------------------------------------------- a fleet of real-workload files


MAKE_BIG_DB = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "make-big-db.sh"


def make_workload_db(out: Path, *, retained: int, clients: int, queued: int, seed: int) -> Path:
    """A real broker's db from ``make-big-db.sh`` (Debian's mosquitto, a scripted MQTT workload), small."""
    env = dict(os.environ, BIG_CLIENTS=str(clients), BIG_QUEUED=str(queued), BIG_SEED=str(seed))
    r = subprocess.run(["bash", str(MAKE_BIG_DB), str(out), str(retained)], env=env, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0 or not out.exists():
        raise RuntimeError(f"make-big-db.sh failed ({r.returncode}): {r.stderr[-2000:]}")
    return out


def first_values(path: Path) -> tuple[list[str], list[str]]:
    """The first retained topics and client ids of a db (to pick what the fleet's variants remove)."""
    from codec import DbFile

    topics, clients, stores = [], [], {}
    with DbFile(path) as db:
        for c in db.stream():
            r = c.record
            if r.kind == "msg_store":
                stores[r["store_id"]] = r["topic"]
            elif r.kind == "retain" and len(topics) < 3:
                topics.append(stores[r["store_id"]])
            elif r.kind == "client" and len(clients) < 2:
                clients.append(r["client_id"])
    return topics, clients


def build_fleet(out: Path, bases: list[Path]) -> list[Path]:
    """A directory of db files made from ``bases`` the ways an operator makes them: each base as it is,
    converted to every other db version 3-6, with some retained messages removed, with a client dropped,
    and (v5/v6) renewed. Every command runs as `mosqdb` does (in this process)."""
    from codec import DbFile

    from support.cli import run_in_process

    out.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []

    def cli(*args: object) -> None:
        r = run_in_process(*args, "-q")
        assert r.returncode == 0, (args, r.stderr)

    for k, base in enumerate(bases):
        stem = f"{k:02d}-{base.stem}"
        with DbFile(base) as db:
            version = db.version
        own = out / f"{stem}.db"
        shutil.copyfile(base, own)
        made.append(own)
        for v in (3, 4, 5, 6):
            if v != version:
                cli("convert", base, "--to-version", v, "--force", "-o", out / f"{stem}-v{v}.db")
                made.append(out / f"{stem}-v{v}.db")
        topics, clients = first_values(base)
        cli("rm-retained", base, *topics, "-o", out / f"{stem}-rm.db")
        made.append(out / f"{stem}-rm.db")
        cli("drop-client", base, clients[0], "-o", out / f"{stem}-drop.db")
        made.append(out / f"{stem}-drop.db")
        if version and version >= 5:
            cli("renew", base, "--sessions", "7d", "--messages", "never", "--at", "2030-01-01", "-o",
                out / f"{stem}-renew.db")
            made.append(out / f"{stem}-renew.db")
    return made


__all__ = ["ClusterError", "StandaloneCluster", "build_fleet", "make_workload_db", "spark_home",
           "wait_for_executors"]
