"""``StandaloneSparkCluster``: a Spark standalone master and its workers as local processes.

    with StandaloneSparkCluster(workers=2) as spark_cluster:
        spark = spark_cluster.session("my-app")     # executors in JVMs of their own
        ...
        spark.stop()

Everything comes from the PySpark installation, nothing is downloaded: the ``pyspark``
package carries Spark's launcher (``bin/spark-class``) and jars, which start
``org.apache.spark.deploy.master.Master`` and one ``org.apache.spark.deploy.worker.Worker``
per worker. Each is a JVM in a process group of its own, bound to 127.0.0.1 on ports
picked outside the kernel's ephemeral range (:func:`sluice.ports.free_port`), with a small
heap (``SPARK_DAEMON_MEMORY``) and, per worker, ``cores_per_worker`` cores and
``worker_memory`` to give executors. A session on the cluster gets one executor per
worker (a JVM started by the worker, in the worker's process group), whose Python workers
run ``python`` (``spark.pyspark.python``, this interpreter by default) with
``spark.executorEnv.PYTHONPATH`` set to the directory this process imported ``sluice``
from, so the executors run the same code as the driver.

:meth:`StandaloneSparkCluster.start` waits until the master's JSON status page
(``http://127.0.0.1:<ui port>/json/``) lists every worker ``ALIVE``;
:meth:`~StandaloneSparkCluster.stop` sends SIGTERM to each worker's process group (its
executors with it), then the master's, and SIGKILL to a group still there after a grace
period. Logs: ``master.log`` and ``worker-N.log`` in the work directory, and each
executor's ``stdout`` and ``stderr`` under ``worker-N/<app id>/<executor id>/``, where the
source's task lines go (:mod:`sluice.spark.task_log`).

One Spark application per Python process: :meth:`~StandaloneSparkCluster.session` fails
while another session is active in this process.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sluice.metastore.zk_server import find_java
from sluice.ports import free_port

from .task_log import LOG_LEVEL_ENV, TaskRead, parse_task_reads

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "MasterStatus",
    "StandaloneSparkCluster",
    "WorkerStatus",
    "daemon_environment",
    "find_spark_home",
    "master_command",
    "worker_command",
]

_HOST = "127.0.0.1"
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# set in a PySpark driver's environment; a daemon started from one must not inherit them
_DRIVER_ONLY_ENV = ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "SPARK_ENV_LOADED")


def find_spark_home() -> Path:
    """The ``pyspark`` package's directory, which holds ``bin/spark-class`` and ``jars/``;
    FileNotFoundError saying what is missing otherwise."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("pyspark is not installed (pip install 'sluice[spark]')")
    home = Path(next(iter(spec.submodule_search_locations)))
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        raise FileNotFoundError(f"{home} has no bin/spark-class and jars/: not a full PySpark")
    return home


def master_command(spark_home: Path, port: int, ui_port: int, host: str = _HOST) -> list[str]:
    """The command line of a standalone master on ``host:port``, status page on ``ui_port``."""
    return [
        str(spark_home / "bin" / "spark-class"), _MASTER_CLASS,
        "--host", host, "--port", str(port), "--webui-port", str(ui_port),
    ]  # fmt: skip


def worker_command(
    spark_home: Path, master_url: str, port: int, ui_port: int, *, cores: int, memory: str,
    work_dir: Path, host: str = _HOST,
) -> list[str]:  # fmt: skip
    """The command line of a worker of ``master_url`` offering ``cores`` and ``memory``
    (``512m``, ``1g``) to executors, which it runs in ``work_dir``."""
    return [
        str(spark_home / "bin" / "spark-class"), _WORKER_CLASS,
        "--host", host, "--port", str(port), "--webui-port", str(ui_port),
        "--cores", str(cores), "--memory", memory, "--work-dir", str(work_dir), master_url,
    ]  # fmt: skip


def daemon_environment(
    base: Mapping[str, str], spark_home: Path, conf_dir: Path, daemon_memory: str,
    java_home: str | None = None,
) -> dict[str, str]:  # fmt: skip
    """The environment of a master or worker: ``base`` with Spark's home, an empty conf
    dir of its own (no ``spark-env.sh`` or defaults from elsewhere), the daemon's heap,
    loopback as the local address, and ``JAVA_HOME`` when given."""
    env = {k: v for k, v in base.items() if k not in _DRIVER_ONLY_ENV}
    env.update(
        SPARK_HOME=str(spark_home),
        SPARK_CONF_DIR=str(conf_dir),
        SPARK_DAEMON_MEMORY=daemon_memory,
        SPARK_LOCAL_IP=_HOST,
    )
    if java_home is not None:
        env["JAVA_HOME"] = java_home
    return env


@dataclass(frozen=True)
class WorkerStatus:
    """One worker as the master's JSON status lists it."""

    id: str
    host: str
    port: int
    state: str
    cores: int
    cores_used: int
    memory_mb: int


@dataclass(frozen=True)
class MasterStatus:
    """The master's JSON status page (``/json/``): its state, workers and applications."""

    url: str
    status: str
    workers: tuple[WorkerStatus, ...]
    active_apps: tuple[str, ...]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> MasterStatus:
        workers = tuple(_worker_status(w) for w in doc.get("workers", ()))
        apps = tuple(str(a["id"]) for a in doc.get("activeapps", ()))
        return cls(str(doc.get("url", "")), str(doc.get("status", "")), workers, apps)

    def alive_ports(self) -> set[int]:
        """The ports of the workers that are ALIVE."""
        return {w.port for w in self.workers if w.state == "ALIVE"}


def _worker_status(w: Mapping[str, Any]) -> WorkerStatus:
    return WorkerStatus(
        str(w["id"]), str(w["host"]), int(w["port"]), str(w["state"]),
        int(w.get("cores", 0)), int(w.get("coresused", 0)), int(w.get("memory", 0)),
    )  # fmt: skip


class StandaloneSparkCluster:
    """A standalone master and ``workers`` workers on loopback, as processes; see the
    module docstring."""

    def __init__(
        self,
        workers: int = 2,
        *,
        cores_per_worker: int = 1,
        worker_memory: str = "1g",
        executor_memory: str = "512m",
        daemon_memory: str = "256m",
        work_dir: str | Path | None = None,
        python: str | None = None,
        task_log_level: str | None = "INFO",
        start_timeout_s: float = 120.0,
    ) -> None:
        """``work_dir``: where logs and executor directories go (a temporary directory,
        removed by :meth:`stop`, when None; a given one is kept). ``python``: the
        executors' Python (this interpreter by default). ``task_log_level``: the level of
        the source's task lines in the executors' logs (None: off)."""
        if workers < 1 or cores_per_worker < 1:
            raise ValueError("a cluster needs at least one worker with at least one core")
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.worker_memory, self.executor_memory = worker_memory, executor_memory
        self.daemon_memory = daemon_memory
        self.python = python or sys.executable
        self.task_log_level = task_log_level
        self.start_timeout_s = start_timeout_s
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="sluice-spark-"))
        self.spark_home = find_spark_home()
        self.master_port, self.master_ui_port = free_port(), free_port()
        self.worker_ports = [(free_port(), free_port()) for _ in range(workers)]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- addresses and files -------------------------------------------------------------
    @property
    def master_url(self) -> str:
        return f"spark://{_HOST}:{self.master_port}"

    @property
    def status_url(self) -> str:
        return f"http://{_HOST}:{self.master_ui_port}/json/"

    def log_path(self, name: str) -> Path:
        """``master.log`` or ``worker-N.log``: the daemon's own output."""
        return self.work_dir / f"{name}.log"

    def worker_dir(self, index: int) -> Path:
        return self.work_dir / f"worker-{index}"

    def executor_logs(self) -> list[Path]:
        """Every executor's ``stderr`` file, of every application run on the cluster."""
        return sorted(self.work_dir.glob("worker-*/app-*/*/stderr"))

    def task_reads(self) -> dict[Path, list[TaskRead]]:
        """The source's task lines (:mod:`sluice.spark.task_log`) per executor log."""
        out = {}
        for path in self.executor_logs():
            reads = parse_task_reads(path.read_text(errors="replace"))
            if reads:
                out[path] = reads
        return out

    # -- life cycle ----------------------------------------------------------------------
    def __enter__(self) -> StandaloneSparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> StandaloneSparkCluster:
        """Start the master, then the workers; return once every worker is ALIVE."""
        java = find_java()
        if java is None:
            raise FileNotFoundError(
                "Spark needs Java 17 or later: install openjdk-17-jre-headless or set JAVA_HOME"
            )
        conf_dir = self.work_dir / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        java_home = str(Path(java).resolve().parent.parent)
        env = daemon_environment(os.environ, self.spark_home, conf_dir, self.daemon_memory,
                                 java_home)  # fmt: skip
        deadline = time.monotonic() + self.start_timeout_s
        try:
            self._spawn("master", master_command(self.spark_home, self.master_port,
                                                 self.master_ui_port), env)  # fmt: skip
            self._wait(lambda s: s.status == "ALIVE", deadline, "the master to answer")
            for i, (port, ui_port) in enumerate(self.worker_ports):
                self.worker_dir(i).mkdir(parents=True, exist_ok=True)
                command = worker_command(
                    self.spark_home, self.master_url, port, ui_port, cores=self.cores_per_worker,
                    memory=self.worker_memory, work_dir=self.worker_dir(i),
                )  # fmt: skip
                self._spawn(f"worker-{i}", command, env)
            wanted = {port for port, _ in self.worker_ports}
            self._wait(lambda s: wanted <= s.alive_ports(), deadline,
                       f"{self.workers} workers to register")  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, command: list[str], env: dict[str, str]) -> None:
        with open(self.log_path(name), "ab") as log:
            self.procs[name] = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                cwd=self.work_dir, start_new_session=True,
            )  # fmt: skip

    def status(self) -> MasterStatus:
        """The master's JSON status now (raises OSError while it does not answer)."""
        with urllib.request.urlopen(self.status_url, timeout=5) as answer:
            return MasterStatus.from_json(json.load(answer))

    def _wait(self, ready: Any, deadline: float, what: str) -> MasterStatus:
        while True:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"Spark {name} exited ({proc.returncode}) while waiting "
                                       f"for {what}:\n{self.log_tail(name)}")  # fmt: skip
            with contextlib.suppress(OSError, ValueError, KeyError):
                status = self.status()
                if ready(status):
                    return status
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}; see {self.work_dir}")
            time.sleep(0.2)

    def pids(self) -> dict[str, int]:
        """The master's and the workers' process ids, by name (``master``, ``worker-0``)."""
        return {name: proc.pid for name, proc in self.procs.items() if proc.poll() is None}

    def stop(self, grace_s: float = 20.0) -> None:
        """Stop the workers (and their executors), then the master; remove the work
        directory if this cluster made it."""
        workers = [name for name in self.procs if name != "master"]
        for name in [*workers, "master"]:
            proc = self.procs.get(name)
            if proc is not None:
                _stop_group(proc, grace_s)
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def log_tail(self, name: str, lines: int = 30) -> str:
        try:
            text = self.log_path(name).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # -- sessions ------------------------------------------------------------------------
    def session_conf(self) -> dict[str, str]:
        """Spark settings of an application on this cluster: one executor per worker with
        all of its cores, the executors' Python and the path to Sluice, and the first job
        held until every executor has registered."""
        import sluice

        cores = self.workers * self.cores_per_worker
        conf = {
            "spark.executor.memory": self.executor_memory,
            "spark.executor.cores": str(self.cores_per_worker),
            "spark.cores.max": str(cores),
            "spark.pyspark.python": self.python,
            "spark.pyspark.driver.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": str(Path(sluice.__file__).resolve().parent.parent),
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": f"{self.start_timeout_s:.0f}s",
        }
        if self.task_log_level is not None:
            conf[f"spark.executorEnv.{LOG_LEVEL_ENV}"] = self.task_log_level
        return conf

    def session(self, app_name: str = "sluice", **conf: Any) -> SparkSession:
        """A Spark session on this cluster with ``sluice`` registered; ``conf`` adds or
        overrides settings."""
        from pyspark.sql import SparkSession

        from . import register
        from .session import build_session

        if SparkSession.getActiveSession() is not None:
            raise RuntimeError("a Spark session is already active in this process; stop it")
        settings = {**self.session_conf(), **{k: str(v) for k, v in conf.items()}}
        spark = build_session(self.master_url, app_name, self.workers * self.cores_per_worker,
                              settings)  # fmt: skip
        register(spark)
        return spark


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the process group ``proc`` leads, SIGKILL it if ``proc`` outlives
    ``grace_s``; the group's other processes (executors) get the same signals."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue
        break
    # executors may outlive a worker that exited: the rest of the group goes too
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
