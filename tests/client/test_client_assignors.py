"""The cooperative-sticky assignor (KIP-429): properties of the assignment, the
two-phase rebalance of a Sluice consumer, and a group shared with librdkafka."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import confluent_kafka
from hypothesis import given, settings
from hypothesis import strategies as st

import sluice
from sluice.client.admin import Admin, NewTopic
from sluice.client.consumer.consumer import Consumer, TopicPartition
from sluice.client.consumer.group_assignors import (
    ASSIGNORS,
    Subscription,
    cooperative_sticky_assign,
    decode_subscription,
    encode_subscription,
    sticky_assign,
)
from support.waiting import wait_until

TP = tuple[str, int]


@st.composite
def groups(draw: Any) -> tuple[dict[str, int], dict[str, Subscription]]:
    """Topics, members subscribed to all of them, and random (valid or stale,
    possibly conflicting) owned partitions."""
    topics = {f"t{i}": draw(st.integers(1, 8)) for i in range(draw(st.integers(1, 3)))}
    members = [f"m{i}" for i in range(draw(st.integers(1, 6)))]
    everything = [(t, p) for t, n in topics.items() for p in range(n + 1)]  # +1: stale
    subs = {}
    for m in members:
        owned = draw(st.lists(st.sampled_from(everything), unique=True, max_size=6))
        subs[m] = Subscription(sorted(topics), None, owned)
    return topics, subs


def _check_complete_and_balanced(
    topics: dict[str, int], result: dict[str, list[TP]], members: list[str]
) -> None:
    assigned = [tp for parts in result.values() for tp in parts]
    assert sorted(assigned) == sorted((t, p) for t, n in topics.items() for p in range(n))
    loads = [len(result[m]) for m in members]
    assert max(loads) - min(loads) <= 1


@settings(max_examples=300, deadline=None)
@given(groups())
def test_sticky_is_complete_balanced_and_keeps_owners(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    topics, subs = group
    result = sticky_assign(topics, subs)
    _check_complete_and_balanced(topics, result, list(subs))
    total = sum(topics.values())
    floor = total // len(subs)
    claims: dict[TP, int] = {}
    for s in subs.values():
        for tp in s.owned_partitions:
            claims[tp] = claims.get(tp, 0) + 1
    for m in sorted(subs):
        valid = {tp for tp in subs[m].owned_partitions if tp[1] < topics[tp[0]]}
        uncontested = {tp for tp in valid if claims[tp] == 1}
        kept = valid & set(result[m])
        # a member keeps what it owned up to the balanced share
        assert len(kept) >= min(len(uncontested), floor)
        if len(valid) <= floor:
            assert uncontested <= kept


@settings(max_examples=200, deadline=None)
@given(groups())
def test_cooperative_withholds_moving_partitions_then_converges(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    topics, subs = group
    first = cooperative_sticky_assign(topics, subs)
    target = sticky_assign(topics, subs)
    owner: dict[TP, str] = {}
    for m in sorted(subs):
        for tp in subs[m].owned_partitions:
            owner.setdefault(tp, m)
    for m, parts in first.items():
        assert set(parts) <= set(target[m])
        for tp in set(target[m]) - set(parts):  # withheld: owned by another member
            assert owner[tp] != m
    # every member revokes what it lost and rejoins owning what it was given
    phase_two = {m: Subscription(s.topics, None, first[m]) for m, s in subs.items()}
    second = cooperative_sticky_assign(topics, phase_two)
    _check_complete_and_balanced(topics, second, list(subs))
    for m in subs:  # nothing kept in phase one moves in phase two
        assert set(first[m]) <= set(second[m])


@given(st.lists(st.integers(2, 6), min_size=1, max_size=4), st.integers(1, 5))
@settings(max_examples=100, deadline=None)
def test_adding_a_member_moves_only_what_balance_needs(counts: list[int], n: int) -> None:
    topics = {f"t{i}": c for i, c in enumerate(counts)}
    subs = {f"m{i}": Subscription(sorted(topics)) for i in range(n)}
    before = sticky_assign(topics, subs)
    subs = {m: Subscription(sorted(topics), None, before[m]) for m in subs}
    subs["new"] = Subscription(sorted(topics))
    after = sticky_assign(topics, subs)
    _check_complete_and_balanced(topics, after, list(subs))
    moved = sum(1 for m in before for tp in before[m] if tp not in after[m])
    assert moved == len(after["new"]) == sum(counts) // (n + 1)


def test_different_subscriptions_are_respected() -> None:
    subs = {
        "a": Subscription(["x"], None, [("x", 0), ("y", 0)]),
        "b": Subscription(["x", "y"], None, [("x", 1)]),
    }
    result = sticky_assign({"x": 2, "y": 2}, subs)
    # a cannot take y: balance comes from x-1, the only partition a can take
    assert result == {"a": [("x", 0), ("x", 1)], "b": [("y", 0), ("y", 1)]}
    assert ASSIGNORS["cooperative-sticky"] is cooperative_sticky_assign


def test_owned_partitions_round_trip() -> None:
    sub = Subscription(["t"], None, [("t", 3), ("t", 1), ("u", 0)])
    decoded = decode_subscription(encode_subscription(sub))
    assert sorted(decoded.owned_partitions) == sorted(sub.owned_partitions)


# -- against a broker -----------------------------------------------------------------


def _create_topic(broker: sluice.EmbeddedBroker, name: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])


def _consumer(broker: sluice.EmbeddedBroker, group: str, events: list[Any]) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "fetch.max.wait.ms": 100,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 200,
            "partition.assignment.strategy": "cooperative-sticky",
        }
    )
    return c


class _PollingThread(threading.Thread):
    def __init__(self, ck: Any) -> None:
        super().__init__(daemon=True)
        self.ck = ck
        self.stopping = threading.Event()
        self.assignment: set[TopicPartition] = set()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.ck.poll(0.05)
            self.assignment = {TopicPartition(t.topic, t.partition) for t in self.ck.assignment()}
        self.ck.close()


def test_two_sluice_consumers_rebalance_cooperatively(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    _create_topic(broker, topic, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    revoked: list[list[TopicPartition]] = []
    with _consumer(broker, group, []) as first:
        first.subscribe(
            [topic], on_revoke=lambda _c, ps: revoked.append(sorted(ps)) if ps else None
        )
        wait_until(lambda: (first.poll(0.05), len(first.assignment()) == 4)[1], 20, "first")
        second = _consumer(broker, group, [])
        second.subscribe([topic])
        stop = threading.Event()
        seen: list[set[TopicPartition]] = [set()]

        def run() -> None:  # JoinGroup waits for every member: poll it in its own thread
            while not stop.is_set():
                second.poll(0.05)
                seen[0] = set(second.assignment())
            second.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:

            def settled() -> bool:
                first.poll(0.05)
                a, b = set(first.assignment()), seen[0]
                return len(a) == 2 and len(b) == 2 and not a & b

            wait_until(settled, 30, "a 2/2 split")
            # the first member revoked only the two partitions that moved, never all four
            assert revoked and all(len(r) == 2 for r in revoked)
        finally:
            stop.set()
            thread.join(15)


def test_group_shared_with_confluent_kafka_cooperative_sticky(
    broker: sluice.EmbeddedBroker, topic: str
) -> None:
    _create_topic(broker, topic, 6)
    group = f"g-{uuid.uuid4().hex[:8]}"
    ck = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 200,
        }
    )
    ck.subscribe([topic])
    poller = _PollingThread(ck)
    poller.start()
    everything = {TopicPartition(topic, p) for p in range(6)}
    try:
        wait_until(lambda: poller.assignment == everything, 20, "confluent-kafka assigned")
        with _consumer(broker, group, []) as c:
            c.subscribe([topic])

            def settled() -> bool:
                c.poll(0.05)
                mine = set(c.assignment())
                return (
                    len(mine) == 3
                    and len(poller.assignment) == 3
                    and mine | poller.assignment == everything
                )

            wait_until(settled, 40, "a disjoint, complete 3/3 split")
            time.sleep(0.5)
            c.poll(0.05)
            assert set(c.assignment()) | poller.assignment == everything
            assert not set(c.assignment()) & poller.assignment
        wait_until(lambda: poller.assignment == everything, 30, "confluent-kafka gets all")
    finally:
        poller.stopping.set()
        poller.join(15)
