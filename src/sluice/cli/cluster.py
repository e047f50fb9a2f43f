"""``sluice cluster start``: ZooKeeper plus N broker processes on loopback, supervised.

The command is for trying replication and failover by hand, so a broker that dies is
reported, not treated as the end: the others keep running, the dead one is restarted
according to ``--restart`` (``on-failure`` by default, at most ``--max-restarts`` times
each) or by a command on standard input, and the data directory, with every broker's
log, is kept whenever a broker died. The exit status says whether the cluster was whole
when it was stopped: 0 if every broker was running, 1 otherwise.

Commands read from standard input, one per line (``help`` lists them)::

    status           each broker: running or not, pid, restarts, port
    kill N           SIGKILL broker N (no restart by the policy: it was asked for)
    stop N           controlled shutdown of broker N (SIGTERM)
    start N          start broker N again (also "restart N": stops it first if running)
    quit             stop the whole cluster (as Ctrl-C or SIGTERM do)
"""

from __future__ import annotations

import argparse
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from sluice.testing.cluster import EmbeddedCluster

__all__ = ["ClusterSupervisor", "add_parser", "cmd_cluster_start"]

RESTART_POLICIES = ("never", "on-failure")
RESTART_BACKOFF_S = 1.0
"""How long after a broker's death the supervisor starts it again."""


@dataclass
class _BrokerWatch:
    restarts: int = 0
    died_at: float | None = None  # when the supervisor saw it dead, if it is to restart
    expected_down: bool = False  # stopped or killed on request: not a failure
    failed: bool = False  # died without being asked to, at least once


@dataclass
class ClusterSupervisor:
    """Watches the brokers of ``cluster``: reports deaths, restarts by policy, obeys
    commands. :meth:`poll` is called every half second by the command's loop."""

    cluster: EmbeddedCluster
    policy: str = "on-failure"
    max_restarts: int = 3
    out: TextIO = sys.stdout
    watches: dict[int, _BrokerWatch] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy not in RESTART_POLICIES:
            raise ValueError(f"unknown restart policy {self.policy!r}")
        for broker_id in self.cluster.broker_ids:
            self.watches.setdefault(broker_id, _BrokerWatch())

    @property
    def any_failed(self) -> bool:
        """Whether a broker died at some point without being asked to."""
        return any(w.failed for w in self.watches.values())

    def down(self) -> list[int]:
        """The brokers not running now."""
        return [b for b in self.cluster.broker_ids if not self.cluster.is_running(b)]

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def poll(self, now: float | None = None) -> None:
        """Notice brokers that died and restart those the policy restarts when due."""
        now = time.monotonic() if now is None else now
        for broker_id, watch in self.watches.items():
            if self.cluster.is_running(broker_id) or watch.expected_down:
                continue
            if watch.died_at is None:
                watch.died_at = now
                watch.failed = True
                status = self.cluster.exit_status(broker_id)
                self.say(
                    f"broker {broker_id} died ({status}); its log: "
                    f"{self.cluster.log_path(broker_id)}"
                )
                if self.policy == "never":
                    self.say(f"  not restarting it (--restart never); 'start {broker_id}' does")
                elif watch.restarts >= self.max_restarts:
                    self.say(
                        f"  not restarting it: restarted {watch.restarts} times already "
                        f"(--max-restarts {self.max_restarts}); 'start {broker_id}' does"
                    )
                else:
                    self.say(f"  restarting it in {RESTART_BACKOFF_S:g} s")
                continue
            if self.policy == "never" or watch.restarts >= self.max_restarts:
                continue
            if now - watch.died_at >= RESTART_BACKOFF_S:
                watch.restarts += 1
                self._start(broker_id, f"restart {watch.restarts} of {self.max_restarts}", now)

    def _start(self, broker_id: int, why: str, now: float | None = None) -> None:
        watch = self.watches[broker_id]
        try:
            self.cluster.start(broker_id)
        except (RuntimeError, TimeoutError, OSError) as exc:
            self.say(f"broker {broker_id} did not start ({why}): {exc}")
            # Tried again after the back-off, if the policy allows.
            watch.died_at = time.monotonic() if now is None else now
            return
        watch.died_at = None
        watch.expected_down = False
        self.say(f"broker {broker_id} started ({why}), pid {self.cluster.pid(broker_id)}")

    def command(self, line: str) -> bool:
        """Carry out one command line; False when it asks to stop the cluster."""
        words = line.split()
        if not words:
            return True
        verb, args = words[0].lower(), words[1:]
        if verb in ("quit", "exit"):
            return False
        if verb == "help":
            self.say(__doc__.split("::", 1)[1].rstrip() if __doc__ else "")
            return True
        if verb == "status":
            for broker_id, watch in self.watches.items():
                running = self.cluster.is_running(broker_id)
                state = f"running, pid {self.cluster.pid(broker_id)}" if running else "down"
                self.say(
                    f"broker {broker_id}: {state}; restarts {watch.restarts}; "
                    f"{self.cluster.bootstrap_of(broker_id)}"
                )
            return True
        if verb not in ("kill", "stop", "start", "restart") or len(args) != 1:
            self.say(f"unknown command {line.strip()!r}; try 'help'")
            return True
        try:
            broker_id = int(args[0])
        except ValueError:
            broker_id = -1
        if broker_id not in self.watches:
            self.say(f"no broker {args[0]!r}; brokers are {sorted(self.watches)}")
            return True
        watch = self.watches[broker_id]
        if verb == "kill":
            watch.expected_down = True
            self.cluster.kill(broker_id)
            self.say(f"broker {broker_id} killed (SIGKILL)")
        elif verb == "stop":
            watch.expected_down = True
            self.cluster.stop_broker(broker_id)
            self.say(f"broker {broker_id} stopped")
        else:
            if verb == "restart" and self.cluster.is_running(broker_id):
                watch.expected_down = True
                self.cluster.stop_broker(broker_id)
            self._start(broker_id, "on request")
        return True


def _read_commands(stream: TextIO, commands: queue.Queue[str | None]) -> None:
    for line in stream:
        commands.put(line)
    commands.put(None)  # end of input: no more commands, the cluster keeps running


def cmd_cluster_start(args: argparse.Namespace) -> int:
    """ZooKeeper plus N broker processes on loopback until Ctrl-C, SIGTERM or ``quit``."""
    from sluice.testing.cluster import EmbeddedCluster

    overrides: dict[str, str] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"sluice cluster: --override needs KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    if args.brokers < 1:
        print("sluice cluster: --brokers must be at least 1", file=sys.stderr)
        return 2
    if args.max_restarts < 0:
        print("sluice cluster: --max-restarts must be at least 0", file=sys.stderr)
        return 2
    cluster = EmbeddedCluster(
        args.brokers, data_dir=args.data_dir, overrides=overrides, zookeeper=True
    )
    stopping = threading.Event()

    def stop(_signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        cluster.start_all()
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"sluice cluster: cannot start: {exc}", file=sys.stderr)
        return 1
    supervisor = ClusterSupervisor(cluster, args.restart, args.max_restarts)
    print(f"ZooKeeper:          {cluster.zookeeper_connect}")
    print(f"bootstrap servers:  {cluster.bootstrap_servers}")
    print(f"controller:         broker {cluster.controller_id}")
    print(f"data and logs in:   {cluster.data_dir}")
    print(f"restart policy:     {args.restart} (at most {args.max_restarts} per broker)")
    print("commands on stdin:  status, kill N, stop N, start N, restart N, quit, help")
    print("Ctrl-C stops every broker (controlled shutdown) and ZooKeeper.", flush=True)
    commands: queue.Queue[str | None] = queue.Queue()
    threading.Thread(
        target=_read_commands, args=(sys.stdin, commands), name="commands", daemon=True
    ).start()
    try:
        while not stopping.is_set():
            supervisor.poll()
            try:
                line = commands.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is not None and not supervisor.command(line):
                break
    finally:
        down = supervisor.down()  # before stopping: afterwards none runs
        print("stopping the cluster...", flush=True)
        cluster.stop(keep_data=supervisor.any_failed or bool(down))
    if supervisor.any_failed or down:
        print(f"data and logs kept in {cluster.data_dir}", flush=True)
    if down:
        print(f"the cluster was not whole when stopped (brokers {down} down)", flush=True)
        return 1
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``cluster start`` on ``sub``."""
    cluster = sub.add_parser(
        "cluster", help="run a local cluster (ZooKeeper plus brokers) for trying things out",
        description="Local clusters on loopback, for trying Sluice's replication by hand.",
    )  # fmt: skip
    cluster_sub = cluster.add_subparsers(dest="action", required=True)
    start = cluster_sub.add_parser(
        "start", help="start ZooKeeper and N brokers, supervise them; Ctrl-C stops them all",
        description=(
            "Start a ZooKeeper server (Debian's zookeeper package, on a free loopback port in "
            "the data directory) and N Sluice broker processes (ids 0..N-1, free loopback "
            "ports), print the bootstrap servers, and supervise them: a broker that dies is "
            "reported and restarted by the restart policy while the others keep running; "
            "commands on standard input kill, stop and start brokers. Ctrl-C, SIGTERM or "
            "'quit' stop every broker with a controlled shutdown, then ZooKeeper. Exit "
            "status 1 if a broker was down at that point."
        ),
    )  # fmt: skip
    start.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    start.add_argument(
        "--data-dir", metavar="DIR", default=None,
        help="where logs and broker output go (default: a temporary directory, removed at "
        "exit unless a broker died)",
    )  # fmt: skip
    start.add_argument(
        "--override", metavar="KEY=VALUE", action="append", default=[],
        help="a broker property for every broker (repeatable), e.g. min.insync.replicas=2",
    )  # fmt: skip
    start.add_argument(
        "--restart", choices=RESTART_POLICIES, default="on-failure",
        help="restart a broker that died without being asked to (default on-failure)",
    )  # fmt: skip
    start.add_argument(
        "--max-restarts", type=int, default=3, metavar="N",
        help="restarts per broker by the policy (default 3)",
    )  # fmt: skip
    start.set_defaults(func=cmd_cluster_start)
