"""Committed offsets and group membership survive a broker restart (SIGTERM, then start
again on the same data directory): both are reloaded from ``__consumer_offsets``."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTP

from support.brokers import BrokerProcess
from support.clients import create_topic, produce
from support.groups import ConsumerThread
from support.waiting import wait_until

OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "10",
}


def test_offsets_and_a_stable_group_survive_a_restart(tmp_path: Path) -> None:
    overrides = {k.replace(".", "_"): v for k, v in OVERRIDES.items()}
    broker = BrokerProcess(tmp_path / "data", **overrides)
    broker.start()
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    try:
        create_topic(broker.bootstrap, topic, 4)
        first = [f"a{i}".encode() for i in range(40)]
        produce(broker.bootstrap, topic, first, 4)
        # A member that stays subscribed across the restart (session 30 s).
        member = ConsumerThread(broker.bootstrap, group, topic, **{"session.timeout.ms": 30_000})
        member.start()
        wait_until(lambda: len(member.records) == 40, 30, "40 records before the restart")
        committed = _committed(broker.bootstrap, group, topic)
        assert committed == {p: 10 for p in range(4)}

        assert broker.stop(signal.SIGTERM) == 0, broker.log_tail()
        broker.start()  # same port, same data directory

        second = [f"b{i}".encode() for i in range(40)]
        produce(broker.bootstrap, topic, second, 4)
        # The member carries on in its generation: the group was reloaded as Stable.
        wait_until(lambda: len(member.records) == 80, 60, "40 more records after the restart")
        member.stop()
        assert sorted(member.records) == sorted(first + second)
        assert _committed(broker.bootstrap, group, topic) == {p: 20 for p in range(4)}
        log = broker.log_path.read_text()
        assert f"Loaded group {group} generation 1 in state Stable with 1 members" in log
        assert log.count(f"Stabilized group {group} ") == 1  # no rebalance on the way

        # The group is Empty now; its offsets still come back after another restart.
        assert broker.stop(signal.SIGTERM) == 0, broker.log_tail()
        broker.start()
        assert _committed(broker.bootstrap, group, topic) == {p: 20 for p in range(4)}
    finally:
        broker.stop()


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([CTP(topic, p) for p in range(4)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()
