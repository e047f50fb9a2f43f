"""Fetch sessions (KIP-227): full and incremental fetch requests and a bounded session cache.

A client opens a session with a full fetch (epoch 0), then sends only the
partitions whose fetch state changed (incremental fetches, epoch 1, 2, ...)
plus the partitions to forget; the broker answers only partitions with news.
Epoch -1 closes a session (or asks for a sessionless fetch).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Iterable

from sluice.base import TopicPartition
from sluice.protocol import ErrorCode

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "CachedPartition",
    "FetchContext",
    "FetchSession",
    "FetchSessionCache",
    "PartitionState",
]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000


@dataclasses.dataclass(slots=True)
class PartitionState:
    """What the client asked for one partition."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    topic_id: object = None
    """The topic's id when the request named it by id (Fetch v13+, KIP-516)."""


@dataclasses.dataclass(slots=True)
class CachedPartition:
    """A session's partition: the request state and what was last sent back."""

    state: PartitionState
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def update_response(self, error: ErrorCode, hw: int, lso: int, start: int, size: int) -> bool:
        """Record what is sent; True when an incremental response must include it."""
        changed = size > 0 or error != ErrorCode.none
        if hw != self.high_watermark:
            self.high_watermark, changed = hw, True
        if lso != self.last_stable_offset:
            self.last_stable_offset, changed = lso, True
        if start != self.log_start_offset:
            self.log_start_offset, changed = start, True
        return changed


@dataclasses.dataclass(slots=True)
class FetchSession:
    """One client's fetch session."""

    id: int
    privileged: bool
    partitions: dict[TopicPartition, CachedPartition]
    created_ms: int
    last_used_ms: int
    epoch: int = 1

    @property
    def size(self) -> int:
        return len(self.partitions)


class FetchContext:
    """How to answer one Fetch request: which partitions to read and which to return."""

    def __init__(
        self,
        partitions: dict[TopicPartition, PartitionState],
        session: FetchSession | None = None,
        error: ErrorCode = ErrorCode.none,
        session_id: int = INVALID_SESSION_ID,
        incremental: bool = False,
    ) -> None:
        self.partitions = partitions
        self.session = session
        self.error = error
        self.session_id = session_id
        self.incremental = incremental

    def include(
        self, tp: TopicPartition, error: ErrorCode, hw: int, lso: int, start: int, size: int
    ) -> bool:
        """Whether the response carries ``tp`` (always, unless the fetch is incremental)."""
        cached = self.session.partitions.get(tp) if self.session is not None else None
        changed = cached.update_response(error, hw, lso, start, size) if cached else True
        return changed or not self.incremental


class FetchSessionCache:
    """At most ``max_slots`` sessions; a new one evicts a stale session, or for a follower
    an ordinary one, or the smallest ordinary session if the new one is larger."""

    def __init__(self, max_slots: int = 1000, eviction_ms: int = EVICTION_MS) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._rng = random.Random()
        self._ids = itertools.count(1)
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randrange(1, 2**31 - 1)
            if session_id not in self.sessions:
                return session_id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - lru.last_used_ms > self.eviction_ms:
            return self._evict(lru)
        ordinary = [s for s in self.sessions.values() if not s.privileged]
        if not ordinary:
            return False
        if privileged:
            return self._evict(min(ordinary, key=lambda s: s.last_used_ms))
        smallest = min(ordinary, key=lambda s: (s.size, s.last_used_ms, s.id))
        if size > smallest.size:
            return self._evict(smallest)
        return False

    def _evict(self, session: FetchSession) -> bool:
        del self.sessions[session.id]
        self.evictions += 1
        return True

    def maybe_create(
        self, partitions: dict[TopicPartition, PartitionState], privileged: bool, now_ms: int
    ) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self.sessions) >= self.max_slots and not self._try_evict(
            privileged, len(partitions), now_ms
        ):
            return None
        session = FetchSession(
            self._new_id(), privileged,
            {tp: CachedPartition(state) for tp, state in partitions.items()}, now_ms, now_ms,
        )  # fmt: skip
        self.sessions[session.id] = session
        return session

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def new_context(
        self,
        session_id: int,
        epoch: int,
        partitions: dict[TopicPartition, PartitionState],
        forgotten: Iterable[TopicPartition],
        privileged: bool,
        now_ms: int,
    ) -> FetchContext:
        """Kafka's FetchManager.newContext."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full request closes the session it names
            if epoch == FINAL_EPOCH:
                return FetchContext(partitions)
            session = self.maybe_create(partitions, privileged, now_ms)
            sid = session.id if session is not None else INVALID_SESSION_ID
            return FetchContext(partitions, session, session_id=sid)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext({}, error=ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return FetchContext({}, error=ErrorCode.invalid_fetch_session_epoch)
        for tp, state in partitions.items():
            cached = session.partitions.get(tp)
            if cached is None:
                session.partitions[tp] = CachedPartition(state)
            else:
                cached.state = state
        for tp in forgotten:
            session.partitions.pop(tp, None)
        if not session.partitions:
            self.remove(session.id)
            return FetchContext({})
        session.last_used_ms = now_ms
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        states = {tp: c.state for tp, c in session.partitions.items()}
        return FetchContext(states, session, session_id=session.id, incremental=True)
