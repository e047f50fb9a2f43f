"""The consumer's fetcher: a background thread that prefetches records.

:class:`SubscriptionState` holds, under one lock, what the consumer's partitions
are: the consumed position, the position the fetcher has fetched up to, paused
flags, pending offset resets, and the fetched-but-unconsumed data. The
:class:`Fetcher` thread keeps fetching ahead of the application (up to
``queued.max.bytes`` buffered per partition) so ``poll`` usually finds records
waiting, resolves offset resets with ListOffsets, and talks to each leader through
an incremental fetch session (KIP-227, :class:`FetchSession`): after a full fetch
establishes the session, each request carries only partitions whose fetch offset
changed plus the ones to forget. A seek bumps the partition's epoch so data fetched
for the old position is dropped.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.base import TopicPartition
from sluice.client.consumer.fetcher_records import ConsumerRecord, decode_records
from sluice.client.errors import KafkaException, exception_for
from sluice.client.net.consumer_network_client import ConsumerNetworkClient
from sluice.protocol import ApiKey, ErrorCode

__all__ = [
    "EARLIEST",
    "LATEST",
    "FetchSession",
    "Fetcher",
    "PartitionState",
    "SubscriptionState",
    "TopicPartition",
]

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1
INVALID_SESSION_ERRORS = {
    ErrorCode.fetch_session_id_not_found,
    ErrorCode.invalid_fetch_session_epoch,
}
_METADATA_ERRORS = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.leader_not_available,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.kafka_storage_error,
}


@dataclass
class CompletedFetch:
    records: deque[ConsumerRecord]
    next_offset: int
    size: int


@dataclass
class PartitionState:
    position: int | None = None  # next offset the application will get
    fetch_position: int | None = None  # next offset the fetcher will ask for
    epoch: int = 0  # bumped by seeks; stale fetches are dropped
    paused: bool = False
    reset: int | None = None  # EARLIEST / LATEST / a timestamp, to resolve with ListOffsets
    needs_committed: bool = False  # the consumer fetches the committed offset first
    buffered: deque[CompletedFetch] = field(default_factory=deque)
    buffered_bytes: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


class SubscriptionState:
    """The assigned partitions and their positions, shared by poll and the fetcher."""

    def __init__(self, default_reset: str = "latest") -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self.default_reset = default_reset
        self.errors: list[Exception] = []

    def assign(self, partitions: list[TopicPartition], needs_committed: bool) -> None:
        with self.lock:
            kept = {tp: self.partitions[tp] for tp in partitions if tp in self.partitions}
            for tp in partitions:
                if tp not in kept:
                    kept[tp] = PartitionState(needs_committed=needs_committed)
                    if not needs_committed:
                        kept[tp].reset = self.reset_for_default(tp)
            self.partitions = kept
            self.changed.notify_all()

    def reset_for_default(self, tp: TopicPartition) -> int | None:
        if self.default_reset in ("earliest", "smallest", "beginning"):
            return EARLIEST
        if self.default_reset in ("latest", "largest", "end"):
            return LATEST
        self.errors.append(KafkaException(f"no offset for {tp} and auto.offset.reset=none"))
        return None

    def seek(self, tp: TopicPartition, offset: int | None, reset: int | None = None) -> None:
        with self.lock:
            state = self.partitions.get(tp)
            if state is None:
                raise KafkaException(f"{tp} is not assigned to this consumer")
            state.epoch += 1
            state.buffered.clear()
            state.buffered_bytes = 0
            state.position = state.fetch_position = offset
            state.reset = reset
            state.needs_committed = False
            self.changed.notify_all()

    def set_paused(self, tps: list[TopicPartition], paused: bool) -> None:
        with self.lock:
            for tp in tps:
                state = self.partitions.get(tp)
                if state is None:
                    raise KafkaException(f"{tp} is not assigned to this consumer")
                state.paused = paused
            self.changed.notify_all()

    def has_ready_data(self) -> bool:
        return any(s.buffered and not s.paused for s in self.partitions.values())

    def drain(self, max_records: int) -> list[ConsumerRecord]:
        """Take up to ``max_records`` buffered records (caller holds the lock)."""
        out: list[ConsumerRecord] = []
        for state in self.partitions.values():
            if state.paused:
                continue
            while state.buffered and len(out) < max_records:
                completed = state.buffered[0]
                while completed.records and len(out) < max_records:
                    record = completed.records.popleft()
                    out.append(record)
                    state.position = record.offset + 1
                if completed.records:
                    break
                state.buffered.popleft()
                state.buffered_bytes -= completed.size
                state.position = max(state.position or 0, completed.next_offset)
            if len(out) >= max_records:
                break
        if out:
            # rotate so the next poll starts with other partitions (fairness)
            first = next(iter(self.partitions))
            self.partitions[first] = self.partitions.pop(first)
            self.changed.notify_all()
        return out


class FetchSession:
    """One broker's incremental fetch session (KIP-227), from the client's side."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0  # 0: the next request is a full fetch creating a session
        self.sent: dict[TopicPartition, int] = {}  # the fetch offsets the broker has

    def build(
        self, wanted: dict[TopicPartition, int]
    ) -> tuple[dict[TopicPartition, int], list[TopicPartition]]:
        """The partitions to put in the next request, and those to forget."""
        if self.epoch == 0:
            return dict(wanted), []
        changed = {tp: off for tp, off in wanted.items() if self.sent.get(tp) != off}
        forgotten = [tp for tp in self.sent if tp not in wanted]
        return changed, forgotten

    def on_response(self, session_id: int, wanted: dict[TopicPartition, int]) -> None:
        if self.epoch == 0:
            self.session_id = session_id
            if session_id == 0:  # the broker would not create a session: stay full
                self.sent = {}
                return
        self.sent = dict(wanted)
        self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1

    def reset(self) -> None:
        self.session_id = 0
        self.epoch = 0
        self.sent = {}

    @property
    def is_full(self) -> bool:
        return self.epoch == 0


class Fetcher(threading.Thread):
    """The background thread: resolves offset resets and prefetches records."""

    def __init__(
        self,
        client: ConsumerNetworkClient,
        subscriptions: SubscriptionState,
        config: dict[str, Any],
    ) -> None:
        super().__init__(name="sluice-consumer-fetcher", daemon=True)
        self.client = client
        self.subs = subscriptions
        self.min_bytes = int(config.get("fetch.min.bytes", 1))
        self.max_wait_ms = int(config.get("fetch.max.wait.ms", 500))
        self.max_bytes = int(config.get("fetch.max.bytes", 52_428_800))
        self.partition_max_bytes = int(config.get("max.partition.fetch.bytes", 1_048_576))
        self.queued_max_bytes = int(config.get("queued.max.bytes", 4 * self.partition_max_bytes))
        self.read_committed = config.get("isolation.level", "read_uncommitted") == "read_committed"
        self.check_crcs = str(config.get("check.crcs", "true")).lower() != "false"
        self.sessions: dict[int, FetchSession] = {}
        self._stopping = threading.Event()
        self.fetch_count = 0
        self.incremental_fetch_count = 0
        self.partition_fetches: dict[TopicPartition, dict[int, int]] = {}
        """Per partition, the Fetch responses that covered it, by broker id: which
        leaders this consumer read it from."""

    def stop(self) -> None:
        self._stopping.set()
        with self.subs.lock:
            self.subs.changed.notify_all()

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                if not self._run_once():
                    with self.subs.lock:
                        self.subs.changed.wait(0.05)
            except Exception as exc:  # network trouble: back off, refresh, retry
                if self._stopping.is_set():
                    return
                log.debug("fetcher: %s", exc)
                self.sessions.clear()
                self._stopping.wait(0.1)
                with contextlib.suppress(Exception):
                    self.client.refresh_metadata(self._topics())

    def _topics(self) -> list[str]:
        with self.subs.lock:
            return sorted({tp.topic for tp in self.subs.partitions})

    def _run_once(self) -> bool:
        """One round; returns whether there was anything to do."""
        with self.subs.lock:
            resets = {
                tp: (s.reset, s.epoch)
                for tp, s in self.subs.partitions.items()
                if s.reset is not None and s.position is None
            }
        if resets:
            self._resolve_resets(resets)
        wanted_by_node, epochs = self._fetchable()
        if not wanted_by_node:
            return bool(resets)
        for node, wanted in wanted_by_node.items():
            if self._stopping.is_set():
                return True
            self._fetch_from(node, wanted, epochs)
        return True

    def _leaders(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        leaders = {tp: self.client.leader_for(*tp) for tp in tps}
        if any(node < 0 for node in leaders.values()):
            self.client.refresh_metadata(sorted({tp.topic for tp in tps}))
            leaders = {tp: self.client.leader_for(*tp) for tp in tps}
        return leaders

    def _fetchable(self) -> tuple[dict[int, dict[TopicPartition, int]], dict[TopicPartition, int]]:
        with self.subs.lock:
            candidates = {
                tp: (s.fetch_position, s.epoch)
                for tp, s in self.subs.partitions.items()
                if s.fetch_position is not None
                and not s.paused
                and s.buffered_bytes < self.queued_max_bytes
            }
        if not candidates:
            return {}, {}
        leaders = self._leaders(list(candidates))
        out: dict[int, dict[TopicPartition, int]] = {}
        for tp, (offset, _epoch) in candidates.items():
            node = leaders[tp]
            if node >= 0:
                out.setdefault(node, {})[tp] = int(offset or 0)
        return out, {tp: epoch for tp, (_o, epoch) in candidates.items()}

    def _resolve_resets(self, resets: Mapping[TopicPartition, tuple[int | None, int]]) -> None:
        leaders = self._leaders(list(resets))
        by_node: dict[int, list[TopicPartition]] = {}
        for tp, node in leaders.items():
            if node >= 0:
                by_node.setdefault(node, []).append(tp)
        for node, tps in by_node.items():
            offsets = list_offsets(
                self.client, node, {tp: int(resets[tp][0] or LATEST) for tp in tps},
                self.read_committed,
            )  # fmt: skip
            with self.subs.lock:
                for tp, offset in offsets.items():
                    state = self.subs.partitions.get(tp)
                    if state is None or state.epoch != resets[tp][1] or offset is None:
                        continue
                    state.position = state.fetch_position = offset
                    state.reset = None
                self.subs.changed.notify_all()

    def _fetch_from(
        self, node: int, wanted: dict[TopicPartition, int], epochs: dict[TopicPartition, int]
    ) -> None:
        session = self.sessions.setdefault(node, FetchSession())
        send, forgotten = session.build(wanted)
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, offset in send.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": -1,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": self.partition_max_bytes,
                }
            )
        forgotten_topics: dict[str, list[int]] = {}
        for tp in forgotten:
            forgotten_topics.setdefault(tp.topic, []).append(tp.partition)
        body = self.client.send(
            node,
            ApiKey.FETCH,
            timeout_s=self.client.timeout_s + self.max_wait_ms / 1000,
            replica_id=-1,
            max_wait=self.max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=1 if self.read_committed else 0,
            session_id=session.session_id,
            session_epoch=session.epoch,
            topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
            forgotten_topics_data=[
                {"topic": t, "partitions": ps} for t, ps in forgotten_topics.items()
            ],
            rack_id="",
        )
        self.fetch_count += 1
        for tp in wanted:
            served = self.partition_fetches.setdefault(tp, {})
            served[node] = served.get(node, 0) + 1
        if not session.is_full:
            self.incremental_fetch_count += 1
        top = ErrorCode(body.error_code)
        if top in INVALID_SESSION_ERRORS:
            session.reset()
            return
        if top is not ErrorCode.none:
            session.reset()
            raise exception_for(top)
        session.on_response(int(body.session_id), wanted)
        refresh = False
        for topic in body.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, int(p.partition_index))
                if tp not in wanted:
                    continue
                code = ErrorCode(p.error_code)
                if code in _METADATA_ERRORS:
                    refresh = True
                    continue
                self._handle_partition(tp, code, p, wanted[tp], epochs[tp])
        if refresh:
            session.reset()
            self.client.refresh_metadata(sorted({tp.topic for tp in wanted}))

    def _handle_partition(
        self, tp: TopicPartition, code: ErrorCode, p: Any, offset: int, epoch: int
    ) -> None:
        if code is ErrorCode.offset_out_of_range:
            with self.subs.lock:
                state = self.subs.partitions.get(tp)
                if state is not None and state.epoch == epoch:
                    reset = self.subs.reset_for_default(tp)
                    state.epoch += 1
                    state.buffered.clear()
                    state.buffered_bytes = 0
                    state.position = state.fetch_position = None
                    state.reset = reset
                    if reset is None:
                        self.subs.errors[-1] = exception_for(
                            code, f"fetch offset {offset} of {tp} is out of range"
                        )
                    self.subs.changed.notify_all()
            return
        if code is not ErrorCode.none:
            with self.subs.lock:
                self.subs.errors.append(exception_for(code, f"fetching {tp}"))
                self.subs.changed.notify_all()
            return
        data = p.records or b""
        aborted = [
            (int(a.producer_id), int(a.first_offset)) for a in (p.aborted_transactions or ())
        ]
        records, next_offset = decode_records(
            tp.topic, tp.partition, data, offset, aborted, self.read_committed, self.check_crcs
        )
        with self.subs.lock:
            state = self.subs.partitions.get(tp)
            if state is None or state.epoch != epoch or state.fetch_position != offset:
                return  # seeked or unassigned meanwhile
            state.high_watermark = int(p.high_watermark)
            state.last_stable_offset = int(p.last_stable_offset)
            state.log_start_offset = int(p.log_start_offset)
            if len(data) and next_offset == offset and not records:
                if len(data) >= self.partition_max_bytes:
                    self.subs.errors.append(
                        KafkaException(
                            f"{tp}: a record batch at offset {offset} is larger than "
                            f"max.partition.fetch.bytes ({self.partition_max_bytes})"
                        )
                    )
                return
            if next_offset == offset:
                return
            state.fetch_position = next_offset
            state.buffered.append(CompletedFetch(deque(records), next_offset, len(data)))
            state.buffered_bytes += len(data)
            self.subs.changed.notify_all()


def list_offsets(
    client: ConsumerNetworkClient,
    node: int,
    timestamps: dict[TopicPartition, int],
    read_committed: bool = False,
) -> dict[TopicPartition, int | None]:
    """ListOffsets for ``timestamps`` (EARLIEST, LATEST or a timestamp) at ``node``."""
    topics: dict[str, list[dict[str, int]]] = {}
    for tp, ts in timestamps.items():
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": ts}
        )
    body = client.send(
        node,
        ApiKey.LIST_OFFSETS,
        replica_id=-1,
        isolation_level=1 if read_committed else 0,
        topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
    )
    out: dict[TopicPartition, int | None] = {}
    for topic in body.topics:
        for p in topic.partitions:
            code = ErrorCode(p.error_code)
            tp = TopicPartition(topic.name, int(p.partition_index))
            if code is ErrorCode.none:
                out[tp] = int(p.offset) if int(p.offset) >= 0 else None
            elif code in _METADATA_ERRORS:
                client.forget_leaders(tp.topic)
                out[tp] = None
            else:
                raise exception_for(code, f"ListOffsets for {tp}")
    return out
