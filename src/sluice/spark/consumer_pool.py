"""The consumers a Python worker keeps between the tasks it runs.

Spark's Kafka source keeps its executors' consumers in a pool
(``InternalKafkaConsumerPool``) so a task does not connect, look up metadata and
start a consumer for every micro-batch; :class:`ConsumerPool` does the same for the
``sluice`` source in each Python worker (Spark reuses a worker for many tasks). A
task takes a consumer made with the same configuration or makes one, and gives it
back when its range is read: unassigned (its buffered data dropped, its fetcher
idle) but connected. A consumer idle longer than ``idle_timeout_s`` (5 minutes, as
Spark's ``spark.kafka.consumer.cache.timeout``, below the broker's
``connections.max.idle.ms`` of 10 minutes) is closed at the next take or give-back;
at most ``capacity`` (16) idle consumers are kept, the longest idle closed first. A task
that fails closes its consumer instead of giving it back.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sluice.client.consumer.consumer import Consumer

__all__ = ["ConsumerPool", "pool"]

_Key = tuple[tuple[str, str], ...]


class ConsumerPool:
    """Idle consumers by configuration; see the module docstring."""

    def __init__(
        self,
        capacity: int = 16,
        idle_timeout_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        factory: Callable[[dict[str, Any]], Consumer] = Consumer,
    ) -> None:
        self.capacity = capacity
        self.idle_timeout_s = idle_timeout_s
        self._clock = clock
        self._factory = factory
        self._lock = threading.Lock()
        self._idle: list[tuple[float, _Key, Consumer]] = []  # oldest first

    @contextmanager
    def consumer(self, config: Mapping[str, Any]) -> Iterator[Consumer]:
        """A consumer with ``config``, given back to the pool after the block (closed
        instead if the block raised)."""
        key = tuple(sorted((k, str(v)) for k, v in config.items()))
        consumer = self._take(key) or self._factory(dict(config))
        try:
            yield consumer
        except BaseException:
            consumer.close(autocommit=False)
            raise
        self._give_back(key, consumer)

    def _take(self, key: _Key) -> Consumer | None:
        with self._lock:
            expired = self._expire()
            found = None
            for i in range(len(self._idle) - 1, -1, -1):
                if self._idle[i][1] == key:
                    found = self._idle.pop(i)[2]
                    break
        _close_all(expired)
        return found

    def _give_back(self, key: _Key, consumer: Consumer) -> None:
        try:
            consumer.assign([])
        except Exception:
            consumer.close(autocommit=False)
            raise
        with self._lock:
            self._idle.append((self._clock(), key, consumer))
            expired = self._expire()
            while len(self._idle) > self.capacity:
                expired.append(self._idle.pop(0)[2])
        _close_all(expired)

    def _expire(self) -> list[Consumer]:
        limit = self._clock() - self.idle_timeout_s
        expired = [c for since, _k, c in self._idle if since < limit]
        self._idle = [entry for entry in self._idle if entry[0] >= limit]
        return expired

    def close(self) -> None:
        """Close every idle consumer."""
        with self._lock:
            idle, self._idle = self._idle, []
        _close_all([c for _s, _k, c in idle])

    def __len__(self) -> int:
        with self._lock:
            return len(self._idle)


def _close_all(consumers: list[Consumer]) -> None:
    for consumer in consumers:
        consumer.close(autocommit=False)


pool = ConsumerPool()
"""The pool of this process (a Spark Python worker); closed when the process exits."""
atexit.register(pool.close)
