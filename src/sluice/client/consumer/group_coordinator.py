"""Client-side classic consumer group membership (Kafka's ``ConsumerCoordinator``).

Joining: FindCoordinator, then JoinGroup (a first JoinGroup without a member id is
answered MEMBER_ID_REQUIRED with the id to use, KIP-394), then SyncGroup; the
member elected leader runs the assignor over every member's subscription. A
heartbeat thread keeps the membership alive and flags a rejoin when the
coordinator reports a rebalance; the rejoin happens in the application's next
``poll`` (eager protocol: everything is revoked, then the new assignment is
assigned, and the rebalance listener hears both). With ``cooperative-sticky`` as
the only strategy the rebalance is cooperative (KIP-429): nothing is revoked before
joining, the subscription carries the partitions owned, and after SyncGroup only
the partitions taken away are revoked and only the new ones assigned; if any were
revoked the member rejoins at once so that they can be handed on. Offsets are committed with
OffsetCommit and read with OffsetFetch; ``close`` sends LeaveGroup.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sluice.client.consumer.fetcher import TopicPartition
from sluice.client.consumer.group_assignors import (
    ALIASES,
    ASSIGNORS,
    COOPERATIVE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from sluice.client.errors import KafkaException, RetriableException, exception_for
from sluice.client.net.cluster import Node
from sluice.client.net.consumer_network_client import ConsumerNetworkClient, coordinator_node
from sluice.protocol import ApiKey, ErrorCode

__all__ = ["ConsumerCoordinator", "OffsetAndMetadata"]

log = logging.getLogger(__name__)

_COORDINATOR_ERRORS = {
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
}
_RESET_MEMBER = {ErrorCode.unknown_member_id, ErrorCode.illegal_generation}


class OffsetAndMetadata(tuple[int, str]):
    """A committed offset and its metadata string."""

    def __new__(cls, offset: int, metadata: str = "") -> OffsetAndMetadata:
        return super().__new__(cls, (offset, metadata))

    @property
    def offset(self) -> int:
        return self[0]

    @property
    def metadata(self) -> str:
        return self[1]


class ConsumerCoordinator:
    """Group membership, assignment and offset commits for one consumer."""

    def __init__(
        self, client: ConsumerNetworkClient, group_id: str, config: dict[str, Any]
    ) -> None:
        self.client = client
        self.group_id = group_id
        self.session_timeout_ms = int(config.get("session.timeout.ms", 45_000))
        self.heartbeat_interval_ms = int(config.get("heartbeat.interval.ms", 3_000))
        self.rebalance_timeout_ms = int(config.get("max.poll.interval.ms", 300_000))
        self.group_instance_id = config.get("group.instance.id")
        strategies = str(config.get("partition.assignment.strategy", "range,roundrobin"))
        self.strategies = []
        for name in strategies.replace(" ", "").split(","):
            short = name.rsplit(".", 1)[-1].lower().removesuffix("assignor")
            short = ALIASES.get(short, short)
            if short not in ASSIGNORS:
                raise KafkaException(f"unsupported partition.assignment.strategy {name!r}")
            self.strategies.append(short)
        self.cooperative = all(s in COOPERATIVE for s in self.strategies)
        self.coordinator: Node | None = None
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader = ""
        self.rejoin_needed = True
        self.assignment: list[TopicPartition] = []
        self.stable = False
        self._lock = threading.RLock()
        self._hb_client = ConsumerNetworkClient(
            client.bootstrap_servers, client.client_id + "-heartbeat",
            int(client.timeout_s * 1000), client.security,
        )  # fmt: skip
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None
        self.last_heartbeat_error: ErrorCode | None = None

    # -- coordinator -----------------------------------------------------------------

    def ensure_coordinator(self, deadline: float) -> Node:
        while True:
            if self.coordinator is not None:
                return self.coordinator
            try:
                body = self.client.send(
                    None, ApiKey.FIND_COORDINATOR, key=self.group_id, key_type=0
                )
                code = ErrorCode(body.error_code)
                if code is ErrorCode.none:
                    self.coordinator = coordinator_node(body)
                    return self.coordinator
                if code not in _COORDINATOR_ERRORS:
                    raise exception_for(code, body.error_message)
            except KafkaException as exc:
                if not isinstance(exc, RetriableException) or time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise KafkaException(f"no coordinator for group {self.group_id}")
            time.sleep(0.1)

    def request(self, api_key: int, timeout_s: float | None = None, **fields: Any) -> Any:
        """Send to the coordinator; on a coordinator error forget it (caller retries)."""
        deadline = time.monotonic() + (timeout_s or self.client.timeout_s)
        node = self.ensure_coordinator(deadline)
        try:
            body = self.client.send(node, api_key, timeout_s=timeout_s, **fields)
        except KafkaException:
            self.coordinator = None
            raise
        code = getattr(body, "error_code", 0)
        if ErrorCode(code) in _COORDINATOR_ERRORS:
            self.coordinator = None
        return body

    # -- joining ---------------------------------------------------------------------

    def join(
        self,
        topics: list[str],
        on_revoke: Callable[[list[TopicPartition]], None],
        on_assign: Callable[[list[TopicPartition]], None],
        timeout_s: float,
    ) -> bool:
        """(Re)join the group; returns True once assigned, False on timeout."""
        deadline = time.monotonic() + timeout_s
        if not self.cooperative and (self.assignment or self.generation >= 0):
            revoked = list(self.assignment)
            self.assignment = []
            self.stable = False
            on_revoke(revoked)
        self.stable = False
        while time.monotonic() < deadline:
            try:
                owned = list(self.assignment)
                if self._join_once(topics, owned if self.cooperative else []):
                    if not self.cooperative:
                        on_assign(list(self.assignment))
                        self._start_heartbeat()
                        return True
                    now = set(self.assignment)
                    revoked = [tp for tp in owned if tp not in now]
                    added = [tp for tp in self.assignment if tp not in set(owned)]
                    if revoked:
                        on_revoke(revoked)
                    on_assign(added)
                    self._start_heartbeat()
                    if not revoked:
                        return True
                    self.stable = False  # phase two: rejoin so the revoked move on
                    continue
            except KafkaException as exc:
                if self.cooperative and self.generation < 0 and self.assignment:
                    lost, self.assignment = list(self.assignment), []
                    on_revoke(lost)  # the membership is gone: so are the partitions
                if not isinstance(exc, RetriableException):
                    raise
                log.debug("join of %s: %s", self.group_id, exc)
                time.sleep(0.05)
        return False

    def _join_once(self, topics: list[str], owned: list[TopicPartition] | None = None) -> bool:
        owned_partitions = [(tp.topic, tp.partition) for tp in owned or []]
        metadata = encode_subscription(Subscription(sorted(topics), None, owned_partitions))
        join_timeout = self.rebalance_timeout_ms / 1000 + 5
        body = self.request(
            ApiKey.JOIN_GROUP,
            timeout_s=join_timeout,
            group_id=self.group_id,
            session_timeout=self.session_timeout_ms,
            rebalance_timeout=self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocols=[{"name": s, "metadata": metadata} for s in self.strategies],
        )
        code = ErrorCode(body.error_code)
        if code is ErrorCode.member_id_required:
            self.member_id = body.member_id
            raise _Retry("member id required")
        if code in _RESET_MEMBER:
            self.member_id = ""
            self.generation = -1
            raise _Retry(code.name)
        if code in _COORDINATOR_ERRORS or code is ErrorCode.rebalance_in_progress:
            raise _Retry(code.name)
        if code is not ErrorCode.none:
            raise exception_for(code, f"JoinGroup of {self.group_id}")
        self.member_id = body.member_id
        self.generation = int(body.generation_id)
        self.protocol = body.protocol_name
        self.leader = body.leader
        assignments: list[dict[str, Any]] = []
        if self.leader == self.member_id:
            assignments = self._assign(body.members)
        sync = self.request(
            ApiKey.SYNC_GROUP,
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocol_name=self.protocol,
            assignments=assignments,
        )
        code = ErrorCode(sync.error_code)
        if code in _RESET_MEMBER:
            self.member_id = ""
            self.generation = -1
            raise _Retry(code.name)
        if code is ErrorCode.rebalance_in_progress or code in _COORDINATOR_ERRORS:
            raise _Retry(code.name)
        if code is not ErrorCode.none:
            raise exception_for(code, f"SyncGroup of {self.group_id}")
        assignment = decode_assignment(sync.assignment or b"")
        self.assignment = [TopicPartition(t, p) for t, p in assignment.partitions]
        self.rejoin_needed = False
        self.stable = True
        return True

    def _assign(self, members: Any) -> list[dict[str, Any]]:
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        all_topics = sorted({t for s in subscriptions.values() for t in s.topics})
        self.client.refresh_metadata(all_topics)
        cluster = self.client.cluster
        counts = {t: n for t in all_topics if (n := len(cluster.partitions_for_topic(t)))}
        assignor = ASSIGNORS[self.protocol or "range"]
        result = assignor(counts, subscriptions)
        return [
            {"member_id": m, "assignment": encode_assignment(Assignment(parts))}
            for m, parts in result.items()
        ]

    # -- heartbeats ------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._hb_thread is None or not self._hb_thread.is_alive():
            self._hb_stop.clear()
            self._hb_thread = threading.Thread(
                target=self._heartbeat_loop, name="sluice-consumer-heartbeat", daemon=True
            )
            self._hb_thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._hb_stop.wait(self.heartbeat_interval_ms / 1000):
            if not self.stable or self.coordinator is None:
                continue
            try:
                body = self._hb_client.send(
                    self.coordinator,
                    ApiKey.HEARTBEAT,
                    group_id=self.group_id,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=self.group_instance_id,
                )
            except KafkaException as exc:
                log.debug("heartbeat: %s", exc)
                continue
            code = ErrorCode(body.error_code)
            self.last_heartbeat_error = code
            if code is ErrorCode.none:
                continue
            if code is ErrorCode.rebalance_in_progress:
                self.rejoin_needed = True
            elif code in _RESET_MEMBER:
                self.member_id = ""
                self.generation = -1
                self.rejoin_needed = True
            elif code in _COORDINATOR_ERRORS:
                self.coordinator = None
                self.rejoin_needed = True

    # -- offsets ---------------------------------------------------------------------

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], in_group: bool) -> None:
        if not offsets:
            return
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, om in offsets.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": om.offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": om.metadata,
                }
            )
        for attempt in range(10):
            body = self.request(
                ApiKey.OFFSET_COMMIT,
                group_id=self.group_id,
                generation_id_or_member_epoch=self.generation if in_group else -1,
                generation_id=self.generation if in_group else -1,
                member_id=self.member_id if in_group else "",
                group_instance_id=self.group_instance_id if in_group else None,
                retention_time_ms=-1,
                topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
            )
            errors = {ErrorCode(p.error_code) for t in body.topics for p in t.partitions} - {
                ErrorCode.none
            }
            if not errors:
                return
            if errors & _COORDINATOR_ERRORS and attempt < 9:
                time.sleep(0.05)
                continue
            code = next(iter(errors))
            if code in _RESET_MEMBER or code is ErrorCode.rebalance_in_progress:
                self.rejoin_needed = True
            raise exception_for(code, f"OffsetCommit of group {self.group_id}")

    def fetch_committed(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        for attempt in range(20):
            body = self.request(
                ApiKey.OFFSET_FETCH,
                group_id=self.group_id,
                topics=[{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                require_stable=False,
            )
            code = ErrorCode(body.error_code)
            if code in _COORDINATOR_ERRORS and attempt < 19:
                time.sleep(0.05)
                continue
            if code is not ErrorCode.none:
                raise exception_for(code, f"OffsetFetch of group {self.group_id}")
            out: dict[TopicPartition, OffsetAndMetadata | None] = {}
            for t in body.topics:
                for p in t.partitions:
                    pcode = ErrorCode(p.error_code)
                    if pcode is not ErrorCode.none:
                        raise exception_for(pcode, f"OffsetFetch of {t.name}-{p.partition_index}")
                    offset = int(p.committed_offset)
                    out[TopicPartition(t.name, int(p.partition_index))] = (
                        OffsetAndMetadata(offset, p.metadata or "") if offset >= 0 else None
                    )
            return out
        raise KafkaException("unreachable")

    # -- leaving ---------------------------------------------------------------------

    def close(self, leave: bool = True) -> None:
        self._hb_stop.set()
        if self._hb_thread is not None:
            self._hb_thread.join(5)
        if leave and self.member_id and self.coordinator is not None:
            try:
                self.request(
                    ApiKey.LEAVE_GROUP,
                    group_id=self.group_id,
                    member_id=self.member_id,
                    members=[{"member_id": self.member_id, "group_instance_id": None}],
                )
            except KafkaException as exc:
                log.debug("LeaveGroup: %s", exc)
        self.member_id = ""
        self.generation = -1
        self.stable = False
        self._hb_client.close()


class _Retry(RetriableException):
    """A join step to retry (the error was handled)."""
