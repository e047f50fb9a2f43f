"""Fetch sessions (KIP-227): full/incremental contexts, epochs, forgetting, eviction."""

from __future__ import annotations

from sluice.base import TopicPartition
from sluice.protocol import ErrorCode
from sluice.replication.fetch_session import FetchSessionCache, PartitionState

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def states(*tps: TopicPartition, offset: int = 0) -> dict[TopicPartition, PartitionState]:
    return {tp: PartitionState(offset, 1024) for tp in tps}


def test_sessionless_full_fetch() -> None:
    cache = FetchSessionCache()
    ctx = cache.new_context(0, -1, states(A, B), [], privileged=False, now_ms=0)
    assert ctx.session_id == 0 and not ctx.incremental and len(cache) == 0
    assert list(ctx.partitions) == [A, B]


def test_full_fetch_creates_a_session_and_incremental_fetches_follow() -> None:
    cache = FetchSessionCache()
    full = cache.new_context(0, 0, states(A, B), [], privileged=False, now_ms=0)
    sid = full.session_id
    assert sid != 0 and len(cache) == 1
    # The full response includes every partition and records what was sent.
    assert full.include(A, ErrorCode.none, hw=5, lso=5, start=0, size=0)
    assert full.include(B, ErrorCode.none, hw=0, lso=0, start=0, size=0)
    # Epoch 1: nothing new on A or B -> neither is in the response.
    inc = cache.new_context(sid, 1, {}, [], privileged=False, now_ms=10)
    assert inc.incremental and set(inc.partitions) == {A, B}
    assert not inc.include(A, ErrorCode.none, hw=5, lso=5, start=0, size=0)
    assert inc.include(B, ErrorCode.none, hw=3, lso=3, start=0, size=0)  # HW moved
    assert inc.include(A, ErrorCode.none, hw=5, lso=5, start=0, size=100)  # has records
    # Epoch 2: add C with a new offset, forget A.
    inc2 = cache.new_context(sid, 2, states(C, offset=7), [A], privileged=False, now_ms=20)
    assert set(inc2.partitions) == {B, C} and inc2.partitions[C].fetch_offset == 7


def test_wrong_epoch_and_unknown_session() -> None:
    cache = FetchSessionCache()
    sid = cache.new_context(0, 0, states(A), [], privileged=False, now_ms=0).session_id
    assert (
        cache.new_context(sid, 5, {}, [], False, 0).error == ErrorCode.invalid_fetch_session_epoch
    )
    assert cache.new_context(999, 1, {}, [], False, 0).error == ErrorCode.fetch_session_id_not_found
    # The session survives a bad epoch: the right one still works.
    assert cache.new_context(sid, 1, {}, [], False, 0).error == ErrorCode.none


def test_final_epoch_closes_the_session() -> None:
    cache = FetchSessionCache()
    sid = cache.new_context(0, 0, states(A), [], privileged=False, now_ms=0).session_id
    ctx = cache.new_context(sid, -1, states(A), [], privileged=False, now_ms=0)
    assert ctx.session_id == 0 and len(cache) == 0


def test_forgetting_everything_ends_the_session() -> None:
    cache = FetchSessionCache()
    sid = cache.new_context(0, 0, states(A), [], privileged=False, now_ms=0).session_id
    ctx = cache.new_context(sid, 1, {}, [A], privileged=False, now_ms=0)
    assert ctx.session_id == 0 and len(cache) == 0


def test_bounded_cache_evicts_stale_then_smaller_sessions() -> None:
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000)
    s1 = cache.new_context(0, 0, states(A), [], False, now_ms=0).session_id
    s2 = cache.new_context(0, 0, states(A, B), [], False, now_ms=500).session_id
    # Full: a one-partition session does not displace equal or larger ones.
    assert cache.new_context(0, 0, states(C), [], False, now_ms=600).session_id == 0
    # A larger session evicts the smallest.
    s3 = cache.new_context(0, 0, states(A, B, C), [], False, now_ms=700).session_id
    assert s3 != 0 and set(cache.sessions) == {s2, s3} and s1 not in cache.sessions
    # Once a session is idle past eviction_ms, anyone may take its slot.
    s4 = cache.new_context(0, 0, states(A), [], False, now_ms=1600).session_id
    assert s4 != 0 and s2 not in cache.sessions and cache.evictions == 2


def test_followers_displace_consumers() -> None:
    cache = FetchSessionCache(max_slots=1)
    cache.new_context(0, 0, states(A, B, C), [], False, now_ms=0)
    follower = cache.new_context(0, 0, states(A), [], privileged=True, now_ms=1)
    assert follower.session_id != 0 and cache.sessions[follower.session_id].privileged


def test_zero_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(max_slots=0)
    assert cache.new_context(0, 0, states(A), [], False, 0).session_id == 0
