"""A throwaway ZooKeeper server for tests and local clusters, from Debian's package.

:class:`ZooKeeperServer` runs ``org.apache.zookeeper.server.ZooKeeperServerMain`` with
a generated ``zoo.cfg`` on a free 127.0.0.1 port in a temporary directory (never as a
system service), waits until it answers the ``ruok``/``srvr`` four-letter commands,
and kills it on :meth:`~ZooKeeperServer.stop`. :meth:`~ZooKeeperServer.kill` crashes it
(SIGKILL) keeping its port and data, and :meth:`~ZooKeeperServer.start` then restarts it.

Finding ZooKeeper: ``$SLUICE_ZOOKEEPER_CLASSPATH`` if set, else Debian's
``/usr/share/java/zookeeper.jar`` (package ``zookeeper``; the jar's manifest names its
dependencies in /usr/share/java), else the jars of an Apache tarball under
``$ZOOKEEPER_HOME/lib``. Java is ``$JAVA_HOME/bin/java`` or ``java`` on the PATH.
:func:`ensure_zookeeper_installed` runs ``apt-get install -y zookeeper`` when nothing
is found (as root, or through sudo).

Run ``python -m sluice.metastore.zk_server`` to keep one up for a hand-made cluster:
it prints the connect string and stops on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from sluice.ports import free_port

__all__ = [
    "ZooKeeperNotInstalledError",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "ensure_zookeeper_installed",
    "find_java",
    "find_zookeeper_classpath",
]

DEBIAN_JAR = "/usr/share/java/zookeeper.jar"
_EXTRA_JARS = ("/usr/share/java/slf4j-simple.jar",)  # a logging backend, if present
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeperNotInstalledError(RuntimeError):
    """No ZooKeeper jars (or no Java) were found on this machine."""


class ZooKeeperStartError(RuntimeError):
    """The ZooKeeper process exited or did not answer before the deadline."""


def find_zookeeper_classpath() -> str | None:
    """Return a Java classpath that runs a ZooKeeper server, or None."""
    override = os.environ.get("SLUICE_ZOOKEEPER_CLASSPATH")
    if override:
        return override
    if os.path.exists(DEBIAN_JAR):
        jars = [DEBIAN_JAR] + [jar for jar in _EXTRA_JARS if os.path.exists(jar)]
        return os.pathsep.join(jars)
    for home in filter(None, (os.environ.get("ZOOKEEPER_HOME"), "/usr/share/zookeeper")):
        jars = sorted(glob.glob(os.path.join(home, "lib", "*.jar")))
        jars += sorted(glob.glob(os.path.join(home, "zookeeper-*.jar")))
        if any("zookeeper" in os.path.basename(jar) for jar in jars):
            return os.pathsep.join(jars)
    return None


def find_java() -> str | None:
    """Return the ``java`` executable: ``$JAVA_HOME/bin/java`` or the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def ensure_zookeeper_installed() -> str:
    """Return ZooKeeper's classpath, installing Debian's ``zookeeper`` package if needed.

    Runs ``apt-get update`` and ``apt-get install -y --no-install-recommends zookeeper``
    (with sudo when not root). The package only installs jars and scripts; this module
    never starts it as a service.
    """
    classpath = find_zookeeper_classpath()
    if classpath is not None and find_java() is not None:
        return classpath
    apt = shutil.which("apt-get")
    sudo: list[str] = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if apt is None or (sudo and shutil.which("sudo") is None):
        raise ZooKeeperNotInstalledError(
            "ZooKeeper is not installed and apt-get (as root or via sudo) is unavailable: "
            "install Debian's 'zookeeper' package or set SLUICE_ZOOKEEPER_CLASSPATH"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run([*sudo, apt, "update", "-qq"], check=True, env=env)
    install = [*sudo, apt, "install", "-y", "-qq", "--no-install-recommends", "zookeeper"]
    subprocess.run(install, check=True, env=env)
    classpath = find_zookeeper_classpath()
    if classpath is None or find_java() is None:
        raise ZooKeeperNotInstalledError("apt-get installed 'zookeeper' but it is not usable")
    return classpath


class ZooKeeperServer:
    """A standalone ZooKeeper process on 127.0.0.1 in its own temporary directory."""

    def __init__(
        self,
        *,
        port: int | None = None,
        tick_time_ms: int = 500,
        max_session_timeout_ms: int = 60_000,
        startup_timeout_s: float = 60.0,
        classpath: str | None = None,
        java: str | None = None,
    ) -> None:
        self._requested_port = port
        self.port = 0
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.startup_timeout_s = startup_timeout_s
        self._classpath = classpath
        self._java = java
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        """Kafka's ``zookeeper.connect`` for this server."""
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> ZooKeeperServer:
        """Start the server and return once it serves requests (or raise); after
        :meth:`kill`, again on the same port and data."""
        classpath = self._classpath or find_zookeeper_classpath()
        java = self._java or find_java()
        if classpath is None or java is None:
            raise ZooKeeperNotInstalledError(
                "ZooKeeper or Java not found: apt-get install zookeeper "
                "(or call ensure_zookeeper_installed())"
            )
        restart = self._dir is not None  # after kill(): the same port and data
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="sluice-zk-"))
        attempts = 1 if self._requested_port or restart else 3
        for attempt in range(attempts):
            self.port = self._requested_port or (self.port if restart else free_port())
            try:
                self._launch(java, classpath)
                self._await_serving()
                atexit.register(self.stop)
                return self
            except ZooKeeperStartError:
                self._kill()
                if attempt == attempts - 1 or "Address already in use" not in self.log_tail():
                    self.stop()
                    raise
        raise AssertionError("unreachable")

    def _launch(self, java: str, classpath: str) -> None:
        assert self._dir is not None
        data_dir = self._dir / "data"
        data_dir.mkdir(exist_ok=True)
        config = self._dir / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={data_dir}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            f"minSessionTimeout={2 * self.tick_time_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
        )
        command = [
            java,
            "-Xms16m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(config),
        ]
        with open(self._dir / "zookeeper.log", "ab") as log_file:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=self._dir,
                start_new_session=True,
            )

    def _await_serving(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ZooKeeperStartError(
                    f"ZooKeeper exited with {self._proc.returncode}:\n{self.log_tail()}"
                )
            try:
                if self.four_letter_word("ruok") == "imok" and "Mode:" in self.four_letter_word(
                    "srvr"
                ):
                    return
            except OSError:
                pass
            # Pause briefly, waking at once if the process dies.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=0.05)
        raise ZooKeeperStartError(
            f"ZooKeeper did not answer within {self.startup_timeout_s}s:\n{self.log_tail()}"
        )

    def four_letter_word(self, command: str, timeout_s: float = 2.0) -> str:
        """Send a four-letter command (``ruok``, ``srvr``, ``mntr``...) and return the reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout_s) as sock:
            sock.sendall(command.encode("ascii"))
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log (for error messages)."""
        if self._dir is None or not (self._dir / "zookeeper.log").exists():
            return ""
        text = (self._dir / "zookeeper.log").read_text("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL the server, as a crash would, keeping its port and data directory:
        :meth:`start` then starts it again on both."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def stop(self) -> None:
        """Kill the server process and remove its directory; safe to call twice."""
        self._kill()
        atexit.unregister(self.stop)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> int:
    """Run one server until interrupted, printing its connect string."""
    ensure_zookeeper_installed()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ZooKeeperServer() as server:
        print(server.connect_string, flush=True)
        try:
            while not stop.wait(1.0):
                if not server.running:
                    print(server.log_tail(), file=sys.stderr)
                    return 1
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
