"""``Metadata``: the client's view of the cluster and when to refresh it (Kafka's
``Metadata`` with the producer's topic handling).

Application threads read :attr:`Metadata.cluster` (an immutable snapshot) and ask
for updates (:meth:`add`, :meth:`request_update`); the network thread decides
when to send a Metadata request (:meth:`time_to_next_update`), builds its topic
list (:meth:`request_topics`) and feeds the response back (:meth:`update`).
Waiters in :meth:`await_update` wake on every update or failure.

Topics requested for the first time go out in a *partial* request (only them);
a full request names every topic in use. Topics unused for
``metadata.max.idle.ms`` are dropped. Refreshes are spaced by
``retry.backoff.ms``, growing exponentially to ``retry.backoff.max.ms`` while
they fail, and happen at least every ``metadata.max.age.ms``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sluice.base.clock import Clock
from sluice.client.backoff import ExponentialBackoff
from sluice.client.net.cluster import Cluster, Node, PartitionInfo
from sluice.protocol.errors import ErrorCode

__all__ = ["Metadata"]

log = logging.getLogger(__name__)

_FOREVER = 2**63 - 1
_RETRY_TOPIC_ERRORS = frozenset(
    {ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available}
)


class Metadata:
    """Cluster metadata shared by the application threads and the network thread."""

    def __init__(
        self,
        clock: Clock,
        refresh_backoff_ms: int = 100,
        refresh_backoff_max_ms: int = 1000,
        metadata_expire_ms: int = 300_000,
        topic_expiry_ms: int = 300_000,
        allow_auto_topic_creation: bool = True,
    ) -> None:
        self._clock = clock
        self._backoff = ExponentialBackoff(refresh_backoff_ms, 2, refresh_backoff_max_ms, 0.2)
        self.metadata_expire_ms = metadata_expire_ms
        self.topic_expiry_ms = topic_expiry_ms
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self._lock = threading.Lock()
        self.fatal_exception: Exception | None = None  # see fatal_error
        self._cond = threading.Condition(self._lock)
        self.cluster = Cluster.empty()
        self.update_version = 0
        self._topics: dict[str, int] = {}  # topic -> expiry time
        self._new_topics: set[str] = set()
        self._need_full_update = False
        self._need_partial_update = False
        self._last_refresh_ms: int | None = None
        self._last_successful_refresh_ms = 0
        self._attempts = 0
        self._topic_errors: dict[str, ErrorCode] = {}
        self.closed = False

    def bootstrap(self, addresses: list[tuple[str, int]]) -> None:
        """Start from the bootstrap addresses; the first update replaces them."""
        with self._lock:
            self.cluster = Cluster.bootstrap(addresses)
            self._need_full_update = True
            self.update_version += 1

    # -- what to fetch ------------------------------------------------------------

    def add(self, topic: str, now_ms: int) -> None:
        """Keep ``topic`` in the metadata; a new topic triggers a partial update."""
        with self._lock:
            if topic not in self._topics:
                self._new_topics.add(topic)
                self._need_partial_update = True
                self._attempts = 0
            self._topics[topic] = now_ms + self.topic_expiry_ms

    def touch(self, topic: str, now_ms: int) -> None:
        """Note that ``topic`` is in use (it will not expire); cheap, no lock."""
        self._topics[topic] = now_ms + self.topic_expiry_ms

    def contains_topic(self, topic: str) -> bool:
        return topic in self._topics

    def request_update(self) -> int:
        """Ask for a full update; returns the current version to wait past."""
        with self._lock:
            self._need_full_update = True
            return self.update_version

    def request_update_for_topic(self, topic: str) -> int:
        """Ask for an update of ``topic`` (partial when it is new); returns the version."""
        with self._lock:
            if topic in self._new_topics:
                # as Java's requestUpdateForNewTopics: a topic never fetched does not
                # wait out the refresh backoff of an update that could not include it
                self._last_refresh_ms = None
                self._need_partial_update = True
            else:
                self._need_full_update = True
            return self.update_version

    def update_requested(self) -> bool:
        return self._need_full_update or self._need_partial_update

    def time_to_next_update(self, now_ms: int) -> int:
        """Milliseconds until a Metadata request should be sent (0: now)."""
        if self.update_requested():
            time_to_expire = 0
        else:
            time_to_expire = max(
                self._last_successful_refresh_ms + self.metadata_expire_ms - now_ms, 0
            )
        if self._last_refresh_ms is None:
            return time_to_expire
        backoff = self._backoff.backoff(max(self._attempts - 1, 0))
        return max(time_to_expire, self._last_refresh_ms + backoff - now_ms)

    def request_topics(self, now_ms: int) -> tuple[list[str] | None, bool]:
        """The topics for the next Metadata request and whether it is partial.

        Expired topics are dropped first. None means "all topics" (never for the
        producer, which always names its topics).
        """
        with self._lock:
            for topic, expiry in list(self._topics.items()):
                if expiry <= now_ms:
                    log.debug("Removing unused topic %s from the metadata list", topic)
                    del self._topics[topic]
                    self._new_topics.discard(topic)
            if self._need_partial_update and not self._need_full_update and self._new_topics:
                return sorted(self._new_topics), True
            return sorted(self._topics), False

    # -- results ------------------------------------------------------------------

    def update(
        self, response: Any, requested: list[str] | None, partial: bool, now_ms: int
    ) -> None:
        """Apply a Metadata response (kio dataclass of any version)."""
        nodes = [Node(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
                 for b in response.brokers]  # fmt: skip
        by_id = {node.id: node for node in nodes}
        partitions: list[PartitionInfo] = []
        invalid: set[str] = set()
        unauthorized: set[str] = set()
        internal: set[str] = set()
        retry = False
        errors: dict[str, ErrorCode] = {}
        seen: set[str] = set()
        for topic in response.topics:
            name = topic.name
            code = ErrorCode(topic.error_code)
            if name is None:
                continue
            seen.add(name)
            if getattr(topic, "is_internal", False):
                internal.add(name)
            if code is not ErrorCode.none:
                errors[name] = code
                if code is ErrorCode.invalid_topic_exception:
                    invalid.add(name)
                elif code is ErrorCode.topic_authorization_failed:
                    unauthorized.add(name)
                elif code in _RETRY_TOPIC_ERRORS:
                    retry = True
                continue
            for p in topic.partitions:
                leader_id = int(p.leader_id)
                partitions.append(
                    PartitionInfo(
                        name,
                        int(p.partition_index),
                        by_id.get(leader_id) if leader_id >= 0 else None,
                        int(getattr(p, "leader_epoch", -1)),
                        tuple(int(r) for r in p.replica_nodes),
                        tuple(int(r) for r in p.isr_nodes),
                    )
                )
                if leader_id < 0:
                    retry = True
        with self._lock:
            previous = self.cluster
            if partial:
                # Keep what we knew about the topics this request did not name.
                for topic in previous.topics() - seen:
                    for info in previous.partitions_for_topic(topic):
                        leader = None if info.leader is None else by_id.get(info.leader.id)
                        partitions.append(info._replace(leader=leader))
                invalid |= previous.invalid_topics - seen
                unauthorized |= previous.unauthorized_topics - seen
                internal |= previous.internal_topics - seen
            controller_id = int(getattr(response, "controller_id", -1))
            self.cluster = Cluster(
                getattr(response, "cluster_id", None),
                nodes,
                partitions,
                unauthorized,
                invalid,
                by_id.get(controller_id),
                internal_topics=internal,
            )
            self._topic_errors = errors
            self._new_topics -= seen
            if partial:
                self._need_partial_update = bool(self._new_topics)
            else:
                self._need_full_update = False
                self._need_partial_update = bool(self._new_topics)
            if retry:
                self._need_partial_update = self._need_partial_update or partial
                self._need_full_update = self._need_full_update or not partial
                self._attempts += 1
            else:
                self._attempts = 0
            self._last_refresh_ms = now_ms
            if not partial:
                self._last_successful_refresh_ms = now_ms
            self.update_version += 1
            self.fatal_exception = None
            self._cond.notify_all()
        log.debug("Updated cluster metadata version %d to %s", self.update_version, self.cluster)

    def failed_update(self, now_ms: int) -> None:
        """A Metadata request failed (no node, disconnect): back off, wake waiters."""
        with self._lock:
            self._last_refresh_ms = now_ms
            self._attempts += 1
            self._cond.notify_all()

    def fatal_error(self, exc: Exception) -> None:
        """A broker refused this client's credentials (Kafka's ``Metadata.fatalError``):
        waiters wake and :meth:`maybe_throw_fatal` raises it until the next update."""
        with self._lock:
            self.fatal_exception = exc
            self._cond.notify_all()

    def maybe_throw_fatal(self) -> None:
        """Raise the authentication failure reported since the last update, if any."""
        exc = self.fatal_exception
        if exc is not None:
            raise exc

    def topic_error(self, topic: str) -> ErrorCode | None:
        """The error the last response gave for ``topic``, if any."""
        return self._topic_errors.get(topic)

    def await_update(self, last_version: int, deadline_ms: int) -> None:
        """Block until the version passes ``last_version``, a failure, or the deadline."""
        with self._cond:
            if self.update_version > last_version or self.closed or self.fatal_exception:
                return
            self._clock.wait_until(self._cond, deadline_ms)

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()
