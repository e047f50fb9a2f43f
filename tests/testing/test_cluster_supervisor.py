"""``ClusterSupervisor`` (``sluice cluster start``): deaths reported, restarts by policy
and by command, the failure remembered; against a stand-in cluster, no processes."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, cast

from sluice.cli.cluster import RESTART_BACKOFF_S, ClusterSupervisor


class FakeCluster:
    def __init__(self, brokers: int = 3) -> None:
        self.broker_ids = list(range(brokers))
        self.running = set(self.broker_ids)
        self.started: list[int] = []
        self.fail_start = False

    def is_running(self, broker_id: int) -> bool:
        return broker_id in self.running

    def exit_status(self, broker_id: int) -> str:
        return "killed by SIGKILL"

    def log_path(self, broker_id: int) -> Path:
        return Path(f"/data/broker-{broker_id}.log")

    def bootstrap_of(self, broker_id: int) -> str:
        return f"127.0.0.1:{9000 + broker_id}"

    def pid(self, broker_id: int) -> int:
        return 100 + broker_id

    def start(self, broker_id: int) -> None:
        if self.fail_start:
            raise RuntimeError("port in use")
        self.started.append(broker_id)
        self.running.add(broker_id)

    def kill(self, broker_id: int) -> None:
        self.running.discard(broker_id)

    stop_broker = kill


def supervisor(cluster: FakeCluster, **kwargs: Any) -> tuple[ClusterSupervisor, io.StringIO]:
    out = io.StringIO()
    return ClusterSupervisor(cast(Any, cluster), out=out, **kwargs), out


def test_a_dead_broker_is_reported_and_restarted_after_the_backoff() -> None:
    cluster = FakeCluster()
    sup, out = supervisor(cluster)
    cluster.running.discard(1)
    sup.poll(now=10.0)
    assert "broker 1 died (killed by SIGKILL); its log: /data/broker-1.log" in out.getvalue()
    assert cluster.started == []  # not before the back-off
    sup.poll(now=10.0 + RESTART_BACKOFF_S / 2)
    assert cluster.started == []
    sup.poll(now=10.0 + RESTART_BACKOFF_S)
    assert cluster.started == [1]
    assert "broker 1 started (restart 1 of 3), pid 101" in out.getvalue()
    assert sup.down() == [] and sup.any_failed  # whole again, but the failure is remembered


def test_restarts_stop_at_the_limit_and_never_means_never() -> None:
    cluster = FakeCluster()
    sup, out = supervisor(cluster, max_restarts=1)
    now = 0.0
    for _ in range(3):
        cluster.running.discard(2)
        sup.poll(now=now)
        sup.poll(now=now + RESTART_BACKOFF_S)
        now += 10
    assert cluster.started == [2]
    assert "restarted 1 times already (--max-restarts 1)" in out.getvalue()
    assert sup.down() == [2]

    cluster = FakeCluster()
    sup, out = supervisor(cluster, policy="never")
    cluster.running.discard(0)
    sup.poll(now=0.0)
    sup.poll(now=100.0)
    assert cluster.started == []
    assert "not restarting it (--restart never); 'start 0' does" in out.getvalue()


def test_a_failed_restart_is_tried_again_after_the_backoff() -> None:
    cluster = FakeCluster()
    sup, out = supervisor(cluster)
    cluster.running.discard(1)
    cluster.fail_start = True
    sup.poll(now=0.0)
    sup.poll(now=RESTART_BACKOFF_S)
    assert "broker 1 did not start (restart 1 of 3): port in use" in out.getvalue()
    cluster.fail_start = False
    sup.poll(now=RESTART_BACKOFF_S + 0.1)  # the back-off starts again from the failure
    assert cluster.started == []
    sup.poll(now=10 * RESTART_BACKOFF_S)
    assert cluster.started == [1]


def test_commands_kill_stop_and_start_brokers_without_counting_as_failures() -> None:
    cluster = FakeCluster()
    sup, out = supervisor(cluster)
    assert sup.command("kill 1\n")
    sup.poll(now=0.0)
    sup.poll(now=100.0)
    assert cluster.started == [] and not sup.any_failed  # asked for: no restart
    assert sup.command("stop 2")
    assert sup.command("status")
    text = out.getvalue()
    assert "broker 0: running, pid 100; restarts 0; 127.0.0.1:9000" in text
    assert "broker 1: down; restarts 0; 127.0.0.1:9001" in text
    assert sup.command("start 1") and sup.command("restart 2")
    assert cluster.started == [1, 2] and sup.down() == []
    assert sup.command("restart 0")  # running: stopped first, then started
    assert cluster.started == [1, 2, 0]
    assert not sup.command("quit")


def test_bad_commands_are_answered_not_obeyed() -> None:
    cluster = FakeCluster()
    sup, out = supervisor(cluster)
    for line in ("kill", "kill 7", "kill x", "frobnicate 1", "start 1 2", ""):
        assert sup.command(line)
    text = out.getvalue()
    assert "no broker '7'; brokers are [0, 1, 2]" in text
    assert "unknown command 'frobnicate 1'; try 'help'" in text
    assert cluster.running == {0, 1, 2} and cluster.started == []
    assert sup.command("help")
    assert "kill N" in out.getvalue()
