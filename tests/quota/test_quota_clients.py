"""Client quotas with real clients: set through the admin APIs (Sluice's admin client and
kafka-python's raw AlterClientQuotas; confluent-kafka has no quota admin API), a
producer or consumer over its quota throttled (``throttle_time_ms`` seen, bytes counted
over a bounded window with loose bounds), other clients served meanwhile, the quotas
kept across a restart."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

import sluice
from sluice.client import Admin, NewTopic
from sluice.client.errors import KafkaException

pytestmark = pytest.mark.integration

MESSAGE = b"x" * 1000


@pytest.fixture
def quotas(broker: sluice.EmbeddedBroker) -> Iterator[Admin]:
    """The admin client, and every quota removed afterwards."""
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        yield admin
        for entity, values in admin.describe_client_quotas():
            admin.alter_client_quotas([(entity, dict.fromkeys(values))])


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"quota-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions)])
    return name


def _produce_for(
    bootstrap: str, topic: str, client_id: str, seconds: float
) -> tuple[int, list[int]]:
    """Produce 1 kB records as fast as confluent-kafka takes them for ``seconds``; the
    bytes acknowledged meanwhile and the throttle times the broker reported."""
    delivered = [0]
    throttles: list[int] = []

    def on_delivery(err: object, msg: confluent_kafka.Message) -> None:
        if err is None:
            delivered[0] += len(msg.value() or b"")

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 2,
        "batch.size": 16384, "queue.buffering.max.kbytes": 4096,
        "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
    })  # fmt: skip
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, MESSAGE, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    counted = delivered[0]
    producer.purge()
    producer.flush(5)
    return counted, throttles


def test_a_producer_over_its_quota_is_throttled_and_others_are_not(
    broker: sluice.EmbeddedBroker, quotas: Admin
) -> None:
    bootstrap = broker.bootstrap_servers
    topic = _topic(bootstrap)
    quota = 20_000  # bytes/s
    quotas.alter_client_quotas([({"client-id": "slow"}, {"producer_byte_rate": float(quota)})])
    assert quotas.describe_client_quotas([("client-id", 0, "slow")]) == [
        ({"client-id": "slow"}, {"producer_byte_rate": 20000.0})
    ]
    window_s = 3.0
    slow: list[tuple[int, list[int]]] = []
    thread = threading.Thread(
        target=lambda: slow.append(_produce_for(bootstrap, topic, "slow", window_s))
    )
    thread.start()
    fast_bytes, fast_throttles = _produce_for(bootstrap, topic, "fast", window_s)
    thread.join(30)
    slow_bytes, slow_throttles = slow[0]
    # Kafka's rate counts ten windows at least: up to 10 s of quota may go at once, then
    # the window's worth, plus the batches in flight when the throttle began.
    assert slow_bytes <= quota * (10 + window_s) + 200_000, slow_bytes
    assert slow_throttles and max(slow_throttles) > 0
    assert fast_throttles == [] or max(fast_throttles) == 0
    assert fast_bytes > slow_bytes  # the other client was served meanwhile


def test_kafka_python_sets_quotas_and_its_producer_is_throttled(
    broker: sluice.EmbeddedBroker, quotas: Admin
) -> None:
    bootstrap = broker.bootstrap_servers
    topic = _topic(bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        entry = AlterClientQuotasRequest.EntryData
        answer = admin._manager.run(admin._manager.send, AlterClientQuotasRequest(
            entries=[entry(
                entity=[entry.EntityData(entity_type="user", entity_name=None),
                        entry.EntityData(entity_type="client-id", entity_name="kp")],
                ops=[entry.OpData(key="producer_byte_rate", value=10000.0, remove=False)],
            ), entry(
                entity=[entry.EntityData(entity_type="user", entity_name="")],
                ops=[entry.OpData(key="producer_byte_rate", value=1.0, remove=False)],
            )],
            validate_only=False,
        ))  # fmt: skip
        assert [e.error_code for e in answer.entries] == [0, 42]  # INVALID_REQUEST
        assert answer.entries[1].error_message == "Empty user not supported"
        described = admin._manager.run(
            admin._manager.send, DescribeClientQuotasRequest(components=[], strict=False)
        )
        assert [(
            [(c.entity_type, c.entity_name) for c in e.entity],
            [(v.key, v.value) for v in e.values],
        ) for e in described.entries] == [
            ([("user", None), ("client-id", "kp")], [("producer_byte_rate", 10000.0)])
        ]  # fmt: skip
    finally:
        admin.close()
    acknowledged = [0]

    def acked(_metadata: object) -> None:
        acknowledged[0] += len(MESSAGE)

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="kp", linger_ms=2,
                             batch_size=16384)  # fmt: skip
    try:
        deadline = time.monotonic() + 3
        sent = 0
        while time.monotonic() < deadline:
            if sent - acknowledged[0] > 32 * len(MESSAGE):  # 32 kB waiting: hold back
                time.sleep(0.01)
                continue
            producer.send(topic, MESSAGE).add_callback(acked)
            sent += len(MESSAGE)
        counted = acknowledged[0]
        producer.flush(timeout=30)  # what is left waits out its throttle
    finally:
        producer.close(timeout=5)
    # 10 s of quota may go at once, then the window's; an unthrottled producer sends
    # megabytes meanwhile.
    assert 0 < counted <= 10_000 * (10 + 3) + 300_000, counted


def test_a_consumer_over_its_quota_is_throttled(
    broker: sluice.EmbeddedBroker, quotas: Admin
) -> None:
    bootstrap = broker.bootstrap_servers
    topic = _topic(bootstrap)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 16384}
    )
    for _ in range(3000):
        producer.produce(topic, MESSAGE)
    assert producer.flush(30) == 0
    quota = 50_000
    quotas.alter_client_quotas([({"client-id": "reader"}, {"consumer_byte_rate": float(quota)})])

    def consumed_in(client_id: str, seconds: float) -> int:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id,
                                 group_id=None, auto_offset_reset="earliest")  # fmt: skip
        consumer.assign([TopicPartition(topic, 0)])
        total = 0
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and total < 3000 * len(MESSAGE):
                for records in consumer.poll(timeout_ms=200).values():
                    total += sum(len(r.value) for r in records)
        finally:
            consumer.close()
        return total

    free = consumed_in("free", 20)
    assert free == 3000 * len(MESSAGE)  # everything, unthrottled
    throttled = consumed_in("reader", 4)
    # One Fetch may take ten windows of the quota; the next one over it is answered
    # empty and throttled for seconds.
    assert 0 < throttled <= quota * (10 + 4) + 100_000, throttled
    assert throttled < free


def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    with (
        sluice.EmbeddedBroker(log_dir=tmp_path) as broker,
        Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin,
    ):
        admin.alter_client_quotas([
            ({"user": "alice"}, {"producer_byte_rate": 1024.0, "request_percentage": 25.5}),
            ({"client-id": None}, {"consumer_byte_rate": 2048.0}),
        ])  # fmt: skip
        admin.alter_client_quotas([({"user": "bob"}, {"producer_byte_rate": 1.0})],
                                  validate_only=True)  # fmt: skip
    with sluice.EmbeddedBroker(log_dir=tmp_path) as broker:
        with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
            found = sorted(admin.describe_client_quotas(), key=str)
            with pytest.raises(KafkaException, match="Invalid configuration key"):
                admin.alter_client_quotas([({"user": "bob"}, {"retention.ms": 1.0})])
        in_force = broker.broker.client_quotas.managers.quotas()
    assert found == [
        ({"client-id": None}, {"consumer_byte_rate": 2048.0}),
        ({"user": "alice"}, {"producer_byte_rate": 1024.0, "request_percentage": 25.5}),
    ]
    assert len(in_force) == 2


def test_an_aiokafka_producer_is_throttled_by_a_user_quota(
    broker: sluice.EmbeddedBroker, quotas: Admin
) -> None:
    """A quota of the user every unauthenticated client is (ANONYMOUS) bounds an aiokafka
    producer whatever its client id."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    bootstrap = broker.bootstrap_servers
    topic = _topic(bootstrap)
    quotas.alter_client_quotas([({"user": "ANONYMOUS"}, {"producer_byte_rate": 10_000.0})])

    async def produce_for(seconds: float) -> int:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="aio",
                                    linger_ms=2, max_batch_size=16384)  # fmt: skip
        await producer.start()
        acknowledged = 0
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                batch = [await producer.send(topic, MESSAGE) for _ in range(16)]
                remaining = max(deadline - time.monotonic(), 0.01)
                done, _ = await asyncio.wait(batch, timeout=remaining)
                acknowledged += sum(len(MESSAGE) for f in done if f.exception() is None)
                if len(done) < len(batch):
                    break  # throttled past the window
        finally:
            await producer.stop()
        return acknowledged

    counted = asyncio.run(produce_for(3))
    assert 0 < counted <= 10_000 * (10 + 3) + 300_000, counted
