"""The replica manager over several log dirs, one of which fails (Kafka's
``ReplicaManager.handleLogDirFailure``): its partitions answer KAFKA_STORAGE_ERROR to
produce and fetch, their waiting requests are answered at once, the other dir's
partitions serve on, and each dir keeps its own replication-offset-checkpoint, which a
failed write never tears. Real logs, purgatories on a manual clock, injected I/O errors
(``support.disk_faults``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_replica_manager import batch, fetch_params

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.log import LogConfig, LogManager
from sluice.protocol import ErrorCode
from sluice.purgatory import DelayedOperationPurgatory
from sluice.replication.replica_manager import (
    HIGH_WATERMARK_CHECKPOINT,
    PartitionFetch,
    ReplicaManager,
)
from support.disk_faults import DiskFaults

A0, A1 = TopicPartition("t", 0), TopicPartition("t", 2)  # in dir a
B0, B1 = TopicPartition("t", 1), TopicPartition("t", 3)  # in dir b


class Broker:
    """A log manager over dirs a and b with four partitions, two in each, and a replica
    manager sharing its failure channel; a failed dir is handled as a broker does."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = ManualClock(0)
        self.dirs = [tmp_path / "a", tmp_path / "b"]
        self.purgatories: list[Any] = []

        def make(name: str, purge_interval: int) -> Any:
            p = DelayedOperationPurgatory(
                name, purge_interval=purge_interval, reaper_enabled=False, clock=self.clock
            )
            self.purgatories.append(p)
            return p

        self.logs = LogManager(self.dirs, LogConfig(), clock=self.clock)
        self.rm = ReplicaManager(0, make, log_dir_failure_channel=self.logs.failure_channel)
        self.rm.load_high_watermarks(self.dirs)
        self.failed: list[Path] = []
        self.logs.failure_channel.on_offline = self.failed.append
        self.told: list[tuple[Path, list[TopicPartition]]] = []
        self.rm.on_log_dir_failure = lambda d, tps: self.told.append((d, tps))
        for tp in (A0, B0, A1, B1):
            self.rm.add_partition(tp, self.logs.get_or_create_log(tp.topic, tp.partition), [0])
        assert {tp: self.rm.partitions[tp].log.dir.parent for tp in (A0, A1, B0, B1)} == {
            A0: self.dirs[0],
            A1: self.dirs[0],
            B0: self.dirs[1],
            B1: self.dirs[1],
        }

    def handle_failures(self) -> None:
        """What the broker's event loop does with each dir the channel reported."""
        while self.failed:
            failed = self.failed.pop(0)
            self.logs.handle_log_dir_failure(failed)
            self.rm.handle_log_dir_failure(failed)

    def produce(self, tp: TopicPartition, acks: int = 1) -> list[Any]:
        out: list[Any] = []
        self.rm.append_records(1000, acks, {tp: batch(b"v")}, out.append)
        return out


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    yield b
    b.rm.shutdown()
    b.logs.shutdown()


def test_a_full_dir_answers_storage_errors_and_the_other_serves(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for tp in (A0, A1, B0, B1):
        assert broker.produce(tp)[0][tp].error == ErrorCode.none
    broker.rm.partitions[A1].isr = {0, 1}  # an acks=all produce waits for a follower
    broker.rm.partitions[A1].replica_leos[1] = 1
    waiting = broker.produce(A1, acks=-1)
    assert waiting == []
    parked: list[Any] = []
    broker.rm.fetch_messages(fetch_params(), [PartitionFetch(A0, 1, 1 << 20)], parked.append)
    assert parked == []
    faults = DiskFaults(monkeypatch, broker.dirs[0]).arm()
    with caplog.at_level(logging.WARNING):
        out = broker.produce(A0)  # ENOSPC: answered, not raised
        assert out[0][A0].error == ErrorCode.kafka_storage_error
        assert broker.failed == [broker.dirs[0]]
        broker.handle_failures()
        for _ in range(3):
            for tp in (A0, A1):
                assert broker.produce(tp)[0][tp].error == ErrorCode.kafka_storage_error
    assert faults.failures == 1  # the failed dir is not written again
    assert broker.told == [(broker.dirs[0], [A0, A1])]
    assert waiting[0][A1].error == ErrorCode.kafka_storage_error  # answered at once
    assert parked[0][0][1].error == ErrorCode.kafka_storage_error
    fetched: list[Any] = []
    broker.rm.fetch_messages(fetch_params(), [PartitionFetch(A0, 0, 1 << 20)], fetched.append)
    assert fetched[0][0][1].error == ErrorCode.kafka_storage_error
    for tp in (B0, B1):  # the other dir serves on
        assert broker.produce(tp)[0][tp].error == ErrorCode.none
        fetched.clear()
        broker.rm.fetch_messages(fetch_params(), [PartitionFetch(tp, 0, 1 << 20)], fetched.append)
        assert fetched[0][0][1].error == ErrorCode.none and fetched[0][0][1].records.size
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 2, errors  # the dir, and its logs taken offline
    assert "ENOSPC" in errors[0] and str(broker.dirs[0]) in errors[0]


def test_each_dir_checkpoints_its_high_watermarks(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    for tp in (A0, A1, B0):
        broker.produce(tp)
    broker.rm.checkpoint_high_watermarks()
    a, b = (d / HIGH_WATERMARK_CHECKPOINT for d in broker.dirs)
    assert a.read_text().split() == ["0", "2", "t", "0", "1", "t", "2", "1"]
    assert b.read_text().split() == ["0", "2", "t", "1", "1", "t", "3", "0"]
    for tp in (A0, B1):
        broker.produce(tp)
    hws = broker.rm.high_watermarks_to_checkpoint()
    assert hws is not None and set(hws) == set(broker.dirs)
    a_before = a.read_bytes()
    faults = DiskFaults(monkeypatch, broker.dirs[0]).arm(budget=5)  # a short write, then none
    broker.rm.write_high_watermarks(hws)
    assert faults.failures == 1 and broker.failed == [broker.dirs[0]]
    assert a.read_bytes() == a_before and not a.with_name(a.name + ".tmp").exists()
    assert b.read_text().split() == ["0", "2", "t", "1", "1", "t", "3", "1"]
    broker.handle_failures()
    broker.produce(B0)
    assert broker.rm.high_watermarks_to_checkpoint() == {broker.dirs[1]: {("t", 1): 2, ("t", 3): 1}}

    restarted = ReplicaManager(0, lambda name, interval: broker.purgatories[0])
    restarted.load_high_watermarks(broker.dirs)
    assert restarted._restored_hws == {("t", 0): 1, ("t", 2): 1, ("t", 1): 1, ("t", 3): 1}
