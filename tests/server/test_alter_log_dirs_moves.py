"""Moving a replica between log dirs (AlterReplicaLogDirs): the pure step function
against a reference model with appends, truncations, log-start moves and replaced
histories; the log manager's future logs (creation, placement, the swap, a stop mid-move
and between the swap's renames); and the ReplicaAlterLogDirsManager catching a future
log up on its worker thread while the event loop appends."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.base import TopicPartition
from sluice.log import LogConfig, LogManager
from sluice.log.errors import KafkaStorageException
from sluice.log.manager import CAUGHT_UP_FILE, LogDirNotFoundException, future_log_base_name
from sluice.purgatory import DelayedOperationPurgatory
from sluice.replication.alter_log_dirs import LogPosition, MoveStep, StepKind, next_step
from sluice.replication.replica_manager import ReplicaManager
from sluice.server.replica_alter_log_dirs import ReplicaAlterLogDirsManager
from support.records import build_batch, values_of

TP = TopicPartition("t", 0)


# -- the step function ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "future", "expected"),
    [
        # a new, empty future log starts where the current log starts
        (LogPosition(5, 9), LogPosition(0, 0), MoveStep(StepKind.RESTART, 5)),
        (LogPosition(0, 9), LogPosition(0, 0), MoveStep(StepKind.COPY, 0)),
        (LogPosition(0, 9, 1), LogPosition(0, 4, 1), MoveStep(StepKind.COPY, 4)),
        (LogPosition(0, 9, 2), LogPosition(0, 9, 2), MoveStep(StepKind.SWAP, 0)),
        (LogPosition(3, 9, 2), LogPosition(0, 9, 2), MoveStep(StepKind.SWAP, 3)),
        (LogPosition(0, 0), LogPosition(0, 0), MoveStep(StepKind.SWAP, 0)),
        # the current log was truncated below the future log's end
        (LogPosition(0, 4, 1), LogPosition(0, 7), MoveStep(StepKind.TRUNCATE, 4)),
        (LogPosition(0, 2), LogPosition(3, 7), MoveStep(StepKind.RESTART, 0)),
        # retention moved the current log's start past what the future log holds
        (LogPosition(8, 9), LogPosition(0, 6), MoveStep(StepKind.RESTART, 8)),
        # the two disagree on the epoch of the future log's last offset
        (LogPosition(0, 9, 3), LogPosition(0, 6, 2), MoveStep(StepKind.RESTART, 0)),
    ],
)
def test_next_step(current: LogPosition, future: LogPosition, expected: MoveStep) -> None:
    assert next_step(current, future) == expected


@dataclass
class ModelLog:
    """offset -> (epoch, value); holds [start, end)."""

    start: int = 0
    end: int = 0
    records: dict[int, tuple[int, int]] = field(default_factory=dict)

    def epoch(self, offset: int) -> int | None:
        held = self.records.get(offset)
        return None if held is None or offset < self.start else held[0]

    def truncate(self, offset: int) -> None:
        self.records = {o: r for o, r in self.records.items() if o < offset}
        self.end = offset
        self.start = min(self.start, offset)

    def restart(self, offset: int) -> None:
        self.records, self.start, self.end = {}, offset, offset


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4)),
        st.tuples(st.just("truncate"), st.integers(0, 6)),
        st.tuples(st.just("delete_records"), st.integers(0, 6)),
        st.tuples(st.just("new_epoch"), st.just(0)),
        st.tuples(st.just("step"), st.integers(1, 3)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_a_future_log_swapped_in_holds_what_the_current_log_holds(ops: list[Any]) -> None:
    """Whatever happens to the current log (appends, truncations as a follower's, after
    which it holds a later leader's records, its start moved, a new leader epoch),
    following the steps gives a future log that, when
    the step is SWAP, holds exactly the current log's records from its start."""
    current, future = ModelLog(), ModelLog()
    epoch, value = 0, 0
    swaps = 0
    for kind, arg in [*ops, ("step", 100)]:
        if kind == "append":
            for _ in range(arg):
                current.records[current.end] = (epoch, value)
                current.end += 1
                value += 1
        elif kind == "truncate":  # a follower cut back: what follows is a new leader's
            current.truncate(max(current.start, current.end - arg))
            epoch += 1
        elif kind == "delete_records":
            current.start = min(current.end, current.start + arg)
        elif kind == "new_epoch":
            epoch += 1
        else:
            for _ in range(arg):
                last = future.end - 1
                step = next_step(
                    LogPosition(current.start, current.end, current.epoch(last)),
                    LogPosition(future.start, future.end, future.epoch(last)),
                )
                if step.kind is StepKind.SWAP:
                    start = max(future.start, step.offset)
                    held = {o: r for o, r in future.records.items() if o >= start}
                    assert future.end == current.end
                    assert held == {o: r for o, r in current.records.items() if o >= start}
                    assert start == current.start
                    swaps += 1
                    break
                if step.kind is StepKind.COPY:
                    assert step.offset == future.end
                    for o in range(step.offset, min(step.offset + 2, current.end)):
                        future.records[o] = current.records[o]
                        future.end = o + 1
                elif step.kind is StepKind.TRUNCATE:
                    future.truncate(step.offset)
                else:
                    future.restart(step.offset)
    assert swaps >= 1  # the last 100 steps, with no append between, always end in a swap


# -- the log manager's future logs ------------------------------------------------------


def _append(log: Any, *values: bytes, epoch: int = 0) -> None:
    log.append_as_leader(build_batch(list(values)), epoch)


def _values(log: Any) -> list[tuple[int, bytes | None]]:
    data = log.read(log.log_start_offset, 1 << 30)
    return values_of(data.records.read())


def _two_dirs(tmp_path: Path) -> tuple[LogManager, Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    return LogManager([a, b], LogConfig()), a, b


def _copy(manager: LogManager) -> None:
    current, future = manager.logs[TP], manager.future_logs[TP]
    data = current.read(future.log_end_offset, 1 << 30)
    future.append_as_follower(data.records.read())


def test_a_future_log_is_made_in_the_target_dir_and_swapped_in(tmp_path: Path) -> None:
    manager, a, b = _two_dirs(tmp_path)
    log = manager.get_or_create_log("t", 0)
    assert log.dir.parent == a
    _append(log, b"x", b"y")
    assert manager.create_future_log(TP, a) is None  # already there
    future = manager.create_future_log(TP, b)
    assert future is not None and future.dir.parent == b
    assert future_log_base_name(future.dir.name) == "t-0"
    assert manager.create_future_log(TP, b) is future
    _copy(manager)
    _append(log, b"z", epoch=1)  # an append during the copy
    with pytest.raises(ValueError, match="ends at 2"):
        manager.replace_current_with_future_log(TP)
    _copy(manager)
    moved = manager.replace_current_with_future_log(TP)
    assert moved.dir == b / "t-0" and manager.logs[TP] is moved and not manager.future_logs
    assert _values(moved) == [(0, b"x"), (1, b"y"), (2, b"z")]
    assert moved.leader_epoch_of(2) == 1
    assert not (a / "t-0").exists()
    assert sorted(os.listdir(b)) == [".lock", "t-0"]
    manager.shutdown()


def test_the_swap_raises_the_future_logs_start(tmp_path: Path) -> None:
    manager, _, b = _two_dirs(tmp_path)
    log = manager.get_or_create_log("t", 0)
    _append(log, b"1", b"2", b"3")
    manager.create_future_log(TP, b)
    _copy(manager)
    log.maybe_increment_log_start_offset(2)  # DeleteRecords during the move
    moved = manager.replace_current_with_future_log(TP)
    assert moved.log_start_offset == 2
    assert [(o, v) for o, v in _values(moved) if o >= 2] == [(2, b"3")]  # whole batches
    manager.shutdown()


def test_a_move_stopped_midway_is_found_at_the_next_start(tmp_path: Path) -> None:
    manager, a, b = _two_dirs(tmp_path)
    _append(manager.get_or_create_log("t", 0), b"x", b"y")
    manager.create_future_log(TP, b)
    _copy(manager)
    manager.shutdown()
    again = LogManager([a, b], LogConfig())
    assert again.logs[TP].dir == a / "t-0"
    future = again.future_logs[TP]
    assert future.dir.parent == b and future.log_end_offset == 2
    assert again.replace_current_with_future_log(TP).dir == b / "t-0"
    again.shutdown()


def test_a_stop_between_the_swaps_renames_completes_the_swap(tmp_path: Path) -> None:
    manager, a, b = _two_dirs(tmp_path)
    _append(manager.get_or_create_log("t", 0), b"x", b"y")
    future = manager.create_future_log(TP, b)
    assert future is not None
    _copy(manager)
    manager.shutdown()
    (future.dir / CAUGHT_UP_FILE).touch()  # the swap's first step
    os.replace(a / "t-0", a / "t-0.0123456789abcdef0123456789abcdef-delete")  # its second
    again = LogManager([a, b], LogConfig())
    assert again.logs[TP].dir == b / "t-0" and not again.future_logs
    assert _values(again.logs[TP]) == [(0, b"x"), (1, b"y")]
    assert sorted(os.listdir(a)) == [".lock"]
    assert CAUGHT_UP_FILE not in os.listdir(b / "t-0")
    again.shutdown()


def test_a_future_log_not_caught_up_stays_one_when_its_current_log_is_missing(
    tmp_path: Path,
) -> None:
    """The source dir offline at start: its current log is missing, and the future log,
    which may hold less, is not taken for it."""
    manager, a, b = _two_dirs(tmp_path)
    _append(manager.get_or_create_log("t", 0), b"x", b"y")
    manager.create_future_log(TP, b)
    manager.shutdown()
    os.replace(a / "t-0", tmp_path / "elsewhere")  # the current log is not found
    again = LogManager([a, b], LogConfig())
    assert TP not in again.logs and TP in again.future_logs
    again.shutdown()


def test_a_stale_caught_up_mark_beside_the_current_log_is_removed(tmp_path: Path) -> None:
    manager, a, b = _two_dirs(tmp_path)
    _append(manager.get_or_create_log("t", 0), b"x")
    future = manager.create_future_log(TP, b)
    assert future is not None
    manager.shutdown()
    (future.dir / CAUGHT_UP_FILE).touch()  # stopped after the mark, before the renames
    again = LogManager([a, b], LogConfig())
    assert again.logs[TP].dir == a / "t-0" and TP in again.future_logs
    assert CAUGHT_UP_FILE not in os.listdir(future.dir)
    again.shutdown()


def test_new_logs_go_to_the_dir_with_fewest_logs_counting_future_logs(tmp_path: Path) -> None:
    manager, a, b = _two_dirs(tmp_path)
    manager.get_or_create_log("t", 0)  # a
    manager.create_future_log(TP, b)  # b holds one future log
    assert manager.new_log_dirs("u", [0, 1, 2]) == {0: a / "u-0", 1: b / "u-1", 2: a / "u-2"}
    manager.abort_future_log(TP)
    assert sorted(os.listdir(b)) == [".lock"]
    assert manager.new_log_dirs("u", [0]) == {0: b / "u-0"}
    manager.maybe_update_preferred_log_dir(TopicPartition("u", 0), a)
    assert manager.new_log_dirs("u", [0]) == {0: a / "u-0"}
    manager.shutdown()


def test_log_dirs_are_named_by_absolute_path(tmp_path: Path) -> None:
    manager, a, _ = _two_dirs(tmp_path)
    assert manager.log_dir_of(str(a)) == a
    assert manager.log_dir_of(f"{a}/../a/") == a
    with pytest.raises(LogDirNotFoundException):
        manager.log_dir_of(str(tmp_path / "c"))
    manager.failure_channel.maybe_add_offline_log_dir(a, "testing", OSError(5, "EIO"))
    manager.handle_log_dir_failure(a)
    with pytest.raises(KafkaStorageException, match="offline"):
        manager.log_dir_of(str(a))
    manager.shutdown()


def test_no_future_log_while_a_dir_is_offline(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    manager = LogManager([a, b, c], LogConfig())
    manager.get_or_create_log("t", 0)
    manager.failure_channel.maybe_add_offline_log_dir(c, "testing", OSError(5, "EIO"))
    manager.handle_log_dir_failure(c)
    with pytest.raises(KafkaStorageException, match="are offline"):
        manager.create_future_log(TP, b)
    manager.shutdown()


# -- the manager: a move while the event loop appends ----------------------------------


def _replica_manager() -> ReplicaManager:
    def make(name: str, purge_interval: int) -> Any:
        return DelayedOperationPurgatory(name, purge_interval=purge_interval, reaper_enabled=False)

    return ReplicaManager(0, make)


def test_a_move_under_appends_keeps_every_record_and_offset(tmp_path: Path) -> None:
    manager, a, b = _two_dirs(tmp_path)
    rm = _replica_manager()
    partition = rm.add_partition(TP, manager.get_or_create_log("t", 0), [0])
    for i in range(200):
        _append(partition.log, *(b"%d-%d" % (i, j) for j in range(50)))
    before = _values(partition.log)
    old = partition.log
    swapped: list[Any] = []

    async def run() -> int:
        moves = ReplicaAlterLogDirsManager(manager, rm, before_swap=swapped.append)
        manager.create_future_log(TP, b)
        moves.add(TP)
        appended = 0
        while TP in manager.future_logs:
            _append(partition.log, b"during-%d" % appended)
            appended += 1
            await asyncio.sleep(0)
        await moves.stop()
        return appended

    appended = asyncio.run(run())
    assert appended > 0
    assert swapped == [old] and old.is_closed  # told (to stop compacting it), then closed
    assert partition.log is manager.logs[TP] and partition.log.dir == b / "t-0"
    after = _values(partition.log)
    assert after[: len(before)] == before
    assert after[len(before) :] == [(len(before) + i, b"during-%d" % i) for i in range(appended)]
    assert not (a / "t-0").exists()
    manager.shutdown()


def test_a_partition_deleted_mid_move_ends_the_move(tmp_path: Path) -> None:
    manager, _, b = _two_dirs(tmp_path)
    rm = _replica_manager()
    partition = rm.add_partition(TP, manager.get_or_create_log("t", 0), [0])
    for i in range(100):
        _append(partition.log, *(b"%d" % i for _ in range(100)))

    async def run() -> None:
        moves = ReplicaAlterLogDirsManager(manager, rm)
        manager.create_future_log(TP, b)
        moves.add(TP)
        await asyncio.sleep(0.01)
        rm.remove_partition(TP)
        manager.delete_log("t", 0)
        await asyncio.sleep(0.05)
        assert moves.moving == []
        await moves.stop()

    asyncio.run(run())
    assert sorted(os.listdir(b)) == [".lock"]
    manager.shutdown()


def test_a_move_found_at_start_up_is_resumed_once_the_partition_is_hosted(
    tmp_path: Path,
) -> None:
    manager, a, b = _two_dirs(tmp_path)
    for i in range(50):
        _append(manager.get_or_create_log("t", 0), *(b"%d" % i for _ in range(20)))
    manager.create_future_log(TP, b)
    manager.shutdown()  # stopped before any copy
    again = LogManager([a, b], LogConfig())
    rm = _replica_manager()

    async def run() -> None:
        moves = ReplicaAlterLogDirsManager(again, rm)
        moves.start()
        await asyncio.sleep(0.05)
        assert TP in again.future_logs  # not hosted yet: it waits
        rm.add_partition(TP, again.logs[TP], [0])
        for _ in range(100):
            if TP not in again.future_logs:
                break
            await asyncio.sleep(0.02)
        await moves.stop()

    asyncio.run(run())
    assert again.logs[TP].dir == b / "t-0" and rm.partitions[TP].log is again.logs[TP]
    assert again.logs[TP].log_end_offset == 1000
    again.shutdown()


def test_a_failed_target_dir_ends_the_move_and_the_partition_serves_on(tmp_path: Path) -> None:
    manager, _, b = _two_dirs(tmp_path)
    log = manager.get_or_create_log("t", 0)
    _append(log, b"x")
    future = manager.create_future_log(TP, b)
    assert future is not None
    manager.failure_channel.maybe_add_offline_log_dir(b, "testing", OSError(5, "EIO"))
    manager.handle_log_dir_failure(b)
    assert not manager.future_logs and future.is_offline
    assert future.dir.exists()  # an offline directory is not written again
    assert not manager.abort_future_log(TP)
    _append(log, b"y")  # the current log serves on
    assert _values(manager.logs[TP]) == [(0, b"x"), (1, b"y")]
    manager.shutdown()


def test_a_move_waits_while_its_throttle_is_over_the_bound(tmp_path: Path) -> None:
    """replica.alter.log.dirs.io.max.bytes.per.second: no copy step while the measured
    rate is over the bound; the move goes on once it is not, and what it copies counts."""
    from sluice.base.clock import ManualClock
    from sluice.quota.replication_quota import ReplicationQuotaManager

    manager, _, b = _two_dirs(tmp_path)
    rm = _replica_manager()
    clock = ManualClock(0)
    rm.alter_log_dirs_quota = quota = ReplicationQuotaManager(clock, 0, lambda t: "*")
    partition = rm.add_partition(TP, manager.get_or_create_log("t", 0), [0])
    for i in range(20):
        _append(partition.log, *(b"%d-%d" % (i, j) for j in range(50)))
    quota.update_bound(1000)
    quota.record(1_000_000)  # far over the bound

    async def run() -> tuple[int, float]:
        moves = ReplicaAlterLogDirsManager(manager, rm)
        future = manager.create_future_log(TP, b)
        moves.add(TP)
        await asyncio.sleep(0.3)
        held = future.log_end_offset
        clock.advance(60_000)  # the windows forget it
        while TP in manager.future_logs:
            await asyncio.sleep(0.01)
        await moves.stop()
        return held, quota.rate()

    held, rate = asyncio.run(run())
    assert held == 0
    assert partition.log is manager.logs[TP] and partition.log.dir == b / "t-0"
    assert rate > 0  # the copy was recorded
    manager.shutdown()
