"""``ProducerStateManager``: the producer state of one partition log and its snapshots.

Follows Kafka's ``ProducerStateManager``: the :class:`ProducerStateEntry` of every producer id
seen in the partition, the ongoing transactions, and the map end offset up to which the state
is complete. A leader append is first analysed (:meth:`ProducerStateManager.analyze_and_validate`,
which finds duplicates and raises Kafka's errors) and applied once its batches are in the log.

The state is persisted in ``<offset>.snapshot`` files in the partition directory (Kafka's
version 1 snapshot format, see :func:`write_snapshot`), taken on segment roll and on close; on
load the latest snapshot at or below the log end offset is read and the batch headers after it
are replayed (:func:`rebuild_producer_state`).
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from sluice.log.append import AppendOrigin
from sluice.log.checkpoint import write_atomically
from sluice.log.errors import LogError
from sluice.log.producer_state import (
    NO_SEQUENCE,
    BatchMetadata,
    CompletedTxn,
    EndTxnMarker,
    ProducerAppendInfo,
    ProducerStateEntry,
    TxnMetadata,
    read_end_txn_marker,
)
from sluice.log.segment import LogSegment, filename_prefix_from_offset
from sluice.log.transaction_index import AbortedTxn
from sluice.protocol.records.batch import BatchHeader
from sluice.protocol.records.crc import crc32c

__all__ = [
    "PRODUCER_SNAPSHOT_SUFFIX",
    "CorruptSnapshotException",
    "ProducerStateAnalysis",
    "ProducerStateManager",
    "read_snapshot",
    "rebuild_producer_state",
    "write_snapshot",
]

log = logging.getLogger(__name__)

PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"
PRODUCER_SNAPSHOT_VERSION = 1

_SNAPSHOT_FILE = re.compile(r"^(\d+)\.snapshot$")
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc (of what follows it), entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # the CRC covers the entry count and the entries


class CorruptSnapshotException(LogError):
    """A producer snapshot file with a bad version, size or CRC (it is deleted and skipped)."""


class ProducerStateAnalysis(NamedTuple):
    """The outcome of checking an append: per-producer updates to apply after the append,
    the transactions its markers complete, or the cached batch it duplicates."""

    updated: dict[int, ProducerAppendInfo]
    completed: list[CompletedTxn]
    duplicate: BatchMetadata | None


class ProducerStateManager:
    """The producer state of one partition log (Kafka's ProducerStateManager): producer
    entries, ongoing transactions, the map end offset (state is complete up to it), and the
    ``<offset>.snapshot`` files of the partition directory."""

    __slots__ = (
        "_last_map_offset",
        "_ongoing_txns",
        "_producers",
        "_snapshots",
        "dir",
        "tp",
    )

    def __init__(
        self, directory: Path, tp: str | None = None, names: Iterable[str] | None = None
    ) -> None:
        """``names``: the directory's, if the caller listed it."""
        self.dir = directory
        self.tp = tp if tp is not None else directory.name
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing_txns: dict[int, TxnMetadata] = {}  # first offset -> transaction
        self._snapshots: dict[int, Path] = self._find_snapshots(names)
        self._last_map_offset = 0

    # -- state ---------------------------------------------------------------------------
    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        return self._producers

    @property
    def map_end_offset(self) -> int:
        """The producer state reflects every batch below this offset."""
        return self._last_map_offset

    @property
    def ongoing_transactions(self) -> Mapping[int, TxnMetadata]:
        return self._ongoing_txns

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest ongoing transaction (bounds the LSO)."""
        return min(self._ongoing_txns, default=None)

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` ended (Kafka's ``lastStableOffset(completedTxn)``):
        the first offset of another still open transaction, else one past its marker."""
        pid = completed.producer_id
        others = (f for f, t in self._ongoing_txns.items() if t.producer_id != pid)
        return min(others, default=completed.last_offset + 1)

    def update_map_end_offset(self, offset: int) -> None:
        self._last_map_offset = offset

    # -- appends -------------------------------------------------------------------------
    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self._producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.tp, producer_id, current, origin)

    def analyze_and_validate(
        self,
        headers: Sequence[BatchHeader],
        origin: AppendOrigin,
        read_marker: Callable[[BatchHeader], EndTxnMarker | None] | None = None,
    ) -> ProducerStateAnalysis:
        """Check the batches (offsets assigned) of one append without changing any state;
        raises OutOfOrderSequenceException, InvalidProducerEpochException, ... A client
        batch repeating one of its producer's cached batches makes the whole append a
        duplicate (clients send at most one batch per partition in a request)."""
        updated: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for header in headers:
            producer_id = header.producer_id
            if producer_id < 0:
                continue
            if origin is AppendOrigin.CLIENT:
                entry = self._producers.get(producer_id)
                duplicate = entry.find_duplicate_batch(header) if entry is not None else None
                if duplicate is not None:
                    return ProducerStateAnalysis(updated, completed, duplicate)
            info = updated.get(producer_id)
            if info is None:
                info = updated[producer_id] = self.prepare_update(producer_id, origin)
            marker = read_marker(header) if header.is_control and read_marker else None
            txn = info.append(header, marker)
            if txn is not None:
                completed.append(txn)
        return ProducerStateAnalysis(updated, completed, None)

    def apply(self, analysis: ProducerStateAnalysis) -> None:
        """Record an analysed append once its batches are in the log."""
        for info in analysis.updated.values():
            self.update(info)
        for txn in analysis.completed:
            self.complete_txn(txn)

    def update(self, info: ProducerAppendInfo) -> None:
        entry = self._producers.get(info.producer_id)
        if entry is None:
            self._producers[info.producer_id] = info.updated
        else:
            entry.update(info.updated)
        for txn in info.started_transactions:
            self._ongoing_txns[txn.first_offset] = txn

    def complete_txn(self, txn: CompletedTxn) -> None:
        metadata = self._ongoing_txns.pop(txn.first_offset, None)
        if metadata is not None:
            metadata.last_offset = txn.last_offset

    # -- expiration ----------------------------------------------------------------------
    def remove_expired_producers(self, now_ms: int, producer_id_expiration_ms: int) -> int:
        """Forget producers without an open transaction whose last batch timestamp is at
        least ``producer.id.expiration.ms`` old; returns how many were removed."""
        expired = [
            pid
            for pid, entry in self._producers.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= producer_id_expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        if expired:
            log.info("%s: expired %d idle producer ids", self.tp, len(expired))
        return len(expired)

    # -- snapshots -----------------------------------------------------------------------
    def _find_snapshots(self, names: Iterable[str] | None) -> dict[int, Path]:
        found: dict[int, Path] = {}
        if names is None:
            names = os.listdir(self.dir) if self.dir.is_dir() else []
        for name in names:
            if name.endswith(PRODUCER_SNAPSHOT_SUFFIX):
                match = _SNAPSHOT_FILE.match(name)
                if match is not None:
                    found[int(match.group(1))] = self.dir / name
        return dict(sorted(found.items()))

    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots, default=None)

    def snapshot_path(self, offset: int) -> Path:
        return self.dir / f"{filename_prefix_from_offset(offset)}{PRODUCER_SNAPSHOT_SUFFIX}"

    def take_snapshot(self) -> Path | None:
        """Write the state at the map end offset to ``<map end>.snapshot`` unless that file
        exists. Nothing is written while there is no producer and no snapshot at all, so
        logs that never see a producer id have no snapshot files: a log without any
        snapshot after a clean shutdown has an empty producer state."""
        offset = self._last_map_offset
        if offset in self._snapshots or not (self._producers or self._snapshots):
            return None
        path = self.snapshot_path(offset)
        write_snapshot(path, self._producers.values())
        self._snapshots[offset] = path
        return path

    def snapshot_at_roll(self, new_segment_base: int) -> None:
        """A segment rolled: the state so far is the state at its base offset."""
        self.update_map_end_offset(new_segment_base)
        self.take_snapshot()

    def delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        """Drop the snapshots below ``offset`` (the first segment's base after retention or
        DeleteRecords removed segments)."""
        for snap in [o for o in self._snapshots if o < offset]:
            self.delete_snapshot(snap)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """On load: keep the snapshots at segment base offsets, and the latest other one if
        it is beyond every segment base (the one a clean shutdown wrote)."""
        bases = set(segment_base_offsets)
        strays = [o for o in sorted(self._snapshots) if o not in bases]
        keep = strays[-1] if strays and (not bases or strays[-1] > max(bases)) else None
        for offset in strays:
            if offset != keep:
                self.delete_snapshot(offset)

    def truncate_and_reload(self, first_segment_base: int, log_end_offset: int) -> None:
        """Forget the in-memory state, delete the snapshots outside
        ``[first_segment_base, log_end_offset]`` and load the latest remaining one (skipping
        corrupt ones). The caller replays batches from :attr:`map_end_offset`."""
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset < first_segment_base:
                self.delete_snapshot(offset)
        self._producers.clear()
        self._ongoing_txns.clear()
        while self._snapshots:
            offset = max(self._snapshots)
            try:
                entries = read_snapshot(self._snapshots[offset])
            except (CorruptSnapshotException, OSError) as exc:
                log.warning("%s: deleting unreadable producer snapshot: %s", self.tp, exc)
                self.delete_snapshot(offset)
                continue
            for entry in entries:
                self._load_entry(entry)
            self._last_map_offset = offset
            return
        self._last_map_offset = first_segment_base

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log was emptied and restarts at ``offset``: no state, no snapshots."""
        for snap in list(self._snapshots):
            self.delete_snapshot(snap)
        self._producers.clear()
        self._ongoing_txns.clear()
        self._last_map_offset = offset

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        first = entry.current_txn_first_offset
        if first is not None:
            self._ongoing_txns[first] = TxnMetadata(entry.producer_id, first)
            self._ongoing_txns = dict(sorted(self._ongoing_txns.items()))

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager({self.tp}, producers={len(self._producers)}, "
            f"map_end={self._last_map_offset}, snapshots={self.snapshot_offsets()})"
        )


# -- snapshot files ---------------------------------------------------------------------------
def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry]) -> None:
    """Write ``entries`` in Kafka's producer snapshot format, version 1 (big-endian)::

        version int16 (1) | crc uint32 (CRC32C of the rest) | count int32 |
        count x (producerId int64, epoch int16, lastSequence int32, lastOffset int64,
                 offsetDelta int32, timestamp int64, coordinatorEpoch int32,
                 currentTxnFirstOffset int64)

    Sluice writes one entry per cached batch, oldest first, so all five survive a restart;
    Kafka, which keeps the last entry per producer id, reads the same file correctly. The
    file is written atomically (checkpoint.write_atomically).
    """
    rows = bytearray()
    count = 0
    for entry in entries:
        txn_first = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        batches = list(entry.batch_metadata)
        if not batches:
            rows += _SNAPSHOT_ENTRY.pack(
                entry.producer_id, entry.producer_epoch, NO_SEQUENCE, -1, 0,
                entry.last_timestamp, entry.coordinator_epoch, txn_first,
            )  # fmt: skip
            count += 1
        for i, batch in enumerate(batches):
            timestamp = entry.last_timestamp if i == len(batches) - 1 else batch.timestamp
            rows += _SNAPSHOT_ENTRY.pack(
                entry.producer_id, entry.producer_epoch, batch.last_seq, batch.last_offset,
                batch.offset_delta, timestamp, entry.coordinator_epoch, txn_first,
            )  # fmt: skip
            count += 1
    body = struct.pack(">i", count) + rows
    data = struct.pack(">hI", PRODUCER_SNAPSHOT_VERSION, crc32c(body)) + body
    write_atomically(path, data)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Read a snapshot written by :func:`write_snapshot` (or by Kafka); entries of the same
    producer id are merged in file order. Raises CorruptSnapshotException."""
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotException(f"Snapshot {path.name} is truncated ({len(data)} bytes)")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotException(f"Snapshot {path.name} has unknown version {version}")
    computed = crc32c(memoryview(data)[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotException(
            f"Snapshot {path.name} is corrupt (stored crc = {crc}, computed crc = {computed})"
        )
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotException(f"Snapshot {path.name} has a bad size for {count} entries")
    entries: dict[int, ProducerStateEntry] = {}
    for i in range(count):
        pid, epoch, seq, offset, delta, timestamp, coordinator_epoch, txn_first = (
            _SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size)
        )
        entry = entries.get(pid)
        if entry is None:
            entry = entries[pid] = ProducerStateEntry(pid, epoch)
        entry.maybe_update_producer_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        entry.current_txn_first_offset = txn_first if txn_first >= 0 else None
        if offset >= 0:
            entry.batch_metadata.append(BatchMetadata(seq, offset, delta, timestamp))
    return list(entries.values())


# -- loading ----------------------------------------------------------------------------------
def rebuild_producer_state(
    manager: ProducerStateManager,
    segments: Sequence[LogSegment],
    log_end_offset: int,
    *,
    reload_from_clean_shutdown: bool = False,
) -> int:
    """Kafka's ``LogLoader.rebuildProducerState``: load the latest snapshot at or below
    ``log_end_offset`` and replay the batch headers (and only the control records of marker
    batches) from it to the log end offset, then snapshot there. Returns batches replayed.

    A log without any snapshot that was shut down cleanly had no producer state (a close
    with producers writes one): it starts empty without a scan, as in Kafka.
    """
    bases = [segment.base_offset for segment in segments]
    first = bases[0] if bases else log_end_offset
    offsets_to_snapshot = set(bases[-2:])
    if reload_from_clean_shutdown and manager.latest_snapshot_offset() is None:
        manager.truncate_fully_and_start_at(log_end_offset)
        return 0
    manager.truncate_and_reload(first, log_end_offset)
    replayed = 0
    for i, segment in enumerate(segments):
        upper = bases[i + 1] if i + 1 < len(bases) else log_end_offset
        start = max(manager.map_end_offset, segment.base_offset)
        if upper <= start or start >= log_end_offset:
            continue
        manager.update_map_end_offset(start)
        if segment.base_offset in offsets_to_snapshot:
            manager.take_snapshot()
        replayed += _replay_segment(manager, segment, start, log_end_offset)
    manager.update_map_end_offset(log_end_offset)
    manager.take_snapshot()
    if replayed:
        log.info(
            "%s: rebuilt producer state of %d producers from %d batches up to offset %d",
            manager.tp, len(manager.producers), replayed, log_end_offset,
        )  # fmt: skip
    return replayed


def _replay_segment(
    manager: ProducerStateManager, segment: LogSegment, start: int, end: int
) -> int:
    first = segment.translate_offset(start)
    if first is None:
        return 0
    headers = []
    for header in segment.batches(first.position):
        if header.base_offset >= end:
            break
        if header.last_offset >= start and header.producer_id >= 0:
            headers.append(header)
    if not headers:
        return 0

    def read_marker(header: BatchHeader) -> EndTxnMarker | None:
        data = segment.log.read(header.position, header.size_in_bytes)
        return read_end_txn_marker(data, header._replace(position=0))

    analysis = manager.analyze_and_validate(headers, AppendOrigin.REPLICATION, read_marker)
    manager.apply(analysis)
    index = segment.txn_index
    for txn in analysis.completed:
        if txn.is_aborted and txn.last_offset > index.last_offset:
            # The marker was appended but its index entry lost (a crash): write it again.
            index.append(
                AbortedTxn(
                    txn.producer_id, txn.first_offset, txn.last_offset,
                    manager.last_stable_offset_after(txn),
                )
            )  # fmt: skip
    return len(headers)
