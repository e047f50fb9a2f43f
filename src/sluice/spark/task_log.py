"""One line per read task of the ``sluice`` source in the executor's log: the range it
read, the process it ran in and the brokers it fetched from.

Spark runs a source's ``read()`` in Python worker processes beside each executor, and
what they write to stderr lands in the executor's log (its ``stderr`` file in the
worker's work directory, the executor's log page in Spark's UI). Python's logging is not
configured in those processes, so the lines are written only when the executors'
environment sets ``SLUICE_SPARK_LOG_LEVEL`` (``spark.executorEnv.SLUICE_SPARK_LOG_LEVEL=
INFO``): the ``sluice.spark`` loggers then write to stderr at that level. A line (after
the time and level)::

    sluice.spark: read clicks-2 [0, 1500) in process 4711 from broker 3 at 127.0.0.1:9093
    (4 fetches)

on one line; a task whose partition changed leader while it read names each broker,
separated by ``; ``.

:func:`parse_task_reads` turns such lines back into :class:`TaskRead` values, for tests
and for the demo's summary of which broker served which partition.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluice.base import TopicPartition

if TYPE_CHECKING:
    from sluice.client.consumer.consumer import Consumer

__all__ = [
    "LOG_LEVEL_ENV",
    "BrokerFetches",
    "TaskRead",
    "fetch_counts",
    "log_task_read",
    "parse_task_reads",
]

LOG_LEVEL_ENV = "SLUICE_SPARK_LOG_LEVEL"
"""The environment variable that turns the task lines on in Spark's Python workers."""

log = logging.getLogger("sluice.spark")

_configured = False


def _configure_from_env() -> None:
    """Give ``sluice.spark`` a stderr handler at ``$SLUICE_SPARK_LOG_LEVEL``, once per
    process, when the variable is set and the logger has no handler of its own yet."""
    global _configured
    if _configured:
        return
    _configured = True
    level = os.environ.get(LOG_LEVEL_ENV, "").strip().upper()
    if not level or log.handlers:
        return
    # the process's own stderr: Spark may wrap sys.stderr while a task runs
    handler = logging.StreamHandler(sys.__stderr__ or sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False  # Spark's own capture of worker output would repeat the line


def fetch_counts(consumer: Consumer, topic: str, partition: int) -> dict[int, int]:
    """How many Fetch responses of ``consumer`` covered ``topic-partition`` so far, by
    broker id; a task takes them when it starts, since a consumer may serve many tasks."""
    return dict(consumer.fetcher.partition_fetches.get(TopicPartition(topic, partition), {}))


def log_task_read(
    topic: str, partition: int, start: int, end: int, consumer: Consumer,
    before: Mapping[int, int],
) -> None:  # fmt: skip
    """Log that this task read ``[start, end)`` of ``topic-partition`` with ``consumer``,
    naming each broker its Fetch requests for the partition went to since ``before``
    (:func:`fetch_counts` at the task's start): id, address and count."""
    _configure_from_env()
    if not log.isEnabledFor(logging.INFO):
        return
    cluster = consumer.fetcher.client.cluster
    served = []
    for node_id, total in sorted(fetch_counts(consumer, topic, partition).items()):
        fetches = total - before.get(node_id, 0)
        if fetches <= 0:
            continue
        node = cluster.node_by_id(node_id)
        address = "?:0" if node is None else f"{node.host}:{node.port}"
        served.append(f"broker {node_id} at {address} ({fetches} fetches)")
    log.info(
        "read %s-%d [%d, %d) in process %d from %s",
        topic, partition, start, end, os.getpid(), "; ".join(served) or "no broker",
    )  # fmt: skip


@dataclass(frozen=True)
class BrokerFetches:
    """One broker a task fetched from, and how many Fetch responses it gave."""

    broker_id: int
    host: str
    port: int
    fetches: int


@dataclass(frozen=True)
class TaskRead:
    """One task's line: the range it read, its process id and the brokers it fetched
    from (more than one when the leadership moved during the read)."""

    topic: str
    partition: int
    start: int
    end: int
    pid: int
    brokers: tuple[BrokerFetches, ...]

    @property
    def broker_ids(self) -> frozenset[int]:
        return frozenset(b.broker_id for b in self.brokers)


_LINE = re.compile(
    r"sluice\.spark: read (?P<topic>\S+)-(?P<partition>\d+) \[(?P<start>\d+), (?P<end>\d+)\) "
    r"in process (?P<pid>\d+) from (?P<brokers>.*)$"
)
_BROKER = re.compile(
    r"broker (?P<id>-?\d+) at (?P<host>[^\s:]+|\[[^\]]+\]):(?P<port>\d+) \((?P<n>\d+) fetches\)"
)


def parse_task_reads(text: str) -> list[TaskRead]:
    """The task lines in ``text`` (an executor's log), in order; other lines are skipped."""
    out = []
    for line in text.splitlines():
        match = _LINE.search(line.rstrip())
        if match is None:
            continue
        brokers = tuple(
            BrokerFetches(int(b["id"]), b["host"], int(b["port"]), int(b["n"]))
            for b in _BROKER.finditer(match["brokers"])
        )
        topic, partition, pid = match["topic"], int(match["partition"]), int(match["pid"])
        out.append(TaskRead(topic, partition, int(match["start"]), int(match["end"]), pid, brokers))
    return out
