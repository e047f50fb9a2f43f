"""``sluice chaos``, short, on one chaos cluster: its proxy wiring, the clients alone, one
injection of every fault (no violation may be found), and last a planted data loss that
the checker must find. The long run is scripts/run-chaos.sh (docs/chaos.md)."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator

import pytest

from sluice.client import Admin, NewTopic
from sluice.testing.chaos import ChaosConfig, History, check, format_report, run_chaos
from sluice.testing.chaos.clients import Writer, read_all
from sluice.testing.chaos.cluster import ZOOKEEPER, ChaosCluster, broker_party, can_mount_tmpfs
from sluice.testing.chaos.faults import FAULTS, Fault, FaultContext
from sluice.testing.chaos.run import BROKER_SETTINGS
from support.waiting import wait_until
from support.zookeeper import require_zookeeper

# Segments larger than a round writes: the corrupt fault then flips a byte of the active
# segment, above every recovery point, where recovery finds it (docs/chaos.md: a flip
# below a recovery point is the known limit the long run reports).
SHORT = ChaosConfig(
    duration_s=1, hold_s=(1.0, 1.5), quiet_s=(0.3, 0.6), seed=1, segment_bytes=64 << 20
)


@pytest.fixture(scope="module")
def chaos_cluster() -> Iterator[ChaosCluster]:
    """One cluster for the module; its brokers' disks are small filesystems of their own
    when this process may mount them (root), for the disk-full fault."""
    require_zookeeper()
    disk_mb = 256 if can_mount_tmpfs() is None else None
    with ChaosCluster(3, overrides=dict(BROKER_SETTINGS), disk_mb=disk_mb) as cluster:
        yield cluster


def test_brokers_reach_each_other_and_zookeeper_through_the_proxy(
    chaos_cluster: ChaosCluster,
) -> None:
    cluster = chaos_cluster
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("wired", 3, 3, config={"min.insync.replicas": "2"})])
    wait_until(lambda: cluster.whole("wired", 3), 30, "wired fully replicated")

    def wired() -> bool:
        """Each broker has its own way to ZooKeeper, and reaches the other brokers (as a
        follower fetching from their leaders) as a broker, not as a client."""
        seen = set(cluster.proxy.identified)
        return all(
            (broker_party(b), ZOOKEEPER) in seen
            and all(
                (broker_party(b), broker_party(o)) in seen for o in cluster.broker_ids if o != b
            )
            for b in cluster.broker_ids
        )

    wait_until(wired, 30, "connections between every two brokers")
    # Cut a broker other than the controller from the other brokers, every partition led
    # by its preferred replica: followers stop fetching from it and it from them, so every
    # partition's ISR loses someone (its leader drops whoever cannot fetch). (A controller
    # cut from the brokers could not tell them of its elections, as in Kafka: partitions it
    # moved would wait for the heal.)
    victim = next(b for b in cluster.broker_ids if b != cluster.controller_id())
    for b in cluster.broker_ids:
        if b != victim:
            cluster.proxy.cut(broker_party(victim), broker_party(b))
    wait_until(
        lambda: (states := cluster.partition_states("wired"))
        and all(len(s.isr) < 3 for s in states.values()), 30, "every ISR shrunk",
    )  # fmt: skip
    cluster.proxy.heal_all()
    wait_until(lambda: cluster.whole("wired", 3), 60, "wired whole again")
    # Cut the controller from ZooKeeper: its session lapses and another takes over.
    controller = cluster.controller_id()
    cluster.proxy.cut(broker_party(controller), ZOOKEEPER)
    wait_until(lambda: cluster.controller_id() not in (-1, controller), 30, "a new controller")
    cluster.proxy.heal_all()
    wait_until(lambda: cluster.whole("wired", 3), 60, "wired whole again")


def test_writer_and_final_read_on_a_plain_cluster(chaos_cluster: ChaosCluster) -> None:
    """The clients alone: every acknowledged value read back once, in order."""
    cluster = chaos_cluster
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("plain", 2, 3)])
    wait_until(lambda: cluster.whole("plain", 2), 30, "plain fully replicated")
    history = History()
    writer = Writer(cluster.bootstrap_servers, "plain", 2, history, itertools.count(),
                    rate_per_s=500).start()  # fmt: skip
    wait_until(lambda: history.acked_count >= 200, 30, "200 acknowledgements")
    assert writer.stop() == 0
    read_all(cluster.bootstrap_servers, "plain", 2, history)
    result = check(history)
    assert result.ok, result.anomalies
    assert result.acked == len(history.sent) == result.final_records


def test_a_short_run_of_every_fault_finds_no_violation(chaos_cluster: ChaosCluster) -> None:
    lines: list[str] = []
    reports = run_chaos(SHORT, lines.append, chaos_cluster)
    report = format_report(reports)
    print("\n".join(lines) + "\n" + report)
    assert [r.fault for r in reports] == list(FAULTS)
    for r in reports:
        assert r.verdict in ("ok", "skipped"), report
        if r.verdict == "ok":
            assert r.injected >= 1 and r.result is not None and r.result.acked > 0, report
    assert not any(r.failed for r in reports)


class WipePartition(Fault):
    """Data loss on purpose: every broker is killed and partition 0's directory deleted
    on each before they start again, so what was acknowledged there is gone."""

    name = "wipe"

    def inject(self, ctx: FaultContext) -> str:
        for b in ctx.cluster.broker_ids:
            ctx.cluster.cluster.kill(b)
        for b in ctx.cluster.broker_ids:
            shutil.rmtree(ctx.cluster.log_dir(b) / f"{ctx.topic}-0", ignore_errors=True)
        return "wiped partition 0 on every broker"

    def heal(self, ctx: FaultContext) -> str:
        for b in ctx.cluster.broker_ids:
            ctx.cluster.cluster.start(b)
        return "started every broker"


def test_the_checker_finds_a_wiped_partition(
    chaos_cluster: ChaosCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(FAULTS, "wipe", WipePartition)
    config = ChaosConfig(
        faults=["wipe"], duration_s=1.5, hold_s=(0.5, 0.5), quiet_s=(1.0, 1.0), partitions=2
    )  # fmt: skip
    [report] = run_chaos(config, print, chaos_cluster)
    print(format_report([report]))
    assert report.verdict == "VIOLATION" and report.failed
    assert report.result is not None
    lost = report.result.of_kind("lost")
    assert lost and {a.partition for a in lost} == {0}
    assert report.result.count("vanished") > 0  # the tailing consumer had read them
