"""The log cleaner under test: compacted logs on a manual clock, key-value batches, a
cleaner for a log, and reading back what survived."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.base.clock import ManualClock
from sluice.log import Log, LogConfig
from sluice.log.cleaner.log_cleaner import CompactionConfig, LogCleaner
from support.records import DecodedRecord, Rec, build_batch, decode_batches

Pair = tuple[bytes | None, bytes | None]


def compact_config(**kw: Any) -> LogConfig:
    base: dict[str, Any] = {
        "cleanup_policy": "compact",
        "segment_bytes": 1024,
        "index_interval_bytes": 128,
        "file_delete_delay_ms": 0,
    }
    base.update(kw)
    return LogConfig(**base)


def open_log(path: Path, clock: ManualClock, **kw: Any) -> Log:
    return Log(path, compact_config(**kw), clock=clock)


def kv_batch(pairs: list[Pair], clock: ManualClock, codec: int = 0, **kw: Any) -> bytes:
    """One batch of (key, value) records stamped with the clock's time."""
    return build_batch(
        [Rec(value, key=key, timestamp=clock.milliseconds()) for key, value in pairs],
        compression=codec,
        **kw,
    )


def cleaner_for(log: Log, clock: ManualClock, **config: Any) -> LogCleaner:
    defaults: dict[str, Any] = {"min_cleanable_dirty_ratio": 0.0}
    defaults.update(config)
    compaction = CompactionConfig(**defaults)
    return LogCleaner(lambda: [log], config_for=lambda _: compaction, clock=clock)


def read_batches(log: Log) -> list[tuple[tuple[int, ...], list[DecodedRecord]]]:
    """Every batch from the log start to the log end, read through ``Log.read``."""
    out: list[tuple[tuple[int, ...], list[DecodedRecord]]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        if info.size == 0:
            break
        for fields, records in decode_batches(info.read()):
            last = fields[0] + fields[6]
            if last >= offset:
                out.append((fields, records))
                offset = last + 1
    return out


def read_records(log: Log) -> list[DecodedRecord]:
    return [r for _, records in read_batches(log) for r in records]


def key_values(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in read_records(log)]


def latest_view(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, bytes]:
    """Replay (offset, key, value) in order: the table a compacted topic describes."""
    table: dict[bytes, bytes] = {}
    for _, key, value in records:
        assert key is not None
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table
