"""One compaction pass over one log (Kafka's ``Cleaner.doClean``), run in bounded steps.

See :mod:`sluice.log.cleaner.log_cleaner` for the design; this module holds the pass itself, the
compaction topic configs, the statistics and the grouping of segments.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.log.cleaner.files import (
    commit_cleaned_segment,
    finish_swap,
    open_cleaned_segment,
    open_swap_segment,
    remove_cleaning_files,
    write_cleaner_checkpoint,
)
from sluice.log.cleaner.records import (
    build_batch_from_records,
    decode_records,
    delete_horizon_of,
    empty_batch,
)
from sluice.log.config import LogConfig
from sluice.log.errors import CorruptRecordException
from sluice.log.file_records import head_problem
from sluice.log.log import Log
from sluice.log.segment import LogSegment
from sluice.protocol.records.batch import BATCH_HEADER_SIZE, BatchHeader

__all__ = [
    "DEFAULT_MAX_MAP_ENTRIES",
    "DEFAULT_SLICE_BYTES",
    "LONG_MAX",
    "CleanerStats",
    "CleaningPass",
    "CompactionConfig",
    "LogToClean",
    "group_segments_by_size",
]

logger = logging.getLogger("sluice.log.cleaner")

LONG_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1
DEFAULT_SLICE_BYTES = 256 * 1024
DEFAULT_MAX_MAP_ENTRIES = 1_000_000
_SHORT_KEY = 16  # keys shorter than a digest are used as is; longer ones are hashed


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """The topic configs of compaction, with Kafka's names (``.`` -> ``_``) and defaults."""

    delete_retention_ms: int = 86_400_000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX

    @classmethod
    def from_topic_configs(cls, values: Mapping[str, Any]) -> CompactionConfig:
        """From effective topic configs (``{"delete.retention.ms": 1000, ...}``); absent or
        None values keep the defaults and other keys are ignored."""
        defaults = cls()

        def pick(name: str, default: Any, kind: Callable[[Any], Any]) -> Any:
            value = values.get(name)
            return default if value is None else kind(value)

        return cls(
            pick("delete.retention.ms", defaults.delete_retention_ms, int),
            pick("min.cleanable.dirty.ratio", defaults.min_cleanable_dirty_ratio, float),
            pick("min.compaction.lag.ms", defaults.min_compaction_lag_ms, int),
            pick("max.compaction.lag.ms", defaults.max_compaction_lag_ms, int),
        )


@dataclass
class CleanerStats:
    """Counters of one pass, or summed over passes (:attr:`LogCleaner.total`)."""

    map_bytes_read: int = 0
    map_records_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    invalid_records_removed: int = 0
    batches_removed: int = 0
    segments_cleaned: int = 0

    def add(self, other: CleanerStats) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(frozen=True)
class LogToClean:
    """A compacted log with its cleanable range (Kafka's ``LogToClean``)."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int = 0
    delete_horizon_due: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0


def group_segments_by_size(
    segments: list[LogSegment], uppers: list[int], config: LogConfig
) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose data stays within
    ``segment.bytes``, whose indexes fit ``segment.index.bytes`` and whose offsets fit an
    int32 relative to the group's base. ``uppers[i]`` bounds the offsets of ``segments[i]``."""
    max_offset_entries = max(1, config.max_index_size // 8)
    max_time_entries = max(1, config.max_index_size // 12)
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        offset_entries = segments[i].offset_index.entries + 1
        time_entries = segments[i].time_index.entries + 1
        i += 1
        while i < len(segments):
            candidate = segments[i]
            if (
                size + candidate.size > config.segment_bytes
                or offset_entries + candidate.offset_index.entries + 1 > max_offset_entries
                or time_entries + candidate.time_index.entries + 1 > max_time_entries
                or uppers[i] - 1 - group[0].base_offset > _INT32_MAX
            ):
                break
            group.append(candidate)
            size += candidate.size
            offset_entries += candidate.offset_index.entries + 1
            time_entries += candidate.time_index.entries + 1
            i += 1
        groups.append(group)
    return groups


def _key_id(key: bytes) -> bytes:
    """The offset map's key: short keys as they are, longer ones as a 16-byte BLAKE2b digest
    (a fixed-size entry, like Kafka's hashed ``SkimpyOffsetMap``; no short key equals one)."""
    if len(key) < _SHORT_KEY:
        return key
    return hashlib.blake2b(key, digest_size=_SHORT_KEY).digest()


class CleaningPass:
    """One cleaning of one log, executed by :meth:`step` in bounded slices (Kafka's
    ``Cleaner.doClean``). ``completed`` tells whether it finished (vs. aborted)."""

    def __init__(
        self,
        to_clean: LogToClean,
        config: CompactionConfig,
        *,
        now: int,
        clock: Clock = SYSTEM_CLOCK,
        slice_bytes: int = DEFAULT_SLICE_BYTES,
        max_map_entries: int = DEFAULT_MAX_MAP_ENTRIES,
    ) -> None:
        self.log = to_clean.log
        self.to_clean = to_clean
        self.config = config
        self.now = now
        self._clock = clock
        self._slice_bytes = max(1, slice_bytes)
        self._max_map_entries = max(1, max_map_entries)
        self.stats = CleanerStats()
        self.offset_map: dict[bytes, int] = {}
        self.end_offset = to_clean.first_uncleanable_offset
        self.next_delete_horizon: int | None = None
        self.completed = False
        self.finished = False
        # Kafka's lastRecordsOfActiveProducers: the batch holding each producer's last data
        # offset is kept (empty if need be) so its sequence and epoch survive a reload.
        self._last_of_producer = {
            producer_id: entry.last_data_offset
            for producer_id, entry in self.log.producer_state_manager.producers.items()
            if entry.last_data_offset >= 0
        }
        segments = list(self.log.segments)
        self._segments = segments
        self._uppers = [s.base_offset for s in segments[1:]]
        # The segments the pass may rewrite, with their sizes (non-active segments never grow).
        self._pending: dict[int, tuple[LogSegment, int]] = {
            id(s): (s, s.size)
            for s, upper in zip(segments, self._uppers, strict=False)
            if upper <= to_clean.first_uncleanable_offset
        }
        self._steps: Generator[None, None, None] = self._run()

    # -- driving ------------------------------------------------------------------------
    def step(self) -> bool:
        """Do one slice of work; returns True once the pass is over (done or aborted)."""
        if self.finished:
            return True
        if not self._still_valid():
            logger.info("%s: cleaning aborted: the log changed", self.log.dir.name)
            self.abort()
            return True
        try:
            next(self._steps)
        except StopIteration:
            self.completed = self.finished = True
            return True
        except BaseException:
            self.finished = True
            raise
        return False

    def run(self) -> bool:
        """Run to the end; returns whether the pass completed."""
        while not self.step():
            pass
        return self.completed

    def abort(self) -> None:
        """Stop, closing and deleting any partly written segment."""
        self._steps.close()
        self.finished = True

    def _still_valid(self) -> bool:
        log = self.log
        if log.is_closed or not log.config.compact_enabled:
            return False
        current = {id(s) for s in log.segments}
        return all(
            key in current and segment.size == size
            for key, (segment, size) in self._pending.items()
        )

    # -- the pass -------------------------------------------------------------------------
    def _run(self) -> Generator[None, None, None]:
        segments, uppers = self._segments, self._uppers
        yield from self._build_offset_map()
        end = self.end_offset
        cleanable = [s for s, upper in zip(segments, uppers, strict=False) if upper <= end]
        groups = group_segments_by_size(cleanable, uppers[: len(cleanable)], self.log.config)
        for group in groups:
            following = uppers[segments.index(group[-1])]  # base of the segment after the group
            yield from self._clean_group(group, following)
        log = self.log
        checkpoint = max(end, self.to_clean.first_dirty_offset)
        write_cleaner_checkpoint(log.dir, log.topic, log.partition, checkpoint)

    def _build_offset_map(self) -> Iterator[None]:
        first_dirty = self.to_clean.first_dirty_offset
        offset_map, stats = self.offset_map, self.stats
        mapped = False
        for segment, upper in zip(self._segments, self._uppers, strict=False):
            if upper <= first_dirty:
                continue
            if upper > self.to_clean.first_uncleanable_offset:
                break
            if mapped and len(offset_map) >= self._max_map_entries:
                self.end_offset = segment.base_offset  # map full: clean up to here
                return
            for chunk in self._chunks(segment):
                for header, batch in chunk:
                    stats.map_bytes_read += header.size_in_bytes
                    if header.last_offset < first_dirty:
                        continue
                    if header.is_control or header.is_transactional:
                        continue  # copied intact, never in the map (no transaction state yet)
                    _, records = decode_records(batch, header)
                    stats.map_records_read += len(records)
                    base = header.base_offset
                    for record in records:
                        offset = base + record.offset_delta
                        if record.key is not None and offset >= first_dirty:
                            offset_map[_key_id(record.key)] = offset
                yield
            mapped = True

    def _chunks(self, segment: LogSegment) -> Iterator[list[tuple[BatchHeader, memoryview]]]:
        """The segment's batches, about ``slice_bytes`` per chunk, each read with one pread."""
        records = segment.log
        position = 0
        while True:
            headers: list[BatchHeader] = []
            total = 0
            for header in records.batch_headers(position):
                headers.append(header)
                total += header.size_in_bytes
                if total >= self._slice_bytes:
                    break
            if not headers:
                if position < records.size:  # a bad batch head: never clean past it
                    head = records.read(position, BATCH_HEADER_SIZE)
                    problem = head_problem(head, 0, position, records.size, segment.base_offset)
                    raise CorruptRecordException(f"{records.path} position {position}: {problem}")
                return
            view = memoryview(records.read(position, total))
            yield [
                (h, view[h.position - position : h.position - position + h.size_in_bytes])
                for h in headers
            ]
            position += total

    def _clean_group(self, group: list[LogSegment], end_offset: int) -> Iterator[None]:
        log = self.log
        config = log.config
        base = group[0].base_offset
        cleaned = open_cleaned_segment(log.dir, base, config, self._clock)
        closed = committed = False
        try:
            for segment in group:
                for chunk in self._chunks(segment):
                    out = bytearray()
                    largest_offset, largest_timestamp = -1, -1
                    for header, batch in chunk:
                        self.stats.bytes_read += header.size_in_bytes
                        kept = self._filter_batch(header, batch)
                        if kept is None:
                            self.stats.batches_removed += 1
                            continue
                        out += kept
                        largest_offset = header.last_offset
                        largest_timestamp = max(largest_timestamp, header.max_timestamp)
                    if out:
                        cleaned.append(largest_offset, largest_timestamp, out)
                        self.stats.bytes_written += len(out)
                    yield
            cleaned.flush()
            cleaned.close()
            closed = True
            commit_cleaned_segment(log.dir, base, end_offset, group[-1].last_modified_ms)
            committed = True
            replacement = open_swap_segment(log.dir, base, config, self._clock)
            log.replace_segments(replacement, group)
            finish_swap(log.dir, base)
        except BaseException:
            if not closed:
                cleaned.close()
            present = {id(s) for s in log.segments}
            if not committed or all(id(s) in present for s in group):
                remove_cleaning_files(log.dir, base)  # the old segments are still in place
            # else: the swap half happened; startup recovery completes it from the .swap file
            raise
        for segment in group:
            del self._pending[id(segment)]
        self.stats.segments_cleaned += len(group)
        yield

    def _filter_batch(self, header: BatchHeader, batch: memoryview) -> bytes | memoryview | None:
        """The batch to write in place of ``batch``: itself, a rebuilt batch with fewer
        records, or None to drop it. Rules (Kafka's ``Cleaner.shouldRetainRecord`` and
        ``checkBatchRetention``, with KIP-534 delete horizons):

        * control and transactional batches are copied unchanged;
        * a record without a key is removed (a compacted topic cannot hold one);
        * a record is removed if the offset map has a later offset for its key;
        * a tombstone (null value) is kept until its batch's delete horizon has passed. A
          batch holding tombstones but no horizon gets one, ``now + delete.retention.ms``,
          stored as its base timestamp with attribute bit 6: tombstones survive
          ``delete.retention.ms`` after the first cleaning that saw them;
        * a batch whose records are all removed is dropped, except the batch holding the last
          data offset of an active producer (producer state), which is kept empty to preserve
          the producer's sequence and epoch.
        """
        horizon = delete_horizon_of(header)
        if header.is_control or header.is_transactional:
            self._note_horizon(horizon)
            return batch
        payload, records = decode_records(batch, header)
        stats, offset_map, now = self.stats, self.offset_map, self.now
        stats.records_read += len(records)
        kept = []
        has_tombstone = False
        base = header.base_offset
        for record in records:
            if record.key is None:
                stats.invalid_records_removed += 1
                continue
            if base + record.offset_delta < offset_map.get(_key_id(record.key), -1):
                continue
            if not record.has_value:
                if horizon is not None and horizon <= now:
                    stats.tombstones_removed += 1
                    continue
                has_tombstone = True
            kept.append(record)
        stats.records_removed += len(records) - len(kept)
        if not kept:
            if header.producer_id >= 0 and (
                self._last_of_producer.get(header.producer_id) == header.last_offset
            ):
                return empty_batch(header)
            return None
        if len(kept) == len(records) and has_tombstone == (horizon is not None):
            self._note_horizon(horizon)
            return batch  # unchanged
        if has_tombstone:
            if horizon is None:
                horizon = min(now + self.config.delete_retention_ms, LONG_MAX)
            self._note_horizon(horizon)
            return build_batch_from_records(header, payload, kept, horizon, True)
        if horizon is None:
            return build_batch_from_records(header, payload, kept, header.base_timestamp, False)
        first = header.base_timestamp + kept[0].timestamp_delta  # drop the spent horizon
        return build_batch_from_records(header, payload, kept, first, False)

    def _note_horizon(self, horizon: int | None) -> None:
        if horizon is not None and (
            self.next_delete_horizon is None or horizon < self.next_delete_horizon
        ):
            self.next_delete_horizon = horizon
