"""Replication throttles, sans-I/O: which partitions a broker throttles, the bound on the
measured rate, and that a sender which holds back while over the bound stays near it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.quota.replication_quota import (
    ALL_PARTITIONS,
    UNBOUNDED,
    ReplicationQuotaManager,
    parse_throttled_replicas,
    throttled_partitions,
)


def test_a_broker_takes_the_entries_that_name_it() -> None:
    assert throttled_partitions(["0:1", "1:2", "2:1"], 1) == frozenset({0, 2})
    assert throttled_partitions(["0:1", "1:2"], 3) == frozenset()
    assert throttled_partitions(["*"], 7) is ALL_PARTITIONS
    assert parse_throttled_replicas(" 0:1 , 3:2 ") == ["0:1", "3:2"]
    assert parse_throttled_replicas("0:x") == []  # stored unvalidated: throttles nothing


def test_is_throttled_follows_the_topic_config_as_it_changes() -> None:
    configs = {"t": "0:1,1:2"}
    quota = ReplicationQuotaManager(ManualClock(0), 1, lambda topic: configs.get(topic, ""))
    assert quota.is_throttled(TopicPartition("t", 0))
    assert not quota.is_throttled(TopicPartition("t", 1))  # broker 2's entry
    assert not quota.is_throttled(TopicPartition("u", 0))
    configs["t"] = "*"
    assert quota.is_throttled(TopicPartition("t", 1))
    configs["t"] = ""
    assert not quota.is_throttled(TopicPartition("t", 0))


def test_unbounded_is_never_exceeded() -> None:
    quota = ReplicationQuotaManager(ManualClock(0), 1, lambda topic: "*")
    quota.record(1 << 40)
    assert quota.bound == UNBOUNDED and not quota.is_bounded
    assert not quota.is_quota_exceeded()
    assert not quota.holds_back(TopicPartition("t", 0), in_sync=False)


def test_the_bound_on_the_windowed_rate() -> None:
    clock = ManualClock(0)
    quota = ReplicationQuotaManager(clock, 1, lambda topic: "*", samples=11, window_s=1)
    quota.update_bound(1000)
    quota.record(10_000)  # over at least ten whole windows: exactly 1,000 B/s
    assert quota.rate() == 1000 and not quota.is_quota_exceeded()
    quota.record(1)
    assert quota.is_quota_exceeded()
    tp = TopicPartition("t", 0)
    assert quota.holds_back(tp, in_sync=False)
    assert not quota.holds_back(tp, in_sync=True)  # the ISR is never held back
    clock.advance(11_000)  # every window forgotten
    assert not quota.is_quota_exceeded()
    quota.update_bound(UNBOUNDED)
    assert not quota.is_bounded


@settings(max_examples=60, deadline=None)
@given(
    bound=st.integers(1_000, 1_000_000),
    share=st.floats(0.001, 1.0),
    step_ms=st.integers(1, 500),
    seconds=st.integers(15, 60),
)
def test_a_sender_that_holds_back_stays_near_the_bound(
    bound: int, share: float, step_ms: int, seconds: int
) -> None:
    """What a leader or follower moves when it sends a chunk (at most a second's worth
    of the bound) only while not over the bound: at most 1.1 times the bound over the
    run (the windowed rate's slack as samples roll over), eleven windows' worth at the
    start, and two chunks. (A chunk larger than the windows hold is
    forgotten before it is paid for: Kafka's windowed rate overshoots there too.)"""
    chunk = max(1, int(bound * share))
    clock = ManualClock(0)
    quota = ReplicationQuotaManager(clock, 1, lambda topic: "*", samples=11, window_s=1)
    quota.update_bound(bound)
    tp = TopicPartition("t", 0)
    sent = 0
    while clock.milliseconds() < seconds * 1000:
        if not quota.holds_back(tp, in_sync=False):
            quota.record(chunk)
            sent += chunk
        clock.advance(step_ms)
    assert sent <= bound * (1.1 * seconds + 11) + 2 * chunk
