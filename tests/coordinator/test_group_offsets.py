"""Committed offsets on a manual clock: generation checks, simple-consumer commits,
metadata limits, append failures, loading from the log, and offset retention."""

from __future__ import annotations

from sluice.base import TopicPartition
from sluice.coordinator.group import GroupState, OffsetAndMetadata
from sluice.coordinator.group.records import read_key
from sluice.protocol import ErrorCode
from support.group_coordinator import START_MS, Harness, MemoryGroupLog, subscription

E = ErrorCode
T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def test_member_commits_and_fetches() -> None:
    h = Harness()
    (a,) = h.stable_group("g", 1)
    assert h.commit("g", {T0: 5, T1: 7}, a, 1, metadata="m") == [{T0: E.none, T1: E.none}]
    error, offsets = h.fetch("g", [T0, T1, U0])
    assert error == E.none
    assert offsets[T0] == OffsetAndMetadata(5, None, "m", START_MS)
    assert offsets[T1] is not None and offsets[T1].offset == 7 and offsets[U0] is None
    assert set(h.fetch("g")[1]) == {T0, T1}  # all partitions when none are named


def test_commit_generation_and_member_checks() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    assert h.commit("g", {T0: 1}, a, 1) == [{T0: E.illegal_generation}]
    assert h.commit("g", {T0: 1}, "ghost", 2) == [{T0: E.unknown_member_id}]
    assert h.commit("g", {T0: 1}) == [{T0: E.unknown_member_id}]  # not a member, not empty
    assert h.commit("unknown", {T0: 1}, "x", 3) == [{T0: E.illegal_generation}]
    assert h.commit("", {T0: 1}, "x", 3) == [{T0: E.illegal_generation}]
    assert h.group("unknown") is None
    # During PreparingRebalance members of the current generation may still commit.
    h.join("g", client_id="c3")
    assert h.commit("g", {T0: 2}, a, 2) == [{T0: E.none}]
    ra, rb = h.join("g", a), h.join("g", b)
    assert ra and rb and h.group("g").is_(GroupState.COMPLETING_REBALANCE)
    assert h.commit("g", {T0: 3}, a, 3) == [{T0: E.rebalance_in_progress}]


def test_simple_consumer_commits_create_an_empty_group() -> None:
    h = Harness()
    assert h.commit("simple", {T0: 10}) == [{T0: E.none}]
    g = h.group("simple")
    assert g.is_(GroupState.EMPTY) and g.protocol_type is None and g.generation_id == 0
    assert h.fetch("simple", [T0])[1][T0].offset == 10
    # A member group that became empty takes simple commits too.
    (a,) = h.stable_group("g", 1)
    h.coordinator.handle_leave_group("g", [(a, None)])
    assert h.commit("g", {T0: 1}) == [{T0: E.none}]


def test_other_groups_are_undisturbed_by_bad_commits() -> None:
    h = Harness()
    (a,) = h.stable_group("good", 1)
    h.commit("bad", {T0: 1}, "x", 9)
    h.commit("good", {T0: 1}, "ghost", 1)
    assert h.commit("good", {T0: 4}, a, 1) == [{T0: E.none}]
    assert h.heartbeat("good", a, 1) == E.none


def test_metadata_too_large_fails_only_that_partition() -> None:
    h = Harness(offset_metadata_max_bytes=10)
    results: list[dict[TopicPartition, E]] = []
    now = h.clock.milliseconds()
    h.coordinator.handle_commit_offsets(
        "g", "", None, -1,
        {T0: OffsetAndMetadata(1, None, "x" * 11, now), T1: OffsetAndMetadata(2, None, "ok", now)},
        results.append,
    )  # fmt: skip
    assert results == [{T0: E.offset_metadata_too_large, T1: E.none}]
    assert h.fetch("g", [T0])[1][T0] is None


def test_offsets_become_visible_when_the_append_completes() -> None:
    h = Harness()
    h.log.defer = True
    results = h.commit("g", {T0: 3})
    assert results == [] and h.fetch("g", [T0])[1][T0] is None
    assert h.group("g").pending_offset_commits
    h.log.release()
    assert results == [{T0: E.none}] and h.fetch("g", [T0])[1][T0].offset == 3
    assert not h.group("g").pending_offset_commits


def test_append_failures_map_to_coordinator_errors() -> None:
    h = Harness()
    h.log.fail_with = E.not_leader_or_follower
    assert h.commit("g", {T0: 3}) == [{T0: E.not_coordinator}]
    h.log.fail_with = E.not_enough_replicas
    assert h.commit("g", {T0: 3}) == [{T0: E.coordinator_not_available}]
    h.log.fail_with = E.message_too_large
    assert h.commit("g", {T0: 3}) == [{T0: E.invalid_commit_offset_size}]
    assert h.fetch("g", [T0])[1][T0] is None and not h.group("g").pending_offset_commits


def test_commit_records_go_to_the_groups_partition() -> None:
    h = Harness(partitions=4)
    h.commit("g", {T0: 3})
    partition = h.coordinator.partition_for("g")
    keys = [read_key(k) for k, _ in h.log.records(partition) if k is not None]
    assert [(k.group, k.topic, k.partition) for k in keys] == [("g", "t", 0)]  # type: ignore[union-attr]


def test_everything_survives_a_reload() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    h.commit("g", {T0: 11, T1: 12}, a, 2, metadata="meta")
    h.commit("simple", {U0: 5})
    h.commit("gone", {U0: 1})
    h.coordinator.handle_delete_groups(["gone"])
    h.commit("g", {T1: 13}, b, 2)

    reloaded = Harness(group_log=h.log)
    g = reloaded.group("g")
    assert g.is_(GroupState.STABLE) and g.generation_id == 2 and g.leader_id == a
    assert list(g.members) == [a, b] and g.protocol_name == "range"
    assert g.get(b).assignment == f"assignment-{b}".encode()
    assert reloaded.fetch("g", [T0, T1])[1] == {
        T0: OffsetAndMetadata(11, None, "meta", START_MS),
        T1: OffsetAndMetadata(13, None, "", START_MS),
    }
    assert reloaded.fetch("simple", [U0])[1][U0].offset == 5
    assert reloaded.group("gone") is None
    assert reloaded.heartbeat("g", a, 2) == E.none
    assert g.subscribed_topics == {"t"}
    # Loaded members that stop heartbeating expire; the group empties and keeps its offsets.
    reloaded.advance(10_001)
    assert g.size == 0 and g.is_(GroupState.EMPTY) and g.generation_id == 3
    assert reloaded.fetch("g", [T0])[1][T0] is not None


def test_requests_while_loading() -> None:
    log = MemoryGroupLog()
    h = Harness(group_log=log, load=False)
    assert h.join("g")[0].error == E.coordinator_load_in_progress
    assert h.heartbeat("g", "m", 1) == E.none  # answered blindly
    assert h.sync("g", "m", 1)[0].error == E.rebalance_in_progress
    assert h.commit("g", {T0: 1}) == [{T0: E.coordinator_load_in_progress}]
    assert h.coordinator.handle_list_groups()[0] == E.coordinator_load_in_progress
    for p in range(4):
        h.coordinator.load_partition(p)
    assert h.join("g")[0].error == E.none


def test_offsets_of_an_empty_group_expire_after_retention() -> None:
    h = Harness(offsets_retention_ms=60_000)
    (a,) = h.stable_group("g", 1, session_ms=30_000)
    h.commit("g", {T0: 1}, a, 1)
    for _ in range(6):
        h.advance(20_000)
        assert h.heartbeat("g", a, 1) == E.none
    assert h.coordinator.cleanup_expired_offsets() == 0  # subscribed to "t": kept
    h.coordinator.handle_leave_group("g", [(a, None)])
    h.advance(59_000)
    assert h.coordinator.cleanup_expired_offsets() == 0
    h.advance(1000)  # retention counts from when the group became empty
    assert h.coordinator.cleanup_expired_offsets() == 1
    assert h.group("g") is None
    partition = h.coordinator.partition_for("g")
    assert h.log.records(partition)[-1][1] is None  # tombstones were written
    assert Harness(group_log=h.log).group("g") is None


def test_stable_group_expires_only_unsubscribed_topics() -> None:
    h = Harness(offsets_retention_ms=60_000)
    (a,) = h.stable_group("g", 1, session_ms=40_000, topics=("t",))
    h.commit("g", {T0: 1, U0: 2}, a, 1)
    for _ in range(2):
        h.advance(30_000)
        assert h.heartbeat("g", a, 1) == E.none
    assert h.coordinator.cleanup_expired_offsets() == 1
    assert set(h.fetch("g")[1]) == {T0}


def test_simple_group_offsets_expire_by_commit_time_and_explicit_expiry() -> None:
    h = Harness(offsets_retention_ms=60_000)
    h.commit("simple", {T0: 1})
    h.advance(30_000)
    h.commit("simple", {T1: 1})
    results: list[dict[TopicPartition, E]] = []
    now = h.clock.milliseconds()
    h.coordinator.handle_commit_offsets(
        "simple", "", None, -1, {U0: OffsetAndMetadata(1, None, "", now, now + 5000)},
        results.append,
    )  # fmt: skip
    h.advance(5000)
    assert h.coordinator.cleanup_expired_offsets() == 1  # U0: its own expire time
    h.advance(25_000)
    assert h.coordinator.cleanup_expired_offsets() == 1  # T0: 60 s after its commit
    assert set(h.fetch("simple")[1]) == {T1}


def test_subscription_helper_matches_kafka_layout() -> None:
    assert subscription("ab") == b"\x00\x00\x00\x00\x00\x01\x00\x02ab\xff\xff\xff\xff"


def test_offsets_of_deleted_topics_are_removed() -> None:
    h = Harness()
    h.commit("a", {T0: 1, U0: 2})
    h.commit("b", {U0: 3})
    assert h.coordinator.handle_deleted_partitions([U0]) == 2
    assert set(h.fetch("a")[1]) == {T0}
    assert h.group("b") is None  # an Empty group left without offsets is gone


def test_generation_minus_one_commits_to_an_empty_group_whatever_the_member_id() -> None:
    h = Harness()
    h.commit("g", {T0: 1})
    assert h.commit("g", {T0: 2}, member_id="admin-client") == [{T0: E.none}]


def test_a_loaded_group_over_capacity_rebalances() -> None:
    h = Harness()
    h.stable_group("g", 3)
    reloaded = Harness(group_log=h.log, group_max_size=2)
    assert reloaded.group("g").is_(GroupState.PREPARING_REBALANCE)
