"""A chaos run: one :class:`ChaosCluster`, then one round per fault.

A round creates its own topic (``chaos-<fault>``: ``partitions`` partitions, three
replicas, ``min.insync.replicas`` = 2, small segments), waits until every partition is
led with its whole ISR, starts the writers and a tailing reader, and waits until every
partition has acknowledged writes. For ``duration_s``
it then repeats: a quiet spell, inject the fault, hold it, heal it, and wait until the
cluster is whole again (every broker and ZooKeeper up, every ISR full). Then the writers
stop and wait for their outstanding sends, every partition is read from its start to
its high watermark, and the checker judges the round's history.

Everything random (victims, hold and quiet times, which byte to flip) comes from one
``random.Random(seed)``; the timing of a real cluster does not repeat, so a seed repeats
the choices, not the outcome.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sluice.testing.chaos.checker import check
from sluice.testing.chaos.clients import TailReader, Writer, read_all
from sluice.testing.chaos.cluster import ChaosCluster, can_mount_tmpfs
from sluice.testing.chaos.faults import FAULTS, Fault, FaultContext
from sluice.testing.chaos.history import History
from sluice.testing.chaos.report import FaultReport

__all__ = ["BROKER_SETTINGS", "ChaosConfig", "run_chaos"]

BROKER_SETTINGS: dict[str, Any] = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 5000,
    "leader.imbalance.check.interval.seconds": 5,
    "unclean.leader.election.enable": False,
    "offsets.topic.num.partitions": 1,
}
"""Broker settings of a chaos cluster: failures are noticed within seconds, and
leadership goes back to preferred replicas soon after they return."""


@dataclass
class ChaosConfig:
    """What a run does; the defaults are the short run."""

    faults: list[str] = field(default_factory=lambda: list(FAULTS))
    duration_s: float = 20.0
    """How long each fault's round injects faults."""
    seed: int = 0
    brokers: int = 3
    partitions: int = 6
    writers: int = 2
    rate_per_s: float = 100.0
    """Values each writer sends per second, over all partitions."""
    value_size: int = 100
    hold_s: tuple[float, float] = (2.0, 8.0)
    """A fault is held for a random time in this range."""
    quiet_s: tuple[float, float] = (1.0, 3.0)
    """The cluster runs without a fault for a random time in this range before each."""
    recovery_timeout_s: float = 90.0
    segment_bytes: int = 64 * 1024
    disk_mb: int | None = None
    """The size of each broker's own tmpfs for the disk-full fault (None: 256 MiB when
    disk-full is among the faults and this process may mount one)."""
    keep_data: bool = False
    """Leave the cluster's data directory (broker logs, partitions) behind."""


def run_chaos(
    config: ChaosConfig,
    say: Callable[[str], None] = print,
    cluster: ChaosCluster | None = None,
) -> list[FaultReport]:
    """Run every fault of ``config`` in turn on one cluster, a new one unless ``cluster``
    (started, with :data:`BROKER_SETTINGS`) is given; ``say`` gets progress lines."""
    unknown = [f for f in config.faults if f not in FAULTS]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    started = time.monotonic()

    def log(text: str) -> None:
        say(f"[{time.monotonic() - started:7.1f}s] {text}")

    if cluster is not None:
        return _rounds(cluster, config, log)
    disk_mb = config.disk_mb
    if "disk-full" in config.faults and disk_mb is None and can_mount_tmpfs() is None:
        disk_mb = 256
    log(f"starting ZooKeeper and {config.brokers} brokers (seed {config.seed})")
    own = ChaosCluster(
        config.brokers, overrides=dict(BROKER_SETTINGS), disk_mb=disk_mb,
        keep_data=config.keep_data,
    )  # fmt: skip
    with own:
        reports = _rounds(own, config, log)
    if config.keep_data:
        mounted = " (its tmpfs disks stay mounted)" if disk_mb is not None else ""
        log(f"data kept in {own.cluster.data_dir}{mounted}")
    return reports


def _rounds(
    cluster: ChaosCluster, config: ChaosConfig, log: Callable[[str], None]
) -> list[FaultReport]:
    rng = random.Random(config.seed)
    reports: list[FaultReport] = []
    for name in config.faults:
        fault = FAULTS[name]()
        report = FaultReport(name)
        reports.append(report)
        why = fault.unavailable(cluster)
        if why is not None:
            cannot_mount = can_mount_tmpfs()
            report.skipped = why if cannot_mount is None else f"{why}: {cannot_mount}"
            log(f"{name}: skipped ({report.skipped})")
            continue
        try:
            _round(cluster, fault, config, rng, report, log)
        except Exception as exc:
            report.error = f"{type(exc).__name__}: {exc}"
            log(f"{name}: error: {report.error}")
        log(f"{name}: {report.verdict}")
    return reports


def _round(
    cluster: ChaosCluster,
    fault: Fault,
    config: ChaosConfig,
    rng: random.Random,
    report: FaultReport,
    log: Callable[[str], None],
) -> None:
    from sluice.client import Admin, KafkaException, NewTopic

    topic = f"chaos-{fault.name}"
    ctx = FaultContext(cluster, topic, config.partitions, rng)
    _recover(ctx, report, log, config.recovery_timeout_s, topic=None)
    topic_config = {"min.insync.replicas": "2", "segment.bytes": str(config.segment_bytes)}
    new_topic = NewTopic(topic, config.partitions, 3, config=topic_config)

    def created() -> bool:
        """Create the topic (again after a lost connection: the last fault may have left
        the controller moving); True once ZooKeeper has it."""
        if cluster.partition_states(topic):
            return True
        with (
            contextlib.suppress(KafkaException),
            Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin,
        ):
            admin.create_topics([new_topic])
        return bool(cluster.partition_states(topic))

    _wait(created, 60, f"{topic} created")
    _wait(lambda: cluster.whole(topic, config.partitions), 60, f"{topic} fully replicated")

    history = History()
    ids = itertools.count()
    writers = [
        Writer(cluster.bootstrap_servers, topic, config.partitions, history, ids,
               rate_per_s=config.rate_per_s, value_size=config.value_size).start()
        for _ in range(config.writers)
    ]  # fmt: skip
    reader = TailReader(cluster.bootstrap_servers, topic, config.partitions, history).start()
    # Faults begin once every partition holds acknowledged data (something to corrupt).
    _wait(
        lambda: len({a.write.partition for a in list(history.acks)}) == config.partitions,
        60, "acknowledgements from every partition",
    )  # fmt: skip
    began = time.monotonic()
    injected = False
    try:
        while True:
            time.sleep(rng.uniform(*config.quiet_s))
            if time.monotonic() - began >= config.duration_s:
                break
            at = time.monotonic() - began
            injected = True
            done = fault.inject(ctx)
            report.injected += 1
            history.record_fault(at, done)
            log(f"{fault.name}: {done}")
            time.sleep(rng.uniform(*config.hold_s))
            done = fault.heal(ctx)
            injected = False
            history.record_fault(time.monotonic() - began, done)
            log(f"{fault.name}: {done}")
            _recover(ctx, report, log, config.recovery_timeout_s, topic=topic)
    finally:
        if injected:  # an error came between inject and heal
            with contextlib.suppress(Exception):
                fault.heal(ctx)
        _recover(ctx, report, log, config.recovery_timeout_s, topic=topic)
        pending = sum(w.stop() for w in writers)
        reader.stop()
    if pending:
        report.notes.append(f"{pending} sends still pending at the end (indeterminate)")
    fatal = [e for w in writers for e in w.fatal_errors]
    if fatal:
        report.notes.append(f"producers replaced after fatal errors: {fatal[:3]}")
    log(f"{fault.name}: reading every partition back")
    read_all(cluster.bootstrap_servers, topic, config.partitions, history)
    report.result = check(history)


def _recover(
    ctx: FaultContext,
    report: FaultReport,
    log: Callable[[str], None],
    timeout_s: float,
    topic: str | None,
) -> None:
    """Undo whatever is still broken (a cut, a paused or dead broker, ZooKeeper down),
    noting what was not expected, then wait until the cluster is whole."""
    cluster = ctx.cluster
    cluster.proxy.heal_all()
    for b in cluster.broker_ids:
        if cluster.is_paused(b):
            cluster.cluster.resume(b)
    zookeeper = cluster.cluster.zookeeper
    if zookeeper is not None and not zookeeper.running:
        cluster.cluster.restart_zookeeper()
    for b in cluster.broker_ids:
        if not cluster.cluster.is_running(b):
            status = cluster.cluster.exit_status(b)
            note = f"broker {b} was down ({status}) after the fault was healed; started it"
            report.notes.append(note)
            log(f"{report.fault}: {note}")
            try:
                cluster.cluster.start(b)
            except (RuntimeError, TimeoutError, OSError) as exc:
                report.notes.append(f"broker {b} did not start: {exc}")
    if topic is None:
        _wait(lambda: _brokers_ready(cluster), timeout_s, "every broker registered")
        return
    deadline = time.monotonic() + timeout_s
    while not cluster.whole(topic, ctx.partitions):
        if time.monotonic() > deadline:
            states = cluster.partition_states(topic)
            note = f"not whole {timeout_s:g}s after a heal: {states}"
            report.notes.append(note)
            log(f"{report.fault}: {note}")
            return
        time.sleep(0.2)


def _brokers_ready(cluster: ChaosCluster) -> bool:
    try:
        cluster.cluster.wait_ready(timeout_s=0)
    except (TimeoutError, OSError):
        return False
    return True


def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.2)
