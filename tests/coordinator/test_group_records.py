"""The ``__consumer_offsets`` record codec: Kafka's key/value layouts, batches, Java's
String.hashCode partitioning, and the batches appended to a real partition log."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.coordinator.group import OffsetAndMetadata, java_string_hash, partition_for
from sluice.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    RecordError,
    build_batch,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    read_batches,
    read_group_metadata_value,
    read_key,
    read_offset_commit_value,
    read_subscription_topics,
)
from sluice.log import Log, LogConfig
from sluice.protocol import ErrorCode
from sluice.purgatory import DelayedOperationPurgatory
from sluice.replication.replica_manager import ReplicaManager
from sluice.server.group_runtime import ReplicaManagerGroupLog


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("", 0),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE: Utils.abs gives 0
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # hashed as a UTF-16 surrogate pair
        ("Aa", 2112),  # Java's classic collision with "BB"
        ("BB", 2112),
    ],
)
def test_java_string_hash(s: str, expected: int) -> None:
    assert java_string_hash(s) == expected


def test_partition_for_follows_utils_abs() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    negative = next(
        g for g in (f"consumer-group-{i}" for i in range(1000)) if java_string_hash(g) < 0
    )
    assert partition_for(negative, 50) == abs(java_string_hash(negative)) % 50


def test_offset_commit_key_layout() -> None:
    key = offset_commit_key("g", "t", 3)
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert read_key(key) == OffsetCommitKey("g", "t", 3)
    assert read_key(b"\x00\x00" + key[2:]) == OffsetCommitKey("g", "t", 3)  # v0 reads too


def test_group_metadata_key_layout_and_unknown_versions() -> None:
    assert group_metadata_key("grp") == b"\x00\x02\x00\x03grp"
    assert read_key(group_metadata_key("grp")) == GroupMetadataKey("grp")
    assert read_key(b"\x00\x05\x00\x01x") is None  # newer protocols' keys are ignored


def test_offset_commit_value_v3_and_v1() -> None:
    v3 = OffsetAndMetadata(42, 7, "meta", 1000)
    raw = offset_commit_value(v3)
    assert raw == struct.pack(">hqih4sq", 3, 42, 7, 4, b"meta", 1000)
    assert read_offset_commit_value(raw) == v3
    no_epoch = OffsetAndMetadata(1, None, "", 5)
    assert read_offset_commit_value(offset_commit_value(no_epoch)) == no_epoch
    v1 = OffsetAndMetadata(9, None, "", 100, 200)
    raw1 = offset_commit_value(v1)
    assert raw1[:2] == b"\x00\x01" and read_offset_commit_value(raw1) == v1
    v0 = struct.pack(">hqh1sq", 0, 5, 1, b"m", 77)
    assert read_offset_commit_value(v0) == OffsetAndMetadata(5, None, "m", 77)
    with pytest.raises(RecordError):
        read_offset_commit_value(b"\x00\x09")
    with pytest.raises(RecordError):
        read_offset_commit_value(raw[:-3])


def test_group_metadata_value_round_trip() -> None:
    value = GroupMetadataValue(
        protocol_type="consumer", generation=4, protocol="range", leader="m1",
        current_state_timestamp=123,
        members=(
            MemberRecord("m1", "static-1", "c1", "/127.0.0.1", 30000, 10000, b"sub1", b"as1"),
            MemberRecord("m2", None, "c2", "/127.0.0.1", 60000, 45000, b"sub2", b""),
        ),
    )  # fmt: skip
    raw = group_metadata_value(value)
    assert raw[:2] == b"\x00\x03"
    assert read_group_metadata_value(raw) == value
    empty = GroupMetadataValue("consumer", 5, None, None, -1, ())
    assert read_group_metadata_value(group_metadata_value(empty)) == empty


def test_group_metadata_value_v0_layout_reads() -> None:
    def s(x: str) -> bytes:
        return struct.pack(">h", len(x)) + x.encode()

    raw = (
        b"\x00\x00" + s("consumer") + struct.pack(">i", 2) + s("range") + s("m1")
        + struct.pack(">i", 1) + s("m1") + s("c1") + s("/h") + struct.pack(">i", 9000)
        + struct.pack(">i", 3) + b"sub" + struct.pack(">i", 2) + b"as"
    )  # fmt: skip
    value = read_group_metadata_value(raw)
    assert value.generation == 2 and value.current_state_timestamp == -1
    (m,) = value.members
    assert (m.member_id, m.session_timeout, m.rebalance_timeout) == ("m1", 9000, 9000)
    assert (m.subscription, m.assignment, m.group_instance_id) == (b"sub", b"as", None)


def test_batches_round_trip_with_tombstones() -> None:
    records: list[tuple[bytes, bytes | None]] = [
        (offset_commit_key("g", "t", 0), offset_commit_value(OffsetAndMetadata(1, None, "", 5))),
        (offset_commit_key("g", "t", 1), None),
        (group_metadata_key("g"), None),
    ]
    batch = build_batch(records, 1_700_000_000_123)
    assert batch[16] == 2  # magic
    (decoded,) = list(read_batches(batch + batch[:20]))  # a partial batch is left out
    base, next_offset, got = decoded
    assert (base, next_offset) == (0, 3) and got == records


def test_subscription_topics_from_consumer_protocol() -> None:
    import io

    from kio.schema.consumer_protocol_subscription.v1 import ConsumerProtocolSubscription
    from kio.serial import entity_writer

    buf = io.BytesIO()
    sub = ConsumerProtocolSubscription(topics=("a", "b"), user_data=None, owned_partitions=())
    entity_writer(ConsumerProtocolSubscription)(buf, sub)
    assert read_subscription_topics(b"\x00\x01" + buf.getvalue()) == ["a", "b"]
    with pytest.raises(RecordError):
        read_subscription_topics(b"\x00\x00\x7f\xff\xff\xff")


def test_group_log_over_a_real_partition(tmp_path: Path) -> None:
    clock = ManualClock(0)

    def make(name: str, purge_interval: int) -> Any:
        return DelayedOperationPurgatory(
            name, purge_interval=purge_interval, reaper_enabled=False, clock=clock
        )

    rm = ReplicaManager(0, make)
    log = Log(tmp_path / "__consumer_offsets-0", LogConfig())
    rm.add_partition(TopicPartition("__consumer_offsets", 0), log, [0])
    group_log = ReplicaManagerGroupLog(rm)
    results: list[tuple[ErrorCode, int]] = []
    for i in range(3):
        value = offset_commit_value(OffsetAndMetadata(i, None, "", 5))
        batch = build_batch([(offset_commit_key("g", "t", i), value)] * 2, 1000)
        group_log.append(0, batch, lambda e, o: results.append((e, o)))
    assert results == [(ErrorCode.none, 0), (ErrorCode.none, 2), (ErrorCode.none, 4)]
    assert group_log.offsets(0) == (0, 6)
    batches = list(read_batches(group_log.read(0, 2, 1 << 20)))
    assert [(b, n) for b, n, _ in batches] == [(2, 4), (4, 6)]
    assert group_log.offsets(1) == (0, 0) and group_log.read(1, 0, 100) == b""
    rm.shutdown()
    log.close()


def test_a_compacted_offsets_partition_loads_the_same_state(tmp_path: Path) -> None:
    """Many commits and a deleted group, compacted by the LogCleaner: a coordinator loading
    the cleaned log sees the same offsets and groups as before cleaning."""
    from sluice.coordinator.group import GroupCoordinator
    from sluice.log.cleaner.log_cleaner import LogCleaner
    from support.group_coordinator import Harness

    clock = ManualClock(1_700_000_000_000)

    def make(name: str, purge_interval: int) -> Any:
        return DelayedOperationPurgatory(
            name, purge_interval=purge_interval, reaper_enabled=False, clock=clock
        )

    rm = ReplicaManager(0, make)
    log = Log(
        tmp_path / "__consumer_offsets-0", LogConfig(segment_bytes=600, cleanup_policy="compact")
    )
    rm.add_partition(TopicPartition("__consumer_offsets", 0), log, [0])

    def coordinator() -> GroupCoordinator:
        h = Harness(partitions=1)  # config and purgatories on a manual clock
        c = GroupCoordinator(
            h.config, ReplicaManagerGroupLog(rm), 1, h.purgatories[0], h.purgatories[1],
            clock=clock,
        )  # fmt: skip
        c.startup([0])
        return c

    writer = coordinator()
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    for i in range(30):
        om = OffsetAndMetadata(i, None, "", clock.milliseconds())
        writer.handle_commit_offsets("g", "", None, -1, {t0: om, t1: om}, lambda _: None)
        writer.handle_commit_offsets("gone", "", None, -1, {t0: om}, lambda _: None)
    writer.handle_delete_groups(["gone"])
    assert log.number_of_segments > 3
    log.roll()
    before = writer.handle_fetch_offsets("g", None)
    size_before = log.size

    cleaned = LogCleaner(lambda: [log]).clean_log(log)
    assert cleaned.stats.records_removed > 0 and log.size < size_before
    reader = coordinator()
    assert reader.handle_fetch_offsets("g", None) == before
    assert before[1][t0] is not None and before[1][t0].offset == 29
    assert reader.group_manager.get_group("gone") is None
    rm.shutdown()
    log.close()
