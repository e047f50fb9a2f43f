"""The sans-I/O group coordinator under test: an in-memory ``GroupLog``, a manual
clock driving both purgatories (no reaper threads, expiry inline) and request shortcuts."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    JoinGroupRequestData,
    JoinGroupResult,
    OffsetAndMetadata,
    SyncGroupResult,
)
from sluice.coordinator.group.records import read_batches
from sluice.protocol import ErrorCode
from sluice.purgatory import DelayedOperationPurgatory

START_MS = 1_700_000_000_000


def subscription(*topics: str, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription (v0: topics and null user data)."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)


class MemoryGroupLog:
    """An in-memory ``__consumer_offsets``: batches per partition with assigned offsets.

    ``defer`` holds append callbacks until ``release()``; ``fail_with`` fails appends.
    """

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[int, bytes]]] = {}
        self.leo: dict[int, int] = {}
        self.defer = False
        self.fail_with: ErrorCode | None = None
        self.pending: list[Callable[[], None]] = []

    def append(
        self, partition: int, records: bytes, callback: Callable[[ErrorCode, int], None]
    ) -> None:
        if self.fail_with is not None:
            callback(self.fail_with, -1)
            return
        base = self.leo.get(partition, 0)
        (last_delta,) = struct.unpack_from(">i", records, 23)
        stamped = struct.pack(">q", base) + records[8:]
        self.batches.setdefault(partition, []).append((base, stamped))
        self.leo[partition] = base + last_delta + 1
        if self.defer:
            self.pending.append(lambda: callback(ErrorCode.none, base))
        else:
            callback(ErrorCode.none, base)

    def release(self) -> None:
        pending, self.pending = self.pending, []
        for fn in pending:
            fn()

    def offsets(self, partition: int) -> tuple[int, int]:
        return 0, self.leo.get(partition, 0)

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        out = b""
        for base, data in self.batches.get(partition, []):
            (last_delta,) = struct.unpack_from(">i", data, 23)
            if base + last_delta >= offset:
                out += data
                if len(out) >= max_bytes:
                    break
        return out

    def records(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        """Every (key, value) appended to ``partition``, in order."""
        out: list[tuple[bytes | None, bytes | None]] = []
        for _, data in self.batches.get(partition, []):
            for _, _, records in read_batches(data):
                out.extend(records)
        return out


class Harness:
    """A GroupCoordinator on a manual clock, with shortcuts for requests."""

    def __init__(
        self,
        group_log: MemoryGroupLog | None = None,
        partitions: int = 4,
        load: bool = True,
        **config: Any,
    ) -> None:
        self.clock = ManualClock(START_MS)
        values: dict[str, Any] = {
            "group_initial_rebalance_delay_ms": 0,
            "group_min_session_timeout_ms": 1000,
            "group_max_session_timeout_ms": 60_000,
        }
        values.update(config)
        self.config = GroupConfig(**values)
        self.log = group_log if group_log is not None else MemoryGroupLog()
        self.purgatories = [
            DelayedOperationPurgatory[Any](name, reaper_enabled=False, clock=self.clock)
            for name in ("Rebalance", "Heartbeat")
        ]
        self.coordinator = GroupCoordinator(
            self.config, self.log, partitions, self.purgatories[0], self.purgatories[1],
            clock=self.clock,
        )  # fmt: skip
        self.coordinator.startup(range(partitions), load=load)

    def advance(self, ms: int) -> None:
        """Move time forward, expiring what falls due on the way (1 ms steps are not
        needed: the timer jumps bucket to bucket)."""
        target = self.clock.hi_res_clock_ms() + ms
        while True:
            for p in self.purgatories:
                while p.timer.advance_clock(0):
                    pass
            step = min(target - self.clock.hi_res_clock_ms(), 100)
            if step <= 0:
                break
            self.clock.advance(step)

    def group(self, group_id: str) -> Any:
        return self.coordinator.group_manager.get_group(group_id)

    # -- requests --------------------------------------------------------------------------
    def join(
        self,
        group_id: str,
        member_id: str = "",
        instance_id: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        protocol_type: str = "consumer",
        require_known: bool = False,
        skip_assignment: bool = False,
        client_id: str = "client",
    ) -> list[JoinGroupResult]:
        """Send a JoinGroup; the returned list fills in when the response is ready."""
        out: list[JoinGroupResult] = []
        request = JoinGroupRequestData(
            group_id=group_id,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocols=protocols if protocols is not None else [("range", subscription("t"))],
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            client_id=client_id,
            require_known_member_id=require_known,
            support_skipping_assignment=skip_assignment,
        )
        self.coordinator.handle_join_group(request, out.append)
        return out

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
    ) -> list[SyncGroupResult]:
        out: list[SyncGroupResult] = []
        self.coordinator.handle_sync_group(
            group_id, generation, member_id, None, None, instance_id, assignments or {}, out.append
        )
        return out

    def heartbeat(
        self, group_id: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> ErrorCode:
        return self.coordinator.handle_heartbeat(group_id, member_id, instance_id, generation)

    def commit(
        self,
        group_id: str,
        offsets: dict[TopicPartition, int],
        member_id: str = "",
        generation: int = -1,
        metadata: str = "",
        instance_id: str | None = None,
    ) -> list[dict[TopicPartition, ErrorCode]]:
        out: list[dict[TopicPartition, ErrorCode]] = []
        now = self.clock.milliseconds()
        values = {tp: OffsetAndMetadata(o, None, metadata, now) for tp, o in offsets.items()}
        self.coordinator.handle_commit_offsets(
            group_id, member_id, instance_id, generation, values, out.append
        )
        return out

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None = None) -> Any:
        return self.coordinator.handle_fetch_offsets(group_id, partitions)

    def stable_group(
        self, group_id: str, n: int, session_ms: int = 10_000, topics: tuple[str, ...] = ("t",)
    ) -> list[str]:
        """n dynamic members joined one after the other and synced; their member ids in
        join order (the first leads)."""
        members: list[str] = []
        for i in range(n):
            first = self.join(group_id, session_ms=session_ms, client_id=f"c{i}",
                              protocols=[("range", subscription(*topics))])  # fmt: skip
            pending = [
                self.join(group_id, m, session_ms=session_ms,
                          protocols=[("range", subscription(*topics))])
                for m in members  # the others rejoin for the new rebalance
            ] + [first]  # fmt: skip
            assert all(p and p[0].error == ErrorCode.none for p in pending), pending
            members = [p[0].member_id for p in pending]
        generation = self.group(group_id).generation_id
        leader = self.group(group_id).leader_id
        assignment = {m: f"assignment-{m}".encode() for m in members}
        for m in members:
            result = self.sync(group_id, m, generation, assignment if m == leader else None)
            if m == leader:
                assert result and result[0].error == ErrorCode.none
        return members
