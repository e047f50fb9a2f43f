"""The library-neutral side of the tools' client interface: results, errors, offsets.

:mod:`sluice.cli.tool_clients` implements the interface (on Sluice's own clients)
and re-exports these names, so the tools import everything from there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal

__all__ = [
    "EARLIEST",
    "LATEST",
    "ClientError",
    "ConfigValue",
    "GroupDescription",
    "GroupMember",
    "GroupPartitionLag",
    "Headers",
    "LogDirInfo",
    "LogDirReplica",
    "PartitionDescription",
    "Record",
    "StartOffset",
    "TopicDescription",
    "Warn",
]

EARLIEST: Literal["earliest"] = "earliest"
LATEST: Literal["latest"] = "latest"
StartOffset = int | Literal["earliest", "latest"]
Headers = list[tuple[str, bytes | None]]
Warn = Callable[[str], None]


class ClientError(Exception):
    """A request failed; ``code`` is the Kafka error name (e.g. TOPIC_ALREADY_EXISTS)."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int  # -1: none
    replicas: list[int]
    isr: list[int]


@dataclasses.dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str  # Kafka's text form: URL-safe base64 without padding
    is_internal: bool
    partitions: list[PartitionDescription]


@dataclasses.dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp_type: str | None  # "CreateTime", "LogAppendTime" or None (no timestamp)
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers


@dataclasses.dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: list[tuple[str, int]]  # (topic, partition)
    group_instance_id: str | None = None


@dataclasses.dataclass(frozen=True)
class GroupPartitionLag:
    topic: str
    partition: int
    current_offset: int | None  # None: nothing committed
    log_end_offset: int | None
    lag: int | None
    member: GroupMember | None  # the member it is assigned to, if any


@dataclasses.dataclass(frozen=True)
class GroupDescription:
    group: str
    state: str
    members: list[GroupMember]
    partitions: list[GroupPartitionLag]
    protocol: str = ""  # the assignment strategy the group chose ("range", ...)
    coordinator: tuple[str, int, int] | None = None  # (host, port, broker id)


@dataclasses.dataclass
class LogDirReplica:
    """A partition log in a log directory."""

    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclasses.dataclass
class LogDirInfo:
    """One log directory of a broker; ``error`` is the Kafka error name, or None."""

    path: str
    error: str | None
    replicas: list[LogDirReplica]


@dataclasses.dataclass(frozen=True)
class ConfigValue:
    """One entry of a DescribeConfigs answer."""

    name: str
    value: str | None
    source: str  # Kafka's ConfigSource name (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...)
    sensitive: bool
    synonyms: list[tuple[str, str, str | None]]  # (source, name, value)
