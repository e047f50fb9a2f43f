"""Group commit of flush.messages flushes (sluice.log.group_flush), sans-I/O: the loop's
next turn and the flush thread are lists the test runs by hand."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sluice.log import Log, LogConfig
from sluice.log.errors import KafkaStorageException
from sluice.log.group_flush import GroupFlusher
from support.records import build_batch


class Rig:
    """A GroupFlusher whose loop turns and flush thread are run by the test."""

    def __init__(self) -> None:
        self.soon: list[Callable[[], None]] = []
        self.jobs: list[tuple[Callable[[], None], Callable[[], None]]] = []
        self.flushed: list[str] = []
        self.flusher = GroupFlusher(
            self.soon.append,
            lambda job, done: self.jobs.append((job, done)),
            lambda log: self.flushed.append(log.dir.name),
        )

    def turn(self) -> None:
        """The loop's next turn: what was scheduled runs."""
        pending, self.soon[:] = list(self.soon), []
        for fn in pending:
            fn()

    def finish_round(self) -> None:
        """The flush thread runs the round's fsyncs; its answer runs on the loop."""
        (job, done) = self.jobs.pop(0)
        job()
        done()


def open_log(directory: Path, rig: Rig | None, flush_messages: int = 1) -> Log:
    log = Log(directory, LogConfig(flush_messages=flush_messages))
    log.flush_group = None if rig is None else rig.flusher
    return log


def append(log: Log, n: int = 1) -> None:
    log.append_as_leader(build_batch([b"v"] * n), 0)


@pytest.fixture
def rig() -> Rig:
    return Rig()


def test_without_a_group_an_append_flushes_inline(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", None)
    append(log, 3)
    assert log.recovery_point == 3 and log.flush_wanted == 0
    log.close()


def test_a_due_append_is_flushed_by_a_round_off_the_loop(tmp_path: Path, rig: Rig) -> None:
    log = open_log(tmp_path / "t-0", rig)
    append(log, 2)
    assert log.recovery_point == 0 and log.flush_wanted == 2  # not synced by the append
    assert rig.soon and not rig.jobs
    rig.turn()  # the round starts at the loop's next turn, with descriptors taken
    assert len(rig.jobs) == 1 and rig.flusher.in_flight
    append(log)  # while the round runs: due again, for the next round
    assert log.flush_wanted == 3 and rig.flusher.waiting == 1 and not rig.soon
    rig.finish_round()
    assert log.recovery_point == 2 and rig.flushed == ["t-0"]
    rig.turn()
    rig.finish_round()
    assert log.recovery_point == 3 and rig.flushed == ["t-0", "t-0"]
    assert (rig.flusher.rounds, rig.flusher.flushes) == (2, 2)
    log.close()


def test_logs_due_in_one_turn_share_a_round(tmp_path: Path, rig: Rig) -> None:
    logs = [open_log(tmp_path / f"t-{p}", rig) for p in range(3)]
    for log in logs:
        append(log)
        append(log)  # a log due twice in a turn is flushed once
    rig.turn()
    assert len(rig.jobs) == 1
    rig.finish_round()
    assert [log.recovery_point for log in logs] == [2, 2, 2]
    assert sorted(rig.flushed) == ["t-0", "t-1", "t-2"]
    assert (rig.flusher.rounds, rig.flusher.flushes) == (1, 3)
    for log in logs:
        log.close()


def test_flush_messages_counts_from_the_last_flush_asked_for(tmp_path: Path, rig: Rig) -> None:
    log = open_log(tmp_path / "t-0", rig, flush_messages=3)
    append(log, 2)
    assert log.flush_wanted == 0 and not rig.soon  # 2 of 3
    append(log)
    assert log.flush_wanted == 3 and rig.soon
    rig.turn()
    append(log, 2)  # 2 since the flush asked for at 3, though the round has not ended
    assert log.flush_wanted == 3 and rig.flusher.waiting == 0
    append(log)
    assert log.flush_wanted == 6 and rig.flusher.waiting == 1
    rig.finish_round()
    rig.turn()
    rig.finish_round()
    assert log.recovery_point == 6
    log.close()


def test_a_round_after_a_truncation_does_not_move_the_recovery_point(
    tmp_path: Path, rig: Rig
) -> None:
    log = open_log(tmp_path / "t-0", rig)
    append(log, 4)
    rig.turn()
    log.truncate_to(1)  # leadership lost meanwhile: the follower truncates
    append(log, 5)  # and new data reaches past the round's target
    rig.finish_round()
    assert log.recovery_point <= 1
    log.close()


def test_a_failed_fsync_takes_the_log_offline(
    tmp_path: Path, rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path / "t-0", rig)
    other = open_log(tmp_path / "u-0", rig)
    append(log)
    append(other)
    rig.turn()
    real_fsync = os.fsync
    data_file = log.active_segment.log.path

    def fsync(fd: int) -> None:
        if os.path.samefile(f"/proc/self/fd/{fd}", data_file):
            raise OSError(errno.EIO, "injected")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    rig.finish_round()
    assert sorted(rig.flushed) == ["t-0", "u-0"]  # both answered
    assert log.recovery_point == 0 and other.recovery_point == 1
    with pytest.raises(KafkaStorageException):
        append(log)
    log.close()
    other.close()


def test_a_log_closed_before_its_round_is_answered_without_one(tmp_path: Path, rig: Rig) -> None:
    log = open_log(tmp_path / "t-0", rig)
    append(log)
    log.close()  # closing flushes it
    rig.turn()
    assert not rig.jobs and rig.flushed == ["t-0"] and rig.flusher.rounds == 0


def test_a_round_outlives_the_segments_it_syncs(tmp_path: Path, rig: Rig) -> None:
    """The round syncs duplicated descriptors: the log may close before it runs."""
    log = open_log(tmp_path / "t-0", rig)
    append(log)
    rig.turn()
    log.close()
    rig.finish_round()
    assert rig.flushed == ["t-0"]


def test_a_round_that_cannot_duplicate_descriptors_leaves_none_open(
    tmp_path: Path, rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of descriptors (EMFILE) while a round is taken: the log's waiters are told
    (they wait on, to their timeout) and no duplicate made before the failure stays open."""
    log = Log(tmp_path / "t-0", LogConfig(flush_messages=1, index_interval_bytes=0))
    log.flush_group = rig.flusher
    append(log)
    append(log)  # the data file and both indexes (an entry for this batch) to sync
    real_dup, made = os.dup, []

    def dup(fd: int) -> int:
        if made:
            raise OSError(errno.EMFILE, "injected: too many open files")
        made.append(real_dup(fd))
        return made[-1]

    monkeypatch.setattr(os, "dup", dup)
    rig.turn()
    monkeypatch.undo()
    assert made
    with pytest.raises(OSError):  # closed again (nothing was opened since)
        os.fstat(made[0])
    assert rig.flushed == ["t-0"] and not rig.jobs and log.recovery_point == 0
    log.close()
