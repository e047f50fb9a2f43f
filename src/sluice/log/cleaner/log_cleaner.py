"""Log compaction: Kafka's ``LogCleaner``, ``LogCleanerManager`` and ``Cleaner``.

A compacted log (``cleanup.policy`` contains ``compact``) has a *clean* head, below the first
dirty offset kept in ``cleaner-offset-checkpoint``, and a *dirty* tail. A cleaning pass

1. bounds the cleanable range at the first uncleanable offset: never the active segment,
   never a segment holding offsets at or above the high watermark (or LSO), never a segment
   whose largest timestamp is within ``min.compaction.lag.ms`` of now; ranges are whole
   segments, so the bound is always a segment base offset;
2. builds the offset map (key -> latest offset) over the dirty part of that range, stopping at
   a segment boundary when the map holds ``max_map_entries`` keys;
3. rewrites every segment from the start of the log up to the mapped end, in groups that stay
   under ``segment.bytes`` and the index size, keeping for each key only its latest record
   (see :meth:`CleaningPass._filter_batch` for every rule), and swaps each group's new segment
   in (:mod:`sluice.log.cleaner.files`);
4. writes the mapped end as the new checkpoint.

Everything runs on the caller's thread, because the log classes are not thread-safe. A pass
is a :class:`CleaningPass` executed in bounded steps (about ``slice_bytes`` of input each);
before every step the pass checks that the segments it planned to rewrite are still in the
log with their sizes unchanged (retention, DeleteRecords, truncation, deletion and closing
would change that) and aborts cleanly otherwise. The broker runs one step per event-loop
iteration, so fetches and produces interleave with cleaning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.log.cleaner.cleaning_pass import (
    DEFAULT_MAX_MAP_ENTRIES,
    DEFAULT_SLICE_BYTES,
    LONG_MAX,
    CleanerStats,
    CleaningPass,
    CompactionConfig,
    LogToClean,
    group_segments_by_size,
)
from sluice.log.cleaner.files import CLEANER_CHECKPOINT, read_cleaner_checkpoint
from sluice.log.cleaner.records import delete_horizon_of
from sluice.log.errors import KafkaStorageException
from sluice.log.log import Log

__all__ = [
    "CLEANER_CHECKPOINT",
    "CleanerStats",
    "CleaningPass",
    "CompactionConfig",
    "LogCleaner",
    "LogToClean",
    "group_segments_by_size",
]

logger = logging.getLogger(__name__)


def _default_config(_: Log) -> CompactionConfig:
    return CompactionConfig()


def _no_bound(_: Log) -> int | None:
    return None


@dataclass
class _LogState:
    """What the cleaner remembers about a log between passes (in memory only)."""

    delete_horizon: int | None = None  # earliest pending delete horizon in the clean part
    horizon_known: bool = False
    retry_after_ms: int = 0  # a failed log is skipped until then


class LogCleaner:
    """Chooses the filthiest compacted log and cleans it (Kafka's ``LogCleaner`` with its
    ``LogCleanerManager``). The broker calls :meth:`step` from its event loop; tests and tools
    call :meth:`clean_filthiest_log` or :meth:`clean_log` to run whole passes.

    ``logs()`` lists the logs; ``config_for(log)`` gives a log's :class:`CompactionConfig`;
    ``high_watermark(log)`` bounds cleaning (None: no bound; pass the LSO once transactions
    exist). ``slice_bytes`` is the input one step processes; ``max_map_entries`` bounds the
    offset map (Kafka's dedupe buffer).
    """

    def __init__(
        self,
        logs: Callable[[], Iterable[Log]],
        *,
        config_for: Callable[[Log], CompactionConfig] | None = None,
        high_watermark: Callable[[Log], int | None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        slice_bytes: int = DEFAULT_SLICE_BYTES,
        max_map_entries: int = DEFAULT_MAX_MAP_ENTRIES,
        retry_failed_after_ms: int = 60_000,
    ) -> None:
        self.logs = logs
        self.config_for: Callable[[Log], CompactionConfig] = config_for or _default_config
        self.high_watermark: Callable[[Log], int | None] = high_watermark or _no_bound
        self.clock = clock
        self.slice_bytes = slice_bytes
        self.max_map_entries = max_map_entries
        self.retry_failed_after_ms = retry_failed_after_ms
        self.passes_completed = 0
        self.passes_aborted = 0
        self.passes_failed = 0
        self.total = CleanerStats()
        self.last_pass: CleaningPass | None = None
        self._current: CleaningPass | None = None
        self._states: dict[Path, _LogState] = {}

    # -- choosing -------------------------------------------------------------------------
    def first_dirty_offset(self, log: Log) -> int:
        """The checkpointed first dirty offset, reset to the log start offset when missing or
        outside ``[log start, log end]`` (Kafka's ``cleanableOffsets``)."""
        checkpoint = read_cleaner_checkpoint(log.dir)
        if checkpoint is None or not log.log_start_offset <= checkpoint <= log.log_end_offset:
            return log.log_start_offset
        return checkpoint

    def log_to_clean(self, log: Log, now: int | None = None) -> LogToClean:
        """The cleanable range and dirty ratio of ``log``."""
        now = self.clock.milliseconds() if now is None else now
        config = self.config_for(log)
        segments = log.segments
        bases = [s.base_offset for s in segments]
        first_dirty = self.first_dirty_offset(log)
        uncleanable = bases[-1]  # the active segment
        hw = self.high_watermark(log)
        lag_limit = now - config.min_compaction_lag_ms
        for i, segment in enumerate(segments[:-1]):
            upper = bases[i + 1]
            if hw is not None and upper > hw:
                uncleanable = min(uncleanable, bases[i])
                break
            lagging = upper > first_dirty and config.min_compaction_lag_ms > 0
            if lagging and segment.largest_timestamp > lag_limit:
                uncleanable = min(uncleanable, bases[i])
                break
        clean = cleanable = 0
        earliest_dirty = LONG_MAX
        for i, segment in enumerate(segments[:-1]):
            upper = bases[i + 1]
            if upper <= first_dirty:
                clean += segment.size
            elif upper <= uncleanable:
                cleanable += segment.size
            if upper > first_dirty and config.max_compaction_lag_ms < LONG_MAX and segment.size:
                first = next(segment.batches(), None)
                if first is not None and first.max_timestamp > 0:
                    earliest_dirty = min(earliest_dirty, first.max_timestamp)
        delay = 0
        if earliest_dirty < LONG_MAX:
            delay = max(0, now - config.max_compaction_lag_ms - earliest_dirty)
        horizon = self._delete_horizon(log, bases, first_dirty)
        due = horizon is not None and horizon <= now and uncleanable > bases[0]
        return LogToClean(log, first_dirty, uncleanable, clean, cleanable, delay, due)

    def _delete_horizon(self, log: Log, bases: list[int], first_dirty: int) -> int | None:
        state = self._states.setdefault(log.dir, _LogState())
        if not state.horizon_known:  # first look since startup: scan the clean headers
            horizon: int | None = None
            for i, segment in enumerate(log.segments[:-1]):
                if bases[i + 1] > first_dirty:
                    break
                for header in segment.batches():
                    mark = delete_horizon_of(header)
                    if mark is not None and (horizon is None or mark < horizon):
                        horizon = mark
            state.delete_horizon, state.horizon_known = horizon, True
        return state.delete_horizon

    def cleanable_logs(self, now: int | None = None) -> list[LogToClean]:
        """The compacted logs that need cleaning, filthiest first: a dirty ratio at least
        ``min.cleanable.dirty.ratio``, dirty data older than ``max.compaction.lag.ms``, or a
        delete horizon that has passed."""
        now = self.clock.milliseconds() if now is None else now
        found: list[LogToClean] = []
        live: set[Path] = set()
        for log in self.logs():
            if log.is_closed or log.is_offline or not log.config.compact_enabled:
                continue
            live.add(log.dir)
            state = self._states.get(log.dir)
            if state is not None and state.retry_after_ms > now:
                continue
            try:
                candidate = self.log_to_clean(log, now)
            except Exception:  # e.g. a malformed checkpoint: skip this log for a while
                self._states.setdefault(log.dir, _LogState()).retry_after_ms = (
                    now + self.retry_failed_after_ms
                )
                logger.exception("%s: cannot compute its cleanable range", log.dir.name)
                continue
            ratio = self.config_for(log).min_cleanable_dirty_ratio
            dirty = candidate.cleanable_bytes > 0 and (
                candidate.cleanable_ratio >= ratio or candidate.max_compaction_delay_ms > 0
            )
            if dirty or candidate.delete_horizon_due:
                found.append(candidate)
        for gone in [d for d in self._states if d not in live]:
            del self._states[gone]  # deleted topics, or no longer compacted
        found.sort(key=lambda c: (c.max_compaction_delay_ms > 0, c.cleanable_ratio), reverse=True)
        return found

    # -- cleaning -------------------------------------------------------------------------
    @property
    def in_progress(self) -> CleaningPass | None:
        return self._current

    def start_pass(self, to_clean: LogToClean, now: int | None = None) -> CleaningPass:
        """Begin cleaning ``to_clean`` (any previous pass in progress is aborted)."""
        self.abort()
        now = self.clock.milliseconds() if now is None else now
        self._current = CleaningPass(
            to_clean, self.config_for(to_clean.log), now=now, clock=self.clock,
            slice_bytes=self.slice_bytes, max_map_entries=self.max_map_entries,
        )  # fmt: skip
        return self._current

    def step(self) -> bool:
        """One bounded slice of cleaning work, starting a pass on the filthiest log if none is
        in progress. Returns False when there was nothing to do (the caller backs off)."""
        current = self._current
        if current is None:
            candidates = self.cleanable_logs()
            if not candidates:
                return False
            current = self.start_pass(candidates[0])
        try:
            done = current.step()
        except Exception as exc:
            self._current = None
            self._on_failure(current, exc)
            return True
        if done:
            self._current = None
            self._on_finished(current)
        return True

    def clean_filthiest_log(self) -> CleaningPass | None:
        """Run a whole pass on the filthiest log, if one needs cleaning."""
        candidates = self.cleanable_logs()
        if not candidates:
            return None
        return self._run(candidates[0])

    def clean_log(self, log: Log) -> CleaningPass:
        """Run a whole pass on ``log`` whatever its dirty ratio."""
        return self._run(self.log_to_clean(log))

    def _run(self, to_clean: LogToClean) -> CleaningPass:
        cleaning = self.start_pass(to_clean)
        try:
            cleaning.run()
        except Exception as exc:
            self._on_failure(cleaning, exc)
            raise
        finally:
            self._current = None
        self._on_finished(cleaning)
        return cleaning

    def abort(self) -> None:
        """Abort the pass in progress (its partial files are removed)."""
        if self._current is not None:
            self._current.abort()
            self.passes_aborted += 1
            self._current = None

    def shutdown(self) -> None:
        self.abort()

    def _on_finished(self, cleaning: CleaningPass) -> None:
        self.last_pass = cleaning
        if not cleaning.completed:
            self.passes_aborted += 1
            return
        state = self._states.setdefault(cleaning.log.dir, _LogState())
        state.delete_horizon, state.horizon_known = cleaning.next_delete_horizon, True
        self.passes_completed += 1
        self.total.add(cleaning.stats)
        stats = cleaning.stats
        logger.info(
            "%s: cleaned [%d, %d): %d segments, %d -> %d bytes, %d of %d records removed",
            cleaning.log.dir.name, cleaning.to_clean.first_dirty_offset, cleaning.end_offset,
            stats.segments_cleaned, stats.bytes_read, stats.bytes_written,
            stats.records_removed, stats.records_read,
        )  # fmt: skip

    def _on_failure(self, cleaning: CleaningPass, error: Exception) -> None:
        """A pass failed: retried after ``retry_failed_after_ms``. An I/O error takes the
        log's directory offline, as Kafka's cleaner does (logged there, once), and the
        cleaner leaves offline logs alone."""
        self.passes_failed += 1
        state = self._states.setdefault(cleaning.log.dir, _LogState())
        state.retry_after_ms = self.clock.milliseconds() + self.retry_failed_after_ms
        if isinstance(error, OSError):
            cleaning.log.io_failed(error, "log cleaning")
        elif isinstance(error, KafkaStorageException):
            logger.debug("%s: log cleaning failed: %s", cleaning.log.dir.name, error)
        else:
            logger.error("%s: log cleaning failed", cleaning.log.dir.name, exc_info=error)
