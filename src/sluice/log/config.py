"""Topic-level log configuration with Kafka's names and defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sluice.config import format_config_value, parse_bool
from sluice.log.errors import ConfigException

__all__ = ["LogConfig"]

LONG_MAX = 2**63 - 1


_CREATE_TIME = "CreateTime"
_LOG_APPEND_TIME = "LogAppendTime"
_CLEANUP_POLICIES = frozenset({"delete", "compact"})


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-topic log settings; attribute names are Kafka's topic config names with ``_`` for
    ``.`` (``segment.bytes`` -> ``segment_bytes``) and the defaults are Kafka's."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1024 * 1024 + 12
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = _CREATE_TIME
    # How far a CreateTime timestamp may lie before or after the broker's clock (KIP-937;
    # the deprecated difference.max.ms stands for both when they are unset)
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False  # allocate a new segment's whole file at once (file_records.py)
    segment_recycle: bool = True  # Sluice's own: reuse removed segments' files (local_log.py)
    # Sluice's own: create the next segment's files on the file thread once the active one
    # is half full, so that a roll creates none on the event loop (next_segment.py)
    segment_prepare_next: bool = True

    def __post_init__(self) -> None:
        # Kafka's lower bounds: a segment must hold at least a minimal legacy record.
        _at_least("segment.bytes", self.segment_bytes, 14)
        _at_least("segment.ms", self.segment_ms, 1)
        _at_least("segment.jitter.ms", self.segment_jitter_ms, 0)
        _at_least("segment.index.bytes", self.segment_index_bytes, 4)
        _at_least("max.message.bytes", self.max_message_bytes, 0)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _at_least("flush.messages", self.flush_messages, 1)
        _at_least("flush.ms", self.flush_ms, 0)
        _at_least("file.delete.delay.ms", self.file_delete_delay_ms, 0)
        _at_least("retention.ms", self.retention_ms, -1)
        for side in ("difference", "before", "after"):
            name = f"message.timestamp.{side}.max.ms"
            _at_least(name, getattr(self, name.replace(".", "_")), 0)
        if self.message_timestamp_type not in (_CREATE_TIME, _LOG_APPEND_TIME):
            raise ConfigException(
                f"Invalid value {self.message_timestamp_type!r} for message.timestamp.type: "
                f"must be {_CREATE_TIME} or {_LOG_APPEND_TIME}"
            )
        if not self.cleanup_policies or not self.cleanup_policies <= _CLEANUP_POLICIES:
            raise ConfigException(f"Invalid value {self.cleanup_policy!r} for cleanup.policy")

    @property
    def cleanup_policies(self) -> frozenset[str]:
        return frozenset(p.strip() for p in self.cleanup_policy.split(",") if p.strip())

    @property
    def delete_enabled(self) -> bool:
        """True when ``cleanup.policy`` contains ``delete`` (time/size retention applies)."""
        return "delete" in self.cleanup_policies

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policies

    @property
    def timestamp_bounds(self) -> tuple[int, int] | None:
        """(before, after) in ms for CreateTime topics whose timestamps are checked, as
        Kafka's LogConfig reads them; None when neither is bounded."""
        if self.log_append_time:
            return None
        before = self.message_timestamp_before_max_ms
        after = self.message_timestamp_after_max_ms
        if before == LONG_MAX:
            before = self.message_timestamp_difference_max_ms
        if after == LONG_MAX:
            after = self.message_timestamp_difference_max_ms
        if before == LONG_MAX and after == LONG_MAX:
            return None
        return before, after

    @property
    def log_append_time(self) -> bool:
        """True for ``message.timestamp.type=LogAppendTime``."""
        return self.message_timestamp_type == _LOG_APPEND_TIME

    @property
    def max_index_size(self) -> int:
        return self.segment_index_bytes

    @classmethod
    def kafka_names(cls) -> tuple[str, ...]:
        return tuple(f.name.replace("_", ".") for f in dataclasses.fields(cls))

    @classmethod
    def from_properties(
        cls, props: Mapping[str, Any], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Build from Kafka-named properties (``{"segment.bytes": "1048576"}``); unknown
        names raise :class:`ConfigException`; unset names keep ``defaults``'s values."""
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for name, value in props.items():
            field = name.replace(".", "_")
            if field not in cls.__dataclass_fields__:
                raise ConfigException(f"Unknown topic config name: {name}")
            current = getattr(base, field)
            try:
                if isinstance(current, bool):
                    changes[field] = value if isinstance(value, bool) else parse_bool(name, value)
                else:
                    changes[field] = int(value) if isinstance(current, int) else str(value)
            except (TypeError, ValueError) as exc:
                raise ConfigException(f"Invalid value {value!r} for {name}") from exc
        return dataclasses.replace(base, **changes)

    def to_properties(self) -> dict[str, str]:
        """The configuration as Kafka-named string properties."""
        return {
            f.name.replace("_", "."): str(format_config_value(getattr(self, f.name)))
            for f in dataclasses.fields(self)
        }


def _at_least(name: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ConfigException(f"Invalid value {value} for {name}: must be at least {minimum}")
