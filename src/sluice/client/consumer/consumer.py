"""``Consumer``: Sluice's Kafka consumer (the Java ``KafkaConsumer``'s API and configs).

    from sluice.client import Consumer, TopicPartition

    with Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "g",
                   "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe(["events"])
        for record in consumer.poll(1.0):
            print(record.offset, record.key, record.value)

A background :class:`~.fetcher.Fetcher` thread prefetches records through
incremental fetch sessions while the application processes the previous ones;
``poll`` hands out what has been buffered, joins or rejoins the group when needed
(:class:`~.group_coordinator.ConsumerCoordinator`) and auto-commits. All methods
except :meth:`wakeup`-free ``close`` are meant for one application thread, like
Kafka's. See ``docs/consumer.md``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Final, Protocol, TypeVar

from sluice.client.consumer.fetcher import (
    EARLIEST,
    LATEST,
    Fetcher,
    SubscriptionState,
    TopicPartition,
    list_offsets,
)
from sluice.client.consumer.fetcher_records import ConsumerRecord
from sluice.client.consumer.group_coordinator import ConsumerCoordinator, OffsetAndMetadata
from sluice.client.errors import ConfigException, KafkaException
from sluice.client.net.consumer_network_client import ConsumerNetworkClient
from sluice.client.security import SECURITY_CONFIG_DEFAULTS, ClientSecurity

_T = TypeVar("_T")
__all__ = ["Consumer", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndMetadata",
           "TopicPartition"]  # fmt: skip

_DEFAULTS: Final[dict[str, Any]] = {
    "bootstrap.servers": None,
    "group.id": None,
    "group.instance.id": None,
    "client.id": "sluice-consumer",
    "auto.offset.reset": "latest",
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "fetch.min.bytes": 1,
    "fetch.max.wait.ms": 500,
    "max.partition.fetch.bytes": 1_048_576,
    "fetch.max.bytes": 52_428_800,
    "queued.max.bytes": None,
    "isolation.level": "read_uncommitted",
    "session.timeout.ms": 45_000,
    "heartbeat.interval.ms": 3_000,
    "max.poll.interval.ms": 300_000,
    "max.poll.records": 500,
    "partition.assignment.strategy": "range,roundrobin",
    "request.timeout.ms": 30_000,
    "metadata.max.age.ms": 300_000,
    "check.crcs": True,
    "allow.auto.create.topics": False,
    **SECURITY_CONFIG_DEFAULTS,  # security.protocol, ssl.*
}


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


class ConsumerRebalanceListener(Protocol):
    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...


class Consumer:
    """A Kafka consumer: manual ``assign`` or group ``subscribe``, prefetching ``poll``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        unknown = set(config) - set(_DEFAULTS)
        if unknown:
            raise ConfigException(f"unknown consumer configuration: {', '.join(sorted(unknown))}")
        self.config: dict[str, Any] = {**_DEFAULTS, **config}
        if not self.config["bootstrap.servers"]:
            raise ConfigException("bootstrap.servers is required")
        reset = str(self.config["auto.offset.reset"]).lower()
        if reset not in ("earliest", "latest", "none", "smallest", "largest", "beginning", "end"):
            raise ConfigException(f"invalid auto.offset.reset {reset!r}")
        if self.config["isolation.level"] not in ("read_uncommitted", "read_committed"):
            raise ConfigException(f"invalid isolation.level {self.config['isolation.level']!r}")
        if self.config["queued.max.bytes"] is None:
            self.config["queued.max.bytes"] = 4 * int(self.config["max.partition.fetch.bytes"])
        self.group_id: str | None = self.config["group.id"]
        self.auto_commit = _bool(self.config["enable.auto.commit"]) and self.group_id is not None
        self.auto_commit_interval_s = int(self.config["auto.commit.interval.ms"]) / 1000
        self.max_poll_records = int(self.config["max.poll.records"])
        self.metadata_max_age_s = int(self.config["metadata.max.age.ms"]) / 1000
        client_id = str(self.config["client.id"])
        timeout_ms = int(self.config["request.timeout.ms"])
        servers = str(self.config["bootstrap.servers"])
        security = ClientSecurity.from_config(self.config)
        self._client = ConsumerNetworkClient(servers, client_id, timeout_ms, security)
        self._fetch_client = ConsumerNetworkClient(servers, client_id, timeout_ms, security)
        self._subs = SubscriptionState(reset)
        self.fetcher = Fetcher(self._fetch_client, self._subs, self.config)
        self.fetcher.start()
        self._coordinator: ConsumerCoordinator | None = None
        if self.group_id is not None:
            self._coordinator = ConsumerCoordinator(self._client, self.group_id, self.config)
        self._subscribed: list[str] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._listener: Any = None
        self._on_assign: Callable[[Consumer, list[TopicPartition]], None] | None = None
        self._on_revoke: Callable[[Consumer, list[TopicPartition]], None] | None = None
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        self._next_metadata = 0.0
        self._committer: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False

    # -- assignment --------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Manually assign partitions (replacing any previous assignment)."""
        self._check_open()
        if self._subscribed is not None or self._pattern is not None:
            raise KafkaException("assign() after subscribe(): call unsubscribe() first")
        tps = [TopicPartition(*tp) for tp in partitions]
        self._subs.assign(tps, needs_committed=self.group_id is not None)

    def assignment(self) -> list[TopicPartition]:
        with self._subs.lock:
            return list(self._subs.partitions)

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        listener: ConsumerRebalanceListener | None = None,
        on_assign: Callable[[Consumer, list[TopicPartition]], None] | None = None,
        on_revoke: Callable[[Consumer, list[TopicPartition]], None] | None = None,
    ) -> None:
        """Join the group for ``topics`` (a list, or a regex: a ``re.Pattern`` or a
        string starting with ``^``). The group is joined in :meth:`poll`."""
        self._check_open()
        if self._coordinator is None:
            raise ConfigException("subscribe() needs group.id")
        if isinstance(topics, re.Pattern):
            self._pattern, self._subscribed = topics, []
        elif isinstance(topics, str):
            if topics.startswith("^"):
                self._pattern, self._subscribed = re.compile(topics), []
            else:
                self._pattern, self._subscribed = None, [topics]
        else:
            self._pattern = None
            self._subscribed = []
            for t in topics:
                if t.startswith("^"):
                    self._pattern = re.compile(t)
                else:
                    self._subscribed.append(t)
        self._listener, self._on_assign, self._on_revoke = listener, on_assign, on_revoke
        self._next_metadata = 0.0
        self._coordinator.rejoin_needed = True

    def subscription(self) -> list[str]:
        return list(self._subscribed or [])

    def unsubscribe(self) -> None:
        if self._coordinator is not None and self._subscribed is not None:
            self._revoked(list(self._subs.partitions))
            self._coordinator.close(leave=True)
            self._coordinator = ConsumerCoordinator(self._client, self.group_id or "", self.config)
        self._subscribed = None
        self._pattern = None
        self._subs.assign([], needs_committed=False)

    # -- polling -----------------------------------------------------------------------

    def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Records fetched since the last poll (at most ``max.poll.records``), waiting
        up to ``timeout`` seconds for some."""
        self._check_open()

        def take() -> list[ConsumerRecord] | None:
            if not self._subs.has_ready_data():
                return None
            return self._subs.drain(self.max_poll_records)

        return self._poll_until(timeout, False, take) or []

    def poll_arrow(self, timeout: float = 0.0, max_records: int | None = None) -> list[Any]:
        """:meth:`poll`, with the records as Arrow data: ``pyarrow.RecordBatch`` es of
        ``ConsumerRecord``'s fields as columns (``topic``, ``partition``, ``offset``,
        ``timestamp`` (ms, UTC), ``timestamp_type`` (1 create, 2 log append), ``key``,
        ``value``, ``headers`` (list of key/value structs), ``leader_epoch``), each with
        records of one partition in offset order. At most ``max_records`` records in
        all (default ``max.poll.records``). The records are decoded in bulk, without a
        Python object per record; positions and commits advance as with :meth:`poll`.
        Needs ``pyarrow`` and ``numpy``."""
        self._check_open()
        limit = self.max_poll_records if max_records is None else max(1, int(max_records))

        def take() -> list[Any] | None:
            taken = self._subs.drain_columns(limit) if self._subs.has_ready_data() else []
            return taken or None

        taken = self._poll_until(timeout, True, take) or []
        return [columns.to_arrow(*tp) for tp, columns in taken]

    def _poll_until(
        self, timeout: float, columns: bool, take: Callable[[], list[_T] | None]
    ) -> list[_T] | None:
        """Keep the group and positions up, decode what the fetcher brought (as records
        or columns) and ``take`` under the lock until it gives something (not None) or
        ``timeout`` seconds pass (None)."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            self._maintain_group(deadline)
            self._maybe_auto_commit()
            self._init_positions()
            with self._subs.lock:
                undecoded = self._subs.undecoded(columns=columns)
            for completed, position in undecoded:  # decoded while the fetcher goes on
                if columns:
                    completed.take_columns(position)
                else:
                    completed.take_records(position)
            with self._subs.lock:
                self._raise_errors()
                got = take()
                if got is not None:
                    return got
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._subs.changed.wait(min(remaining, 0.1))

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[ConsumerRecord]:
        """confluent-kafka style: up to ``num_messages`` records within ``timeout``."""
        saved = self.max_poll_records
        self.max_poll_records = num_messages
        try:
            return self.poll(3600.0 if timeout < 0 else timeout)
        finally:
            self.max_poll_records = saved

    def _raise_errors(self) -> None:
        if self._subs.errors:
            error = self._subs.errors.pop(0)
            raise error

    def _maintain_group(self, deadline: float) -> None:
        coordinator = self._coordinator
        if coordinator is None or self._subscribed is None:
            return
        topics = self._topics_for_subscription()
        if topics != self._joined_topics():
            coordinator.rejoin_needed = True
        if not coordinator.rejoin_needed:
            return
        if self.auto_commit and coordinator.stable:
            self._commit_positions()
        self._joined = topics
        coordinator.join(
            topics, self._revoked, self._assigned, max(deadline - time.monotonic(), 0.0) + 30.0
        )

    def _joined_topics(self) -> list[str]:
        return getattr(self, "_joined", [])

    def _topics_for_subscription(self) -> list[str]:
        if self._pattern is None:
            return sorted(self._subscribed or [])
        now = time.monotonic()
        if now >= self._next_metadata:
            self._client.refresh_metadata(None)
            self._next_metadata = now + min(self.metadata_max_age_s, 5.0)
        explicit = set(self._subscribed or [])
        cluster = self._client.cluster
        matched = {
            t for t in cluster.topics() - cluster.internal_topics if self._pattern.match(t)
        }  # fmt: skip
        return sorted(explicit | matched)

    def _cooperative(self) -> bool:
        return self._coordinator is not None and self._coordinator.cooperative

    def _revoked(self, partitions: list[TopicPartition]) -> None:
        if self.auto_commit and partitions:
            # if the generation is gone, the next owner restarts from the last commit
            with contextlib.suppress(KafkaException):
                self._commit_positions()
        if self._listener is not None:
            self._listener.on_partitions_revoked(partitions)
        if self._on_revoke is not None:
            self._on_revoke(self, partitions)
        remaining: list[TopicPartition] = []
        if self._cooperative():  # KIP-429: only the partitions that move are dropped
            gone = set(partitions)
            with self._subs.lock:
                remaining = [tp for tp in self._subs.partitions if tp not in gone]
        self._subs.assign(remaining, needs_committed=False)

    def _assigned(self, partitions: list[TopicPartition]) -> None:
        if self._cooperative():  # KIP-429: the new partitions are added
            with self._subs.lock:
                current = list(self._subs.partitions)
            partitions_now = current + [tp for tp in partitions if tp not in set(current)]
            self._subs.assign(partitions_now, needs_committed=True)
        else:
            self._subs.assign(partitions, needs_committed=True)
        if self._listener is not None:
            self._listener.on_partitions_assigned(partitions)
        if self._on_assign is not None:
            self._on_assign(self, partitions)

    def _init_positions(self) -> None:
        with self._subs.lock:
            needing = {tp: s.epoch for tp, s in self._subs.partitions.items() if s.needs_committed}
        if not needing:
            return
        committed: dict[TopicPartition, OffsetAndMetadata | None] = {}
        if self._coordinator is not None:
            committed = self._coordinator.fetch_committed(list(needing))
        with self._subs.lock:
            for tp, epoch in needing.items():
                state = self._subs.partitions.get(tp)
                if state is None or state.epoch != epoch or not state.needs_committed:
                    continue
                state.needs_committed = False
                om = committed.get(tp)
                if om is not None:
                    state.position = state.fetch_position = om.offset
                else:
                    state.reset = self._subs.reset_for_default(tp)
            self._subs.changed.notify_all()

    # -- positions ---------------------------------------------------------------------

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Fetch ``partition`` from ``offset`` on the next poll (a negative offset:
        -2 beginning, -1 end)."""
        tp = TopicPartition(*partition)
        if offset in (EARLIEST, LATEST):
            self._subs.seek(tp, None, offset)
        elif offset < 0:
            raise KafkaException(f"invalid offset {offset}")
        else:
            self._subs.seek(tp, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._targets(partitions):
            self._subs.seek(tp, None, EARLIEST)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._targets(partitions):
            self._subs.seek(tp, None, LATEST)

    def _targets(self, partitions: Iterable[TopicPartition] | None) -> list[TopicPartition]:
        if partitions is None:
            return self.assignment()
        return [TopicPartition(*tp) for tp in partitions]

    def position(self, partition: TopicPartition | tuple[str, int], timeout: float = 30.0) -> int:
        """The offset of the next record poll will return for ``partition`` (resolves
        a pending reset or committed offset, waiting up to ``timeout`` seconds)."""
        tp = TopicPartition(*partition)
        deadline = time.monotonic() + timeout
        while True:
            self._init_positions()
            with self._subs.lock:
                self._raise_errors()
                state = self._subs.partitions.get(tp)
                if state is None:
                    raise KafkaException(f"{tp} is not assigned to this consumer")
                if state.position is not None:
                    return state.position
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaException(f"timed out resolving the position of {tp}")
                self._subs.changed.wait(min(remaining, 0.1))

    def pause(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._subs.set_paused([TopicPartition(*tp) for tp in partitions], True)

    def resume(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._subs.set_paused([TopicPartition(*tp) for tp in partitions], False)

    def paused(self) -> list[TopicPartition]:
        with self._subs.lock:
            return [tp for tp, s in self._subs.partitions.items() if s.paused]

    def _list_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]], timestamp: int
    ) -> dict[TopicPartition, int | None]:
        tps = [TopicPartition(*tp) for tp in partitions]
        self._client.refresh_metadata(sorted({tp.topic for tp in tps}))
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp in tps:
            node = self._client.leader_for(*tp)
            if node < 0:
                raise KafkaException(f"no leader for {tp}")
            by_node.setdefault(node, {})[tp] = timestamp
        out: dict[TopicPartition, int | None] = {}
        read_committed = self.config["isolation.level"] == "read_committed"
        for node, wanted in by_node.items():
            out.update(list_offsets(self._client, node, wanted, read_committed))
        return out

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int | None]:
        return self._list_offsets(partitions, EARLIEST)

    def end_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int | None]:
        return self._list_offsets(partitions, LATEST)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        for tp, ts in timestamps.items():
            out.update(self._list_offsets([tp], ts))
        return out

    def partitions_for(self, topic: str) -> list[int]:
        self._client.refresh_metadata([topic])
        return [p.partition for p in self._client.cluster.partitions_for_topic(topic)]

    def list_topics(self) -> list[str]:
        body = self._client.refresh_metadata(None)
        return sorted(t.name for t in body.topics if not t.is_internal)

    # -- commits -----------------------------------------------------------------------

    def committed(
        self, partitions: Iterable[TopicPartition | tuple[str, int]], timeout: float = 30.0
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions``."""
        if self._coordinator is None:
            raise ConfigException("committed() needs group.id")
        return self._coordinator.fetch_committed([TopicPartition(*tp) for tp in partitions])

    def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        asynchronous: bool = False,
    ) -> concurrent.futures.Future[None] | None:
        """Commit ``offsets`` (the next offsets to consume), or the current positions.

        With ``asynchronous=True`` the commit runs on a background thread and a
        Future is returned; otherwise it completes (or raises) before returning.
        """
        self._check_open()
        if self._coordinator is None:
            raise ConfigException("commit() needs group.id")
        if offsets is None:
            todo = self._positions()
        else:
            todo = {
                TopicPartition(*tp): v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(v)
                for tp, v in offsets.items()
            }
        in_group = self._subscribed is not None
        coordinator = self._coordinator
        if asynchronous:
            if self._committer is None:
                self._committer = concurrent.futures.ThreadPoolExecutor(1, "sluice-commit")
            return self._committer.submit(coordinator.commit, todo, in_group)
        coordinator.commit(todo, in_group)
        return None

    def _positions(self) -> dict[TopicPartition, OffsetAndMetadata]:
        with self._subs.lock:
            return {
                tp: OffsetAndMetadata(s.position)
                for tp, s in self._subs.partitions.items()
                if s.position is not None
            }

    def _commit_positions(self) -> None:
        if self._coordinator is not None:
            self._coordinator.commit(self._positions(), self._subscribed is not None)

    def _maybe_auto_commit(self) -> None:
        if not self.auto_commit or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        coordinator = self._coordinator
        if coordinator is not None and (self._subscribed is None or coordinator.stable):
            # on failure, retried at the next interval (Kafka logs and moves on too)
            with contextlib.suppress(KafkaException):
                self._commit_positions()

    # -- closing -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaException("the consumer is closed")

    def close(self, autocommit: bool = True) -> None:
        """Commit (with auto commit on), leave the group, stop the fetcher."""
        if self._closed:
            return
        self._closed = True
        try:
            if autocommit and self.auto_commit:
                with contextlib.suppress(KafkaException):
                    self._commit_positions()
            if self._committer is not None:
                self._committer.shutdown(wait=True)
            if self._coordinator is not None:
                if self._subscribed is not None and self._listener is not None:
                    self._listener.on_partitions_revoked(self.assignment())
                self._coordinator.close(leave=self._subscribed is not None)
        finally:
            # Closing the fetch client first ends a fetch in flight (a long poll of up to
            # fetch.max.wait.ms) at once, instead of the join waiting it out.
            self.fetcher.stop()
            self._fetch_client.close()
            self.fetcher.join(5)
            self._client.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
