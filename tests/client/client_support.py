"""Helpers for the client tests: polling waits, a reference batch reader, clusters."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

with warnings.catch_warnings():  # kafka-python's schema loader uses deprecated APIs
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401
    from kafka.record import MemoryRecords

from sluice.client.net.cluster import Cluster, Node, PartitionInfo

NODE1 = Node(1, "127.0.0.1", 9092)
NODE2 = Node(2, "127.0.0.1", 9093)


def wait_until(condition: Callable[[], bool], timeout_s: float = 10, what: str = "") -> None:
    """Poll ``condition`` until true (no fixed sleeps); fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.002)


def cluster(*partitions: tuple[str, int, Node | None]) -> Cluster:
    """A cluster of NODE1 and NODE2 with the given (topic, partition, leader)."""
    return Cluster("test", [NODE1, NODE2], [PartitionInfo(t, p, n) for t, p, n in partitions])


def read_batches(data: Any) -> list[dict[str, Any]]:
    """Parse record batches with kafka-python's independent reader (CRC checked)."""
    records = MemoryRecords(bytes(data))
    out = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc(), "CRC mismatch"
        out.append(
            {
                "compression": batch.compression_type,
                "producer_id": batch.producer_id,
                "producer_epoch": batch.producer_epoch,
                "base_sequence": batch.base_sequence,
                "records": [
                    (r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch
                ],
            }
        )
    return out


class MockClient:
    """A stand-in for NetworkClient (Kafka's MockClient): records requests and
    completes them with responses the test supplies."""

    def __init__(self, versions: dict[int, tuple[int, int]] | None = None) -> None:
        from sluice.protocol import ApiKey

        self.versions = versions or {
            ApiKey.PRODUCE: (3, 11),
            ApiKey.METADATA: (1, 12),
            ApiKey.INIT_PRODUCER_ID: (0, 5),
        }
        self.sent: list[tuple[Any, int, Any]] = []  # (ClientRequest, version, body)
        self.in_flight: list[Any] = []
        self.completed: list[Any] = []
        self.ready_nodes: set[int] | None = None
        self.correlation_id = 0

    def ready(self, node: Node, now_ms: int) -> bool:
        return self.ready_nodes is None or node.id in self.ready_nodes

    def poll_delay_ms(self, node: Node, now_ms: int) -> int:
        return 50

    def least_loaded_node(self, now_ms: int) -> Node:
        return NODE1

    def latest_usable_version(self, node_id: int, api_key: int) -> int:
        from sluice.client.errors import UnsupportedVersionException

        if api_key not in self.versions:
            raise UnsupportedVersionException(f"The broker does not support API {api_key}")
        return self.versions[api_key][1]

    def send(self, request: Any, now_ms: int) -> None:
        from sluice.client.net.client_request import ClientResponse, InFlightRequest

        version = request.version
        if version is None:
            version = self.latest_usable_version(request.destination, request.api_key)
        body = request.build(version)
        self.correlation_id += 1
        in_flight = InFlightRequest(
            request.destination, self.correlation_id, request.api_key, version,
            request.expect_response, now_ms, request.callback, request.decode,
        )  # fmt: skip
        self.sent.append((request, version, body))
        if request.expect_response:
            self.in_flight.append(in_flight)
        else:
            self.completed.append(ClientResponse(in_flight, now_ms, None))

    def respond(self, body: Any, *, disconnected: bool = False, timed_out: bool = False) -> None:
        """Answer the oldest in-flight request."""
        from sluice.client.net.client_request import ClientResponse

        request = self.in_flight.pop(0)
        self.completed.append(
            ClientResponse(request, 0, body, disconnected=disconnected, timed_out=timed_out)
        )

    def respond_produce(self, responses: dict[Any, Any]) -> None:
        from sluice.client.producer.produce_request import ProduceResponseData

        self.respond(ProduceResponseData(responses, 0))

    def poll(self, timeout_ms: int, now_ms: int) -> list[Any]:
        completed, self.completed = self.completed, []
        for response in completed:
            response.on_complete()
        return completed

    def has_in_flight_requests(self, node_id: int | None = None) -> bool:
        return bool(self.in_flight)

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return len(self.in_flight)

    def wakeup(self) -> None:
        pass

    def close(self) -> None:
        while self.in_flight:
            self.respond(None, disconnected=True)
        self.poll(0, 0)

    def produce_batches(self, index: int = -1) -> dict[Any, bytes]:
        """The record batches of a sent Produce request, by topic-partition."""
        from kio.serial import entity_reader

        from sluice.base import TopicPartition
        from sluice.protocol import ApiKey
        from sluice.protocol.apis import request_type

        produce = [s for s in self.sent if s[0].api_key == ApiKey.PRODUCE]
        _, version, body = produce[index]
        raw = b"".join(bytes(segment) for segment in body)
        request, _ = entity_reader(request_type(ApiKey.PRODUCE, version))(raw, 0)
        return {
            TopicPartition(t.name, p.index): bytes(p.records)
            for t in request.topic_data
            for p in t.partition_data
        }


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` through CreateTopics (confluent-kafka's admin client)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    del admin


Consumed = tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]


def consume_confluent(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[Consumed]:
    """Read ``count`` records from the start of a partition with confluent-kafka."""
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as TP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TP(topic, partition, OFFSET_BEGINNING)])
    out: list[Consumed] = []
    deadline = time.monotonic() + 20
    try:
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            headers = [(k, v) for k, v in message.headers() or []]
            out.append((message.key(), message.value(), headers, message.timestamp()[1]))
    finally:
        consumer.close()
    return out


def consume_kafka_python(
    bootstrap: str, topic: str, count: int, partition: int = 0
) -> list[Consumed]:
    """Read ``count`` records from the start of a partition with kafka-python."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer
        from kafka import TopicPartition as TP

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")  # fmt: skip
    consumer.assign([TP(topic, partition)])
    consumer.seek_to_beginning()
    out: list[Consumed] = []
    deadline = time.monotonic() + 20
    try:
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out += [(r.key, r.value, list(r.headers), r.timestamp) for r in records]
    finally:
        consumer.close()
    return out
