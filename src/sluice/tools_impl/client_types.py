"""The library-neutral side of the tools' client interface: results, errors, offsets.

:mod:`sluice.tools_impl.client` implements the interface (today on confluent-kafka)
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
    "Headers",
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
