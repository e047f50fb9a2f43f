"""Helpers for the cluster tests: waiting on conditions with deadlines."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout_s: float, what: str) -> T:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout_s``.
    Exceptions from ``condition`` count as "not yet"."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what} ({last!r})")
        time.sleep(0.05)


def partition_metadata(bootstrap: str, topic: str, partition: int = 0) -> Any:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(topic=topic, timeout=5)
    t = md.topics.get(topic)
    if t is None or t.error is not None or partition not in t.partitions:
        return None
    p = t.partitions[partition]
    return p if p.error is None else None
