"""``ReplicaAlterLogDirsManager``: moves partition replicas between this broker's log
directories (AlterReplicaLogDirs) while they keep serving, as Kafka's
``ReplicaAlterLogDirsManager`` and its ``ReplicaAlterLogDirsThread``s do.

A move is a future log in the target directory that follows the partition's current
log (the steps are decided by :func:`sluice.replication.alter_log_dirs.next_step`): the
current log's batches are read on the event loop, a chunk at a time, and appended to the
future log on one of the manager's worker threads (one per log dir, Kafka's default
``num.replica.alter.log.dirs.threads``); produce, fetch and replication go on meanwhile.
Once the future log is close behind (at most :data:`FINAL_COPY_BYTES` to copy), the rest
is appended on the event loop and, when the future log then ends where the current log
does, the swap follows with no await in between, so no append falls in between and a
steady stream of appends cannot keep the move from ending: the
partition's log becomes the future log, renamed to the partition's directory, and the
current log is deleted. A broker stopped mid-move finds the future log at its next start
and resumes the move once the partition is hosted again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from sluice.base import TopicPartition
from sluice.log.errors import KafkaStorageException
from sluice.replication.alter_log_dirs import LogPosition, StepKind, next_step

if TYPE_CHECKING:
    from collections.abc import Callable

    from sluice.log import Log
    from sluice.log.manager import LogManager
    from sluice.replication.replica_manager import ReplicaManager

__all__ = ["COPY_CHUNK_BYTES", "ReplicaAlterLogDirsManager"]

log = logging.getLogger(__name__)

COPY_CHUNK_BYTES = 1024 * 1024
"""The most a copy step reads from the current log (Kafka's replica.fetch.max.bytes)."""
FINAL_COPY_BYTES = 256 * 1024
"""A copy step of at most this much is made on the event loop, the swap right after it
when it reaches the current log's end."""
NOT_HOSTED_RETRY_S = 0.1
"""How often a move whose partition is not hosted (yet) looks again."""
THROTTLED_RETRY_S = 0.1
"""How often a move held back by its throttle looks again."""


class ReplicaAlterLogDirsManager:
    """The moves under way on this broker, one task each (see the module)."""

    def __init__(
        self,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        before_swap: Callable[[Log], None] | None = None,
    ) -> None:
        """``before_swap(log)`` is called with a partition's current log right before the
        future log replaces it (the broker aborts a compaction pass on it there, as Kafka
        pauses cleaning during a move)."""
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self._before_swap = before_swap
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, len(log_manager.log_dirs)), thread_name_prefix="alter-log-dirs"
        )
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        self._stopped = False

    def start(self) -> None:
        """Resume the moves whose future logs the log manager found at start-up."""
        for tp in list(self.log_manager.future_logs):
            self.add(tp)

    def add(self, tp: TopicPartition) -> None:
        """Make sure ``tp``'s future log is being caught up (on the event loop)."""
        if self._stopped:
            return
        task = self._tasks.get(tp)
        if task is None or task.done():
            self._tasks[tp] = asyncio.get_running_loop().create_task(
                self._move(tp), name=f"alter-log-dirs {tp}"
            )

    @property
    def moving(self) -> list[TopicPartition]:
        """The partitions with a move under way."""
        return sorted(tp for tp, task in self._tasks.items() if not task.done())

    async def stop(self) -> None:
        """End every task, waiting for their worker-thread steps; the future logs stay on
        disk and the moves resume at the next start."""
        self._stopped = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # A step on a worker thread runs to its end before the logs close.
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown)

    async def _move(self, tp: TopicPartition) -> None:
        try:
            while await self._step(tp):
                pass
        except asyncio.CancelledError:
            raise
        except KafkaStorageException as exc:
            log.warning("%s: the move between log dirs stopped: %s", tp, exc)
            self.log_manager.abort_future_log(tp)
        except Exception:
            log.exception("%s: the move between log dirs failed", tp)
            self.log_manager.abort_future_log(tp)

    async def _step(self, tp: TopicPartition) -> bool:
        """One step of ``tp``'s move; False once it is over (swapped in or aborted)."""
        manager = self.log_manager
        if tp not in manager.future_logs:
            return False
        partition = self.replica_manager.get_partition(tp)
        if partition is None or partition.log is not manager.logs.get(tp):
            await asyncio.sleep(NOT_HOSTED_RETRY_S)  # hosted again later, or deleted
            return True
        current = partition.log
        future = manager.future_logs[tp]
        last = future.log_end_offset - 1
        step = next_step(
            LogPosition(current.log_start_offset, current.log_end_offset,
                        current.leader_epoch_of(last)),
            LogPosition(future.log_start_offset, future.log_end_offset,
                        future.leader_epoch_of(last)),
        )  # fmt: skip
        if step.kind is StepKind.SWAP:
            self._swap(tp)
            return False
        if step.kind is StepKind.COPY:
            quota = self.replica_manager.alter_log_dirs_quota
            if quota.is_quota_exceeded():  # replica.alter.log.dirs.io.max.bytes.per.second
                await asyncio.sleep(THROTTLED_RETRY_S)
                return True
            data = current.read(step.offset, COPY_CHUNK_BYTES)
            records = data.records.read() if data.records.size else b""
            if not records:  # nothing whole to copy yet (should not happen below the end)
                await asyncio.sleep(NOT_HOSTED_RETRY_S)
                return True
            if quota.is_bounded:
                quota.record(len(records))
            if len(records) > FINAL_COPY_BYTES:
                await self._on_worker(tp, lambda f: f.append_as_follower(records))
                return True
            # Close behind: the rest is appended here, and if that reaches the current
            # log's end the swap follows with no await between, so appends to the
            # current log cannot keep the future log from ever catching up.
            future.append_as_follower(records)
            if future.log_end_offset == current.log_end_offset:
                self._swap(tp)
                return False
            await asyncio.sleep(0)
        elif step.kind is StepKind.TRUNCATE:
            await self._on_worker(tp, lambda f: f.truncate_to(step.offset))
        else:
            await self._on_worker(tp, lambda f: f.truncate_fully_and_start_at(step.offset))
        return True

    def _swap(self, tp: TopicPartition) -> None:
        partition = self.replica_manager.partitions[tp]
        if self._before_swap is not None:
            self._before_swap(partition.log)
        partition.log = self.log_manager.replace_current_with_future_log(tp)
        self.replica_manager.wake(tp)

    async def _on_worker(self, tp: TopicPartition, work: _FutureWork) -> None:
        """Run ``work`` on the future log on a worker thread, the log held meanwhile."""
        future = self.log_manager.begin_future_work(tp)
        if future is None:
            return
        try:
            loop = asyncio.get_running_loop()
            await asyncio.shield(loop.run_in_executor(self._executor, work, future))
        finally:
            self.log_manager.end_future_work(future)


if TYPE_CHECKING:
    _FutureWork = Callable[[Log], object]
