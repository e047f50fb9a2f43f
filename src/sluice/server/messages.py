"""Message building for the request handlers (see :mod:`sluice.protocol.build`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sluice.base import TopicPartition
from sluice.protocol import ErrorCode
from sluice.protocol.build import build, field, ms

__all__ = ["build", "field", "ms", "partition_errors_by_topic"]


def partition_errors_by_topic(
    order: Iterable[TopicPartition], errors: Mapping[TopicPartition, ErrorCode]
) -> list[dict[str, Any]]:
    """``[{"name": topic, "partitions": [{"partition_index", "error_code"}...]}...]`` in
    request order: the topics of an OffsetCommit-style response."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": errors[tp]}
        )
    return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
