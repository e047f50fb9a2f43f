"""kafka-python and aiokafka consumer groups, and kafka-python's group admin calls
(OffsetFetch v8 for several groups, DescribeGroups, ListGroups with filters,
OffsetDelete, DeleteGroups, LeaveGroup by group.instance.id), on an embedded broker."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTP
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KpTP
from kafka.admin import MemberToRemove
from kafka.errors import NoError, UnknownMemberIdError
from kafka.structs import OffsetAndMetadata

import sluice
from support.clients import create_topic, produce
from support.waiting import wait_until

GROUP_TIMEOUTS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300}


class KpConsumerThread:
    """A kafka-python group consumer committing synchronously after each poll."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: Any) -> None:
        self.records: list[bytes] = []
        self.consumer = KafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, **GROUP_TIMEOUTS, **conf,
        )  # fmt: skip
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batches = self.consumer.poll(timeout_ms=500)
            if not batches:
                continue
            try:
                self.consumer.commit()
            except Exception:
                continue  # a rebalance: the new owner reads these again
            self.records.extend(m.value for msgs in batches.values() for m in msgs)
        self.consumer.close()

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def test_kafka_python_group_shares_partitions_and_commits(
    broker: sluice.EmbeddedBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 6)
    values = [f"v{i}".encode() for i in range(60)]
    produce(bootstrap, topic, values, 6)
    first = KpConsumerThread(bootstrap, group, topic)
    second = KpConsumerThread(bootstrap, group, topic)
    members = [first, second]

    def shared() -> bool:
        a, b = first.owned(), second.owned()
        return len(a) == len(b) == 3 and a | b == set(range(6))

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_until(shared, 60, "two kafka-python members sharing 6 partitions")
        wait_until(lambda: sum(len(m.records) for m in members) >= 60, 30, "60 records")
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable" and len(described["members"]) == 2
        assert described["protocol_data"] == "range"
        wait_until(
            lambda: len(admin.list_group_offsets({group: None})[group]) == 6, 10, "6 commits"
        )
        committed = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: om.offset for tp, om in committed.items()} == dict.fromkeys(
            range(6), 10
        )
        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
    finally:
        first.stop()
        second.stop()
    try:
        assert sorted(r for m in members for r in m.records) == sorted(values)
        listed = admin.list_groups(states_filter=["Empty"])
        assert group in {g["group_id"] for g in listed}
        assert {g["group_state"] for g in listed} == {"Empty"}
        assert admin.delete_group_offsets(group, [KpTP(topic, 0)]) == {KpTP(topic, 0): NoError}
        remaining = admin.list_group_offsets({group: None})[group]
        assert {tp.partition for tp in remaining} == set(range(1, 6))
        assert admin.delete_groups([group, "no-such-group"]) == {
            group: "OK",
            "no-such-group": "GroupIdNotFoundError",
        }
        assert admin.list_group_offsets({group: None})[group] == {}
    finally:
        admin.close()


def test_kafka_python_simple_commits_and_static_member_removal(
    broker: sluice.EmbeddedBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 2)
    tp0, tp1 = KpTP(topic, 0), KpTP(topic, 1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    static = None
    try:
        # Simple commits (generation -1) to groups nobody joined; one OffsetFetch v8 reads both.
        other = group + "-other"
        admin.alter_group_offsets(
            group, {tp0: OffsetAndMetadata(7, "x", -1), tp1: OffsetAndMetadata(9, "", -1)}
        )
        admin.alter_group_offsets(other, {tp0: OffsetAndMetadata(3, "", -1)})
        both = admin.list_group_offsets({group: None, other: [tp0, tp1]})
        assert {tp.partition: (om.offset, om.metadata) for tp, om in both[group].items()} == {
            0: (7, "x"),
            1: (9, ""),
        }
        assert {tp.partition: om.offset for tp, om in both[other].items()} == {0: 3, 1: -1}

        static_group = group + "-static"
        static = KafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=static_group,
            group_instance_id="inst-1", enable_auto_commit=False, **GROUP_TIMEOUTS,
        )  # fmt: skip

        def assigned() -> bool:
            assert static is not None
            static.poll(timeout_ms=1000)
            return len(static.assignment()) == 2

        wait_until(assigned, 30, "the static member's assignment")
        removed = admin.remove_group_members(
            static_group,
            [MemberToRemove(group_instance_id="inst-1"), MemberToRemove(group_instance_id="x")],
        )
        assert removed == {"inst-1": NoError, "x": UnknownMemberIdError}
        described = admin.describe_groups([static_group])[static_group]
        assert described["group_state"] == "Empty" and described["members"] == []
    finally:
        if static is not None:
            static.close(autocommit=False)
        admin.close()


def test_aiokafka_group(broker: sluice.EmbeddedBroker, topic: str, group: str) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 4)
    values = [f"a{i}".encode() for i in range(40)]
    produce(bootstrap, topic, values, 4)

    async def run() -> None:
        consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                **GROUP_TIMEOUTS,
            )
            for _ in range(2)
        ]
        for c in consumers:
            await c.start()
        got: list[bytes] = []
        deadline = asyncio.get_running_loop().time() + 60

        def spread() -> bool:
            owned = [{tp.partition for tp in c.assignment()} for c in consumers]
            return len(owned[0]) == len(owned[1]) == 2 and owned[0] | owned[1] == set(range(4))

        while (len(got) < 40 or not spread()) and asyncio.get_running_loop().time() < deadline:
            for c in consumers:
                batches = await c.getmany(timeout_ms=100)
                if batches:
                    try:
                        await c.commit()
                    except Exception:
                        continue
                    got.extend(m.value for msgs in batches.values() for m in msgs)
        assert spread()
        assert sorted(got) == sorted(values)
        committed = [await consumers[0].committed(AioTP(topic, p)) for p in range(4)]
        assert committed == [10, 10, 10, 10]
        for c in consumers:
            await c.stop()

    asyncio.run(run())
