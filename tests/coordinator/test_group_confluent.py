"""confluent-kafka (librdkafka) consumer groups against an embedded broker: members join,
leave and die; static membership; the cooperative-sticky assignor."""

from __future__ import annotations

from typing import Any

import sluice
from support.clients import create_topic, produce
from support.groups import ConsumerProcess, ConsumerThread, assert_spread, coordinator_view
from support.waiting import wait_until

PARTITIONS = 12


def _generation(broker: sluice.EmbeddedBroker, group: str) -> int:
    def read() -> int:
        return int(broker.broker.group_coordinator.group_manager.get_group(group).generation_id)

    return int(broker.call(read))


def _wait_spread(bootstrap: str, group: str, members: list[Any], timeout_s: float = 30) -> None:
    """The coordinator's group is Stable with exactly ``members``, whose own views of what
    they own match its assignment, and that assignment spreads all partitions."""

    def settled() -> bool:
        state, view = coordinator_view(bootstrap, group)
        if state != "STABLE" or len(view) != len(members):
            return False
        # A cooperative rebalance passes through a Stable interim generation in which
        # revoked partitions are not yet reassigned: wait for the complete spread.
        owned = sorted(p for m in members for p in m.owned)
        if owned != list(range(PARTITIONS)):
            return False
        return sorted(map(sorted, view.values())) == sorted(sorted(m.owned) for m in members)

    wait_until(settled, timeout_s, f"{len(members)} members sharing {group}")
    assert_spread([set(m.owned) for m in members], PARTITIONS)


def _wait_consumed(members: list[Any], total: int, timeout_s: float = 30) -> None:
    wait_until(lambda: sum(len(m.records) for m in members) >= total, timeout_s, f"{total} records")


def test_members_join_leave_and_die_without_losing_or_repeating_records(
    broker: sluice.EmbeddedBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS)
    produced: list[bytes] = []

    def produce_batch(tag: str) -> None:
        values = [f"{tag}-{i}".encode() for i in range(60)]
        produce(bootstrap, topic, values, PARTITIONS)
        produced.extend(values)

    a = ConsumerThread(bootstrap, group, topic).start()
    everyone: list[Any] = [a]
    produce_batch("one")
    _wait_spread(bootstrap, group, [a])
    _wait_consumed(everyone, len(produced))

    b = ConsumerThread(bootstrap, group, topic).start()
    everyone.append(b)
    _wait_spread(bootstrap, group, [a, b])
    produce_batch("two")
    _wait_consumed(everyone, len(produced))

    c = ConsumerProcess(bootstrap, group, topic, **{"session.timeout.ms": 6000})
    everyone.append(c)
    _wait_spread(bootstrap, group, [a, b, c])
    produce_batch("three")
    _wait_consumed(everyone, len(produced))

    b.stop()  # a clean close: LeaveGroup, then the others share its partitions
    _wait_spread(bootstrap, group, [a, c])
    produce_batch("four")
    _wait_consumed(everyone, len(produced))

    c.kill()  # SIGKILL: no LeaveGroup; the session timeout (6 s) removes it
    _wait_spread(bootstrap, group, [a], timeout_s=30)
    produce_batch("five")
    _wait_consumed(everyone, len(produced))

    a.stop()
    got = [r for m in everyone for r in m.records]
    assert sorted(got) == sorted(produced)  # nothing lost, nothing read twice
    assert a.errors == [] or all("commit" in e for e in a.errors), a.errors


def test_static_member_rejoining_within_session_timeout_keeps_its_partitions(
    broker: sluice.EmbeddedBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS)
    conf: dict[str, Any] = {"session.timeout.ms": 10_000}
    s1 = ConsumerThread(bootstrap, group, topic, **{"group.instance.id": "i1"}, **conf).start()
    s2 = ConsumerThread(bootstrap, group, topic, **{"group.instance.id": "i2"}, **conf).start()
    _wait_spread(bootstrap, group, [s1, s2])
    before, generation = set(s1.owned), _generation(broker, group)
    s2_rebalances = s2.rebalances

    s1.stop()  # a static member sends no LeaveGroup: its partitions wait for it
    back = ConsumerThread(bootstrap, group, topic, **{"group.instance.id": "i1"}, **conf).start()
    wait_until(lambda: back.owned == before, 20, "the restarted static member's partitions")
    _wait_spread(bootstrap, group, [back, s2])
    assert _generation(broker, group) == generation  # no rebalance
    assert s2.rebalances == s2_rebalances
    produce(bootstrap, topic, [f"v{i}".encode() for i in range(24)], PARTITIONS)
    _wait_consumed([back, s2], 24)
    back.stop()
    s2.stop()


def test_cooperative_sticky_assignor(broker: sluice.EmbeddedBroker, topic: str, group: str) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    first = ConsumerThread(bootstrap, group, topic, **conf).start()
    _wait_spread(bootstrap, group, [first])
    produce(bootstrap, topic, [f"a{i}".encode() for i in range(48)], PARTITIONS)
    second = ConsumerThread(bootstrap, group, topic, **conf).start()
    third = ConsumerThread(bootstrap, group, topic, **conf).start()
    _wait_spread(bootstrap, group, [first, second, third])
    produce(bootstrap, topic, [f"b{i}".encode() for i in range(48)], PARTITIONS)
    members = [first, second, third]
    _wait_consumed(members, 96)
    view = coordinator_view(bootstrap, group)[1]
    assert len(view) == 3
    second.stop()
    _wait_spread(bootstrap, group, [first, third])
    first.stop()
    third.stop()
    got = sorted(r for m in members for r in m.records)
    assert got == sorted(
        [f"a{i}".encode() for i in range(48)] + [f"b{i}".encode() for i in range(48)]
    )
