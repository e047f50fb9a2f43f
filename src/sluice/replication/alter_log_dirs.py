"""What moving a replica between log directories does next: the decisions of Kafka's
``ReplicaAlterLogDirsThread``, as a pure function of the two logs' positions.

AlterReplicaLogDirs gives a partition a *future log* in the target directory. The
future log follows the partition's current log as a follower follows its leader: it
copies the current log's batches from its own end, keeping their offsets and epochs;
it truncates when the current log was truncated below it (a follower's log cut back by
its leader); it starts over when the current log no longer holds what it would copy
from (retention or DeleteRecords moved the current log's start past it) or when the two
disagree on the epoch of the future log's last offset (the current log's history was
replaced); and once both end at the same offset, with no append in between, it is
swapped in for the current log. The shell (``server/replica_alter_log_dirs.py``) reads
and copies; this module only says which step comes next.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["LogPosition", "MoveStep", "StepKind", "next_step"]


@dataclass(frozen=True, slots=True)
class LogPosition:
    """A log's start and end offsets and the leader epoch of an offset the caller chose
    (the future log's last offset; None when the log does not hold it)."""

    start: int
    end: int
    epoch: int | None = None


class StepKind(Enum):
    COPY = "copy"
    """Copy the current log's batches from ``offset`` (the future log's end)."""
    TRUNCATE = "truncate"
    """Cut the future log back to ``offset`` (the current log's end)."""
    RESTART = "restart"
    """Empty the future log and start it at ``offset`` (the current log's start)."""
    SWAP = "swap"
    """Both logs end at the same offset: swap the future log in (its start raised to
    ``offset``, the current log's start, where below)."""


@dataclass(frozen=True, slots=True)
class MoveStep:
    kind: StepKind
    offset: int


def next_step(current: LogPosition, future: LogPosition) -> MoveStep:
    """The next step of a move. ``current.epoch`` and ``future.epoch`` are each log's
    leader epoch of the future log's last offset (``future.end - 1``)."""
    if future.end < current.start or (future.end == current.start and future.start != future.end):
        return MoveStep(StepKind.RESTART, current.start)  # all it holds is gone here
    if future.start == future.end and future.start < current.start:
        return MoveStep(StepKind.RESTART, current.start)
    if future.end > current.end:
        if current.end <= future.start:
            return MoveStep(StepKind.RESTART, current.start)
        return MoveStep(StepKind.TRUNCATE, current.end)
    holds_data = future.end > max(future.start, current.start)
    if holds_data and current.epoch != future.epoch:
        return MoveStep(StepKind.RESTART, current.start)  # the histories diverged
    if future.end == current.end:
        return MoveStep(StepKind.SWAP, current.start)
    return MoveStep(StepKind.COPY, future.end)
